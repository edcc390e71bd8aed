"""`waferline/ask`'s answer streamed as the model writes it: LSP 3.17 partial results on the request's token.

A `waferline/ask` request that carries a `partialResultToken` (a string or an integer) gets, while the model writes,
`$/progress` notifications `{token, value: {"delta": text}}`: each delta is the text the answer gained since the one
before, so that the deltas joined are the start of the final answer, and at the end the whole of it. Then comes the
request's one response, the whole result as without a token (`answer` is the deltas joined; `markdown` adds the note,
the header and the evidence). Unlike LSP's rule for its own partial results, the final response is not emptied: a
client that ignores the notifications loses nothing. No notification is sent for the token after the response, and
none when no answer is generated (a completion-only model, no evidence, the model wrote nothing); a cancelled request
(`$/cancelRequest`) stops the model, sends no more deltas, and gets its one RequestCancelled error.

What is streamed is the answer as the final response has it (engine/api.py `ChatRequest.on_text` gives the model's
raw text, on the engine's thread): without a leading `<think>…</think>` block, and grounded (features/ask.py
`ground_answer`: citations `[n]` become links to the evidence, the model's own links are unlinked, `file:line`
mentions no evidence holds are flagged). Grounding a text's start gives the start of the grounded whole only at a cut
after whitespace with every `[` closed by a `]` and every `](` by a `)` (`stable_end`), so the text after the last
such cut waits for more: a word is sent once the whitespace after it is written, and at the end the rest comes.

At most one delta every `INTERVAL_S` (the first at once): the engine thread only appends to a buffer and wakes the
event loop when no wake-up is pending, so a fast model costs the loop a few callbacks per 100 ms, not one per token.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from pygls.exceptions import JsonRpcInvalidParams

from waferline.server.params import field

log = logging.getLogger(__name__)

PROGRESS_METHOD = "$/progress"
INTERVAL_S = 0.03  # at most one delta this often: ~3 per 100 ms
RETRY_S = 0.008  # after a look that found nothing to send (the text ends mid-word): the next look at most this soon
THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"


def partial_result_token(params: Any) -> int | str | None:
    """The request's `partialResultToken` (LSP's ProgressToken: an integer or a string), None without one."""
    token = field(params, "partialResultToken")
    if token is None or (isinstance(token, int | str) and not isinstance(token, bool)):
        return token
    raise JsonRpcInvalidParams("waferline/ask: partialResultToken must be an integer or a string")


def reply_so_far(text: str) -> str:
    """The start of the reply `model_tasks.without_reasoning` leaves of the model's text once it is whole: nothing
    while the text is (or may still become) a `<think>` block that has not closed."""
    start = text.lstrip()
    if THINK_OPEN.startswith(start):  # "", "<th", "<think>": a reasoning block may be opening
        return ""
    if not start.startswith(THINK_OPEN):
        return text
    _, closed, rest = start.partition(THINK_CLOSE)
    return rest.lstrip() if closed else ""


def stable_end(text: str) -> int:
    """The longest start of `text` whose grounding is the start of the grounding of any text that begins with it:
    it ends with whitespace, and in it every `[` is followed by a `]` and every `](` by a `)` (a link, a citation or
    a `file:line` mention in it is then whole). 0 when there is none."""
    end = len(text)
    while end > 0:
        bracket = text.rfind("[", 0, end)
        if bracket >= 0 and text.find("]", bracket, end) < 0:
            end = bracket  # every cut after an unclosed `[` is unsafe
            continue
        link = text.rfind("](", 0, end)
        if link >= 0 and text.find(")", link + 2, end) < 0:
            end = link
            continue
        cut = end
        while cut > 0 and not text[cut - 1].isspace():
            cut -= 1
        if cut == end:
            return end
        end = cut  # a shorter start: its brackets are looked at again
    return 0


class AnswerStream:
    """The deltas of one answer: `on_text` from any thread as the model writes, `finish` with the final answer (or
    `close` when there is none) on the event loop. `send(value)` is called on the event loop with each
    `{"delta": ...}`; `ground` turns the model's text into the answer as the response has it."""

    def __init__(
        self, send: Callable[[dict[str, str]], None], ground: Callable[[str], str], *,
        loop: asyncio.AbstractEventLoop | None = None, interval_s: float = INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:  # fmt: skip
        self._send, self._ground, self.interval_s, self._clock = send, ground, interval_s, clock
        self._loop = loop or asyncio.get_running_loop()
        self._lock = threading.Lock()
        self._pieces: list[str] = []  # the model's text so far, as it came
        self._armed = False  # a wake-up is pending on the loop: more text needs none of its own
        self._closed = False
        self._timer: asyncio.TimerHandle | None = None
        self._next = 0.0  # the loop's clock before which nothing is sent
        self.sent = ""  # the deltas sent, joined
        self.chunks = 0  # how many were sent

    def on_text(self, piece: str) -> None:
        """More of the model's text (any thread; returns at once)."""
        with self._lock:
            self._pieces.append(piece)
            if self._armed or self._closed:
                return
            self._armed = True
        with contextlib.suppress(RuntimeError):  # the loop has closed: the server is going away
            self._loop.call_soon_threadsafe(self._wake)

    def _wake(self) -> None:
        if self._closed:
            return
        wait = self._next - self._clock()
        if wait > 0:
            self._timer = self._loop.call_later(wait, self._flush)
        else:
            self._flush()

    def _flush(self) -> None:
        self._timer = None
        with self._lock:
            self._armed = False
            text = "".join(self._pieces)
            self._pieces = [text]
        if self._closed:
            return
        reply = reply_so_far(text)
        sent = self._offer(self._ground(reply[: stable_end(reply)]))
        self._next = self._clock() + (self.interval_s if sent else RETRY_S)

    def _offer(self, answer: str) -> bool:
        """Send what `answer` adds to what was sent; whether anything was."""
        if len(answer) <= len(self.sent):
            return False
        if not answer.startswith(self.sent):  # not expected (stable_end); the final response has the whole answer
            log.debug("an answer's stream parted from what was sent: no more deltas")
            self.close()
            return False
        delta, self.sent = answer[len(self.sent) :], answer
        self.chunks += 1
        self._send({"delta": delta})
        return True

    def finish(self, answer: str) -> None:
        """The final answer: send what it adds to the deltas sent, and nothing after it (the event loop)."""
        if not self._closed:
            self._stop()
            self._offer(answer)
        self.close()

    def close(self) -> None:
        """Send nothing more (the event loop): the request was cancelled, or its answer is not a generated one."""
        self._stop()
        self._closed = True

    def _stop(self) -> None:
        with self._lock:
            self._armed = True  # no more wake-ups from the engine thread
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
