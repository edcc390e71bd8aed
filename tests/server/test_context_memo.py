"""ContextMemo: a document's outside context is kept while its window stays put, and looked up again otherwise."""

from __future__ import annotations

import dataclasses

from waferline.server.features.context_memo import ContextMemo
from waferline.syntax.context import Snippet
from waferline.syntax.plan import plan_completion

TEXT = "".join(f"def f{i}(a, b):\n    return a + b * {i}\n\n" for i in range(200))


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def looker(found: list[list[Snippet]]):
    """A look-up that returns a new snippet each call, and records the calls."""

    def look_up() -> list[Snippet]:
        snippets = [Snippet("definition", f"# other.py\ndef g{len(found)}(): ...", path="other.py")]
        found.append(snippets)
        return snippets

    return look_up


def test_kept_while_the_window_and_its_room_hold() -> None:
    clock, hits = Clock(), []
    memo = ContextMemo(keep_s=5.0, clock=clock, on_hit=lambda: hits.append(1))
    calls: list[list[Snippet]] = []
    plan = plan_completion(TEXT, len(TEXT) - 10, "python", None, max_context_chars=2000)
    first = memo.get("file:///a.py", plan, looker(calls))
    for _ in range(5):
        clock.now += 1.0  # asked for every second: kept, however long the typing goes on
        assert memo.get("file:///a.py", plan, looker(calls)) == first
    assert len(calls) == 1 and len(hits) == 5


def test_looked_up_again_when_the_window_moves_the_room_changes_or_after_a_pause() -> None:
    clock = Clock()
    memo = ContextMemo(keep_s=5.0, clock=clock)
    calls: list[list[Snippet]] = []
    plan = plan_completion(TEXT, len(TEXT) - 10, "python", None, max_context_chars=2000)
    memo.get("file:///a.py", plan, looker(calls))
    moved = dataclasses.replace(plan, prefix_start=plan.prefix_start + 500)
    assert memo.get("file:///a.py", moved, looker(calls)) == calls[1]
    smaller = dataclasses.replace(moved, context_budget=moved.context_budget - 100)
    assert memo.get("file:///a.py", smaller, looker(calls)) == calls[2]
    clock.now += 5.5  # back to the document after working elsewhere: what was edited there may matter now
    assert memo.get("file:///a.py", smaller, looker(calls)) == calls[3]
    assert memo.get("file:///b.py", smaller, looker(calls)) == calls[4], "each document keeps its own"
    assert len(memo) == 2


def test_forget_one_document_or_all() -> None:
    memo = ContextMemo(clock=Clock())
    calls: list[list[Snippet]] = []
    plan = plan_completion(TEXT, len(TEXT) - 10, "python", None, max_context_chars=2000)
    memo.get("file:///a.py", plan, looker(calls))
    memo.get("file:///b.py", plan, looker(calls))
    memo.forget("file:///a.py")
    memo.get("file:///a.py", plan, looker(calls))
    memo.get("file:///b.py", plan, looker(calls))
    assert len(calls) == 3, "a.py was forgotten (closed), b.py kept"
    memo.forget()
    assert len(memo) == 0
