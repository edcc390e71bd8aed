"""Each document's context from outside it (definitions from the index, other documents' recent edits), kept while
its prompt window stays put.

That context goes first in the prompt, so any change to it makes the engine prefill the whole prompt again. Looked
up afresh for every request it changes often: a finished line brings a new name and a new definition, another
document typed in changes the index, a region edited elsewhere settles. With several documents typed in at once
(each getting a model answer only every few dozen characters) that made about every other answer a full prefill
(docs/benchmarks-load.md). So a document keeps the context found for its window until the window's start
moves (syntax/plan.py moves it every half budget of typed characters, when the prefix is prefilled again
anyway), the plan's room for it changes, or the document has gone unasked for `keep_s` (coming back to a document
after working elsewhere looks again, and finds what was just edited there).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from waferline.syntax.context import Snippet
from waferline.syntax.plan import CompletionPlan

KEEP_S = 5.0  # a document not asked for this long looks its context up again


@dataclass(frozen=True)
class _Kept:
    prefix_start: int
    budget: int
    used_at: float
    snippets: tuple[Snippet, ...]


class ContextMemo:
    """The outside context last found for each document's window. Thread-safe: lookups run on helper threads."""

    def __init__(
        self,
        keep_s: float = KEEP_S,
        clock: Callable[[], float] = time.monotonic,
        on_hit: Callable[[], None] | None = None,
    ) -> None:
        self.keep_s = keep_s
        self.clock = clock
        self.on_hit = on_hit  # called (outside the lock) for each lookup answered by kept snippets
        self._kept: dict[str, _Kept] = {}
        self._lock = threading.Lock()

    def get(self, uri: str, plan: CompletionPlan, look_up: Callable[[], list[Snippet]]) -> list[Snippet]:
        """The snippets kept for `uri` when its window and budget are the same and it was asked for recently,
        else `look_up()`'s, kept for next time."""
        now = self.clock()
        with self._lock:
            kept = self._kept.get(uri)
            if (
                kept is not None
                and kept.prefix_start == plan.prefix_start
                and kept.budget == plan.context_budget
                and now - kept.used_at <= self.keep_s
            ):
                self._kept[uri] = _Kept(kept.prefix_start, kept.budget, now, kept.snippets)
                hit = list(kept.snippets)
            else:
                hit = None
        if hit is not None:
            if self.on_hit is not None:
                self.on_hit()
            return hit
        found = look_up()
        with self._lock:
            self._kept[uri] = _Kept(plan.prefix_start, plan.context_budget, now, tuple(found))
        return found

    def forget(self, uri: str | None = None) -> None:
        """Drop one document's kept context (closed, opened again), or every document's (new options, engine)."""
        with self._lock:
            if uri is None:
                self._kept.clear()
            else:
                self._kept.pop(uri, None)

    def __len__(self) -> int:
        return len(self._kept)
