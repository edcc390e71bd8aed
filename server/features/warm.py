"""Warm-ups: the prompt the next suggestion will need, prefilled into the document's KV session before it is asked.

A freshly opened document has nothing in the engine's cache, so its first suggestion pays a cold prefill of the
whole window (suffix, context, prefix: hundreds of tokens) while the user waits. When the user's attention lands in
a document — it is opened, it gets the focus (`waferline/didFocus`, sent by the clients with the cursor), or an edit
was made that no request followed — `WarmUps` plans the prompt a request at the cursor would build (the same
`InlineCompletions.request_at` a real request goes through: syntax plan, repository context, other documents' recent
edits) and hands it to the engine as a warm-up (`Worker.warm`, `Engine.warm`): prefill only, no decoding, an idle job
that runs only when nothing else waits and that any request preempts between chunks. The next request at that cursor
then finds its prompt in the cache and prefills only what was typed since.

One warm-up at a time, for the document the user is in: a newer target cancels the previous one (queued, it is
dropped; running, it stops at its next chunk, and what it prefilled stays, a valid prefix). A request for the
document cancels its warm-up (the request prefills the same prompt itself), and so does an edit of it (which starts
the timer of the after-an-edit warm-up). While requests are waiting or several documents are being typed in (a load,
not a person), a warm-up waits; it gives up after `WAIT_IDLE_S`.

The cursor: LSP does not tell the server where it is, so each document keeps where the user was last seen
(`Document.cursor`: the clients' didFocus, a request's position, the end of the last edit). A document opened with no
cursor known is warmed at the end of its first screen (`FIRST_SCREEN_LINES`), where a file opened at its top is
first read; the clients send their real cursor right after opening, which replaces that guess within `OPEN_GRACE_S`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from waferline.server.document import Document
from waferline.server.features.engine_request import skip_reason
from waferline.server.features.inline import BUSY_WINDOW_S, InlineCompletions
from waferline.server.options import Options
from waferline.syntax.text import PositionError

if TYPE_CHECKING:
    from waferline.server.background import Background
    from waferline.server.worker import Worker

log = logging.getLogger(__name__)

OPEN_GRACE_S = 0.05  # after didOpen, this long for the client's didFocus (with the real cursor) before guessing
AFTER_EDIT_S = 0.3  # an edit that no completion request followed within this long: warm at the edit's end
WAIT_IDLE_S = 5.0  # a warm-up waits this long at most for the engine and the requests to be idle
IDLE_POLL_S = 0.05
FIRST_SCREEN_LINES = 40  # the cursor guessed for a document opened without one: the end of this line (or the last)
PENDING_FOCUS = 64  # cursors told for documents not yet open, kept for their didOpen (oldest dropped)


def cursor_offset(doc: Document, line: int, character: int) -> int:
    """The `str` offset of a position a client told, clamped: a line past the end means the document's end."""
    try:
        return doc.text.offset_at(line, character)
    except PositionError:
        return len(doc.text.text)


def first_screen_cursor(doc: Document) -> int:
    """The end of the first screen: the end of line FIRST_SCREEN_LINES - 1, or of the document when shorter."""
    return doc.text.line_end(min(FIRST_SCREEN_LINES, doc.text.line_count) - 1)


class WarmUps:
    """Warm-ups of the document the user is in; see the module docstring. `options` reads the current options."""

    def __init__(
        self, inline: InlineCompletions, worker: Worker, documents: Mapping[str, Document], background: Background,
        options: Callable[[], Options],
    ) -> None:  # fmt: skip
        self.inline, self.worker, self.documents, self.background = inline, worker, documents, background
        self.options = options
        self._pending: dict[str, tuple[int, int]] = {}  # uri -> (line, character) told before its didOpen
        self._task: asyncio.Task[None] | None = None
        self._target: str | None = None  # the uri the current task warms
        self._last: str | None = None  # the uri of the document the user was last in
        self._warmed_on = 0  # the engine (Worker.engines_loaded) the last finished warm-up ran on

    # -- what the server tells it ----------------------------------------------------------------------------------
    def opened(self, doc: Document) -> None:
        position = self._pending.pop(doc.uri, None)
        if position is not None:
            doc.cursor = cursor_offset(doc, *position)  # told before the document was opened
            self._schedule(doc, 0.0)
        else:
            doc.cursor = first_screen_cursor(doc)
            self._schedule(doc, OPEN_GRACE_S)

    def focused(self, uri: str, position: tuple[int, int] | None) -> None:
        """The client's `waferline/didFocus`: the user is in `uri`, at `position` (line, character) when the client
        says (else where the user was last seen in it). It may come before the document's didOpen."""
        doc = self.documents.get(uri)
        if doc is None:
            if position is not None:
                self._pending[uri] = position
                while len(self._pending) > PENDING_FOCUS:
                    del self._pending[next(iter(self._pending))]
            return
        if position is not None:
            doc.cursor = cursor_offset(doc, *position)
        elif doc.cursor is None:
            doc.cursor = first_screen_cursor(doc)
        self._schedule(doc, 0.0)

    def edited(self, doc: Document) -> None:
        """After a didChange (whose end is now `doc.cursor`): warm there unless a request comes first. Not while
        several documents are typed in at once (a load, not a typist: no idle time to warm in, and a task made and
        cancelled per keystroke costs the event loop)."""
        if self.inline.tickets.typed_in(BUSY_WINDOW_S) > 1:
            self.cancel()
            return
        self._schedule(doc, AFTER_EDIT_S)

    def requested(self, doc: Document, offset: int) -> None:
        """A completion request for `doc` at `offset`: it prefills its own prompt, so a warm-up of it is moot."""
        doc.cursor, self._last = offset, doc.uri
        if self._target == doc.uri:
            self.cancel()

    def closed(self, uri: str) -> None:
        self._pending.pop(uri, None)
        if self._last == uri:
            self._last = None
        if self._target == uri:
            self.cancel()

    def engine_loaded(self) -> None:
        """A new engine has no sessions: warm the document the user was last in again."""
        doc = self.documents.get(self._last) if self._last is not None else None
        under_way = self._task is not None and not self._task.done() and self._target == self._last
        done = self._warmed_on == self.worker.engines_loaded  # it warmed this engine already (after its load)
        if doc is not None and doc.cursor is not None and not under_way and not done:
            self._schedule(doc, 0.0)

    def cancel(self) -> None:
        """Stop the current warm-up, whatever stage it is in (the worker drops or stops its job)."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
        self._task = self._target = None

    # -- the warm-up -----------------------------------------------------------------------------------------------
    def _schedule(self, doc: Document, delay_s: float) -> None:
        self.cancel()
        self._last = doc.uri
        if not self.options().warm_up or not _loop_running():
            return
        self._target = doc.uri
        self._task = self.background.spawn(self._warm(doc, delay_s))

    async def _warm(self, doc: Document, delay_s: float) -> None:
        if delay_s > 0:
            await asyncio.sleep(delay_s)
        await self.worker.settled()  # a document opened while the engine loads is warmed once it is there
        if not self.worker.can_warm() or not await self._until_idle():
            return
        options = self.options()
        if not options.warm_up or self.documents.get(doc.uri) is not doc or doc.cursor is None or doc.out_of_sync:
            return
        snapshot = doc.snapshot()
        if skip_reason(snapshot.text, options) is not None:
            return
        offset = min(doc.cursor, len(snapshot.text))
        context = self.inline.context_for(snapshot)
        built = await self.inline.request_at(snapshot, offset, options, context=context, warming=True)
        if built is None or not snapshot.current(doc):
            return  # nothing a request would send, or the document moved on while this was planned
        engine = self.worker.engines_loaded
        done = await self.worker.warm(built[1])
        if done is not None:
            self._warmed_on = engine
            log.debug("warmed %s at %d: %d of %d prompt tokens prefilled", doc.uri, offset, done.prefilled_tokens,
                      done.prompt_tokens)  # fmt: skip

    async def _until_idle(self) -> bool:
        """Wait while requests are in flight or several documents are being typed in; False after WAIT_IDLE_S."""
        for _ in range(int(WAIT_IDLE_S / IDLE_POLL_S)):
            if self.inline.idle():
                return True
            await asyncio.sleep(IDLE_POLL_S)
        return False


def _loop_running() -> bool:
    """Whether an event loop runs here (the server's always does; code driving the server's state without one,
    as some tests do, gets no warm-ups)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
