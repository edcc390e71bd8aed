"""Warm-ups (server/features/warm.py): on open, focus and after an edit no request followed, the prompt a request at
the cursor would send is prefilled while the engine is idle; a request, an edit or another target cancels it, and
the statistics count what was done and what was cut short. With the engine's test double (a prompt cache by longest
common prefix), so that what was warmed is checked against what the request sent."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from fixed_engine import FixedEngine

from waferline.engine.api import Completion, EditRequest, EngineInfo, ShouldCancel
from waferline.server.background import Background
from waferline.server.document import Document
from waferline.server.features import warm
from waferline.server.features.inline import InlineCompletions
from waferline.server.features.warm import WarmUps, first_screen_cursor
from waferline.server.options import Options
from waferline.server.stats import Stats
from waferline.server.worker import Worker

BODY = "".join(f"def f{i}(x):\n    return x + {i}\n\n\n" for i in range(30))
TEXT = BODY + "def total(values):\n    return "
OPTIONS = Options(precompute=False, min_confidence=0.0)


class Setup:
    def __init__(self, engine: FixedEngine, options: Options = OPTIONS) -> None:
        self.stats = Stats()
        self.worker = Worker(self.stats)
        self.documents: dict[str, Document] = {}
        self.options = options
        self.inline = InlineCompletions(self.worker, self.stats, self.documents, Background())
        self.warmups = WarmUps(self.inline, self.worker, self.documents, Background(), lambda: self.options)
        self.engine = engine

    def open(self, uri: str = "file:///work/shapes.py", text: str = TEXT) -> Document:
        doc = Document.open(uri, "python", text, version=1)
        self.documents[uri] = doc
        self.warmups.opened(doc)
        return doc

    def run(self, main: Callable[[], Awaitable[Any]]) -> Any:
        async def wrapped() -> Any:
            await self.worker.load(lambda: self.engine)
            return await main()

        try:
            return asyncio.run(wrapped())
        finally:
            self.worker.close()


async def until(predicate: Callable[[], bool], what: str, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.005)


def test_a_focused_document_is_warmed_with_the_prompt_its_next_request_sends() -> None:
    s = Setup(FixedEngine(" sum(values)"))
    cursor = len(TEXT)

    async def main() -> Any:
        s.warmups.focused("file:///work/shapes.py", (121, 11))  # before its didOpen, as Neovim's BufEnter may be
        doc = s.open()
        assert doc.cursor == cursor  # (121, 11) is the end of the text's last line
        await until(lambda: s.stats.warmups == 1, "the warm-up")
        return await s.inline.answer(doc, cursor, OPTIONS, explicit=False)

    answer = s.run(main)
    assert answer is not None and answer.text == " sum(values)"
    (warmed,), sent = s.engine.warmed, s.engine.requests[-1]
    assert (warmed.prefix, warmed.suffix, warmed.session_id) == (sent.prefix, sent.suffix, sent.session_id)
    assert s.stats.warmup_tokens > 0 and s.stats.prefilled_tokens_total == 0  # the request found it all cached
    assert s.stats.warmups_cancelled == 0 and s.stats.generations == 1  # a warm-up is no generation


def test_a_document_opened_without_a_cursor_is_warmed_at_the_end_of_its_first_screen() -> None:
    s = Setup(FixedEngine("x"))

    async def main() -> Document:
        doc = s.open()
        await until(lambda: s.stats.warmups == 1, "the warm-up")
        return doc

    doc = s.run(main)
    offset = first_screen_cursor(doc)
    assert doc.text.line_of(offset) == warm.FIRST_SCREEN_LINES - 1 and TEXT[offset] == "\n"
    assert s.engine.warmed[0].prefix.endswith(TEXT[offset - 30 : offset])
    assert s.engine.warmed[0].suffix.startswith(TEXT[offset : offset + 30])


def test_a_cursor_sent_right_after_opening_replaces_the_guess() -> None:
    s = Setup(FixedEngine("x"))

    async def main() -> None:
        doc = s.open()
        s.warmups.focused(doc.uri, (2, 0))  # within OPEN_GRACE_S: the guessed warm-up never starts
        await until(lambda: s.stats.warmups == 1, "the warm-up")

    s.run(main)
    (warmed,) = s.engine.warmed
    assert warmed.prefix.endswith("def f0(x):\n    return x + 0\n") and s.stats.warmups_cancelled == 0


def test_an_edit_no_request_followed_is_warmed_after_a_pause_and_a_request_cancels_it() -> None:
    s = Setup(FixedEngine("x"))

    async def main() -> None:
        doc = s.open()
        await until(lambda: s.stats.warmups == 1, "the warm-up on open")
        edit(doc, "v")
        s.warmups.edited(doc)  # as app.change_document does
        s.warmups.requested(doc, doc.cursor or 0)  # VS Code asks at once: the request warms by itself
        await asyncio.sleep(warm.AFTER_EDIT_S + 0.2)
        assert len(s.engine.warmed) == 1, "no warm-up after an edit a request followed"
        edit(doc, "a")
        s.warmups.edited(doc)  # a paste, an undo: no request follows
        await until(lambda: s.stats.warmups == 2, "the warm-up after the edit")

    s.run(main)
    assert s.engine.warmed[-1].prefix.endswith("return va")


def test_no_warm_up_after_edits_while_several_documents_are_typed_in() -> None:
    s = Setup(FixedEngine("x"))

    async def main() -> None:
        doc = s.open()
        await until(lambda: s.stats.warmups == 1, "the warm-up on open")
        other = s.open("file:///work/other.py")
        await until(lambda: s.stats.warmups == 2, "the warm-up on the second open")
        s.inline.tickets.issue(doc)
        s.inline.tickets.issue(other)  # requests for two documents within the last second: a load
        edit(doc, "v")
        s.warmups.edited(doc)  # no request follows, but no warm-up is even scheduled (no task per keystroke)
        assert s.warmups._task is None
        await asyncio.sleep(warm.AFTER_EDIT_S + 0.2)
        assert s.stats.warmups == 2 and len(s.engine.warmed) == 2

    s.run(main)


class SlowWarm(FixedEngine):
    """Warm-ups that take their time, chunk by chunk, checking for cancellation in between, like the model's."""

    def __init__(self, text: str, chunks: int = 200) -> None:
        super().__init__(text)
        self.chunks = chunks
        self.warming = threading.Event()

    def warm(self, request: EditRequest, should_cancel: ShouldCancel) -> Completion:
        self.warmed.append(request)
        self.warming.set()
        for done in range(self.chunks):
            if should_cancel():
                return Completion(text="", stop_reason="cancelled", prefilled_tokens=done)
            time.sleep(0.005)
        return Completion(text="", stop_reason="prefilled", prefilled_tokens=self.chunks)


def slow_setup() -> tuple[Setup, SlowWarm, Document]:
    """A setup whose warm-ups take a second, and a second document (open, not yet warmed)."""
    engine = SlowWarm("x")
    s = Setup(engine)
    other = Document.open("file:///work/other.py", "python", "y = ", version=1)
    s.documents[other.uri] = other
    return s, engine, other


def test_any_request_preempts_a_running_warm_up_and_is_answered() -> None:
    s, engine, other = slow_setup()

    async def main() -> Any:
        s.open()
        await asyncio.to_thread(engine.warming.wait, 5)
        answer = await s.inline.answer(other, 4, OPTIONS, explicit=False)  # another document's request
        await until(lambda: s.stats.warmups_cancelled == 1, "the warm-up counted as cancelled")
        return answer

    answer = s.run(main)
    assert answer is not None and answer.text == "x"
    # It stopped at a chunk boundary, before its 200 chunks: what it did is counted.
    assert s.stats.warmups == 0 and 0 < s.stats.warmup_tokens < engine.chunks


def test_focus_on_another_document_cancels_the_warm_up_under_way() -> None:
    s, engine, other = slow_setup()

    async def main() -> Document:
        doc = s.open()
        await asyncio.to_thread(engine.warming.wait, 5)
        engine.chunks = 1
        s.warmups.focused(other.uri, (0, 4))
        await until(lambda: s.stats.warmups == 1, "the other document's warm-up")
        return doc

    doc = s.run(main)
    assert s.stats.warmups_cancelled == 1 and [r.session_id for r in engine.warmed] == [doc.uri, other.uri]


class CannotWarm(FixedEngine):
    def describe(self) -> EngineInfo:
        return EngineInfo(description="remote", can_chat=False, can_warm=False)


@pytest.mark.parametrize("case", ["option off", "engine cannot warm"])
def test_no_warm_up_when_switched_off_or_the_engine_keeps_no_cache(case: str) -> None:
    if case == "option off":
        s = Setup(FixedEngine("x"), Options(precompute=False, warm_up=False))
    else:
        s = Setup(CannotWarm("x"))

    async def main() -> None:
        doc = s.open()
        s.warmups.focused(doc.uri, (3, 0))
        await asyncio.sleep(warm.OPEN_GRACE_S + 0.2)

    s.run(main)
    assert not s.engine.warmed and (s.stats.warmups, s.stats.warmups_cancelled) == (0, 0)


def edit(doc: Document, ch: str) -> None:
    """Type `ch` at the end of the document, as app.change_document applies an edit."""
    line, character = doc.text.position_at(len(doc.text.text))
    change = doc.text.apply_change(((line, character), (line, character)), ch, None)
    doc.syntax.apply(change)
    doc.text.version += 1
    doc.cursor = change.new_end
