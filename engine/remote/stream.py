"""Following one streamed answer, whatever the dialect: pieces appended as they come, the stream given up the moment
the request no longer wants it (cancelled, the syntax stop rule satisfied, the time budget spent), the server's
token and cache figures taken from its last event. Each dialect supplies `Parse`: one event -> a `Piece`."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from waferline.engine.api import ChatRequest, Completion, EditRequest, ShouldCancel


class RemoteError(OSError):
    """The remote engine could not answer: unreachable, timed out, an HTTP error, or a stream that is not its
    dialect. The message names the URL and the reason; `status` is the HTTP status of an error answer, and `reached`
    says whether the server answered at all (False: nothing listens, a timeout, the connection cut mid-answer)."""

    def __init__(self, message: str, *, status: int | None = None, reached: bool = True) -> None:
        super().__init__(message)
        self.status, self.reached = status, reached


@dataclass
class Piece:
    text: str = ""
    logprobs: list[float] = field(default_factory=list)
    stop_reason: str | None = None  # set on the event that ends the answer (waferline's names: stop_token, ...)
    cached_tokens: int | None = None  # prompt tokens the server served from its cache, when it says
    prompt_tokens: int | None = None  # the whole prompt's tokens, when it says
    new_tokens: int | None = None
    more: bool = False  # with stop_reason: figures may still follow (OpenAI's usage comes in a chunk of its own)


Parse = Callable[[dict], Piece]


async def follow(
    events: AsyncIterator[dict], parse: Parse, request: EditRequest | ChatRequest, should_cancel: ShouldCancel,
    where: str,
) -> Completion:  # fmt: skip
    """Read `events` into a Completion; see the module docstring. A stream that ends without its last event is a
    RemoteError: the answer is not known to be whole."""
    should_stop = request.should_stop if isinstance(request, EditRequest) else None
    on_text = request.on_text if isinstance(request, ChatRequest) else None  # a chat reply streamed on
    t0 = time.perf_counter()
    deadline = None if request.time_budget_s is None else t0 + request.time_budget_s
    text, logprobs, stop_reason = "", [], "cancelled"
    first_at: float | None = None
    last = Piece()
    ended = False
    async for event in events:
        piece = parse(event)
        first_at = first_at or time.perf_counter()
        text += piece.text
        if on_text is not None and piece.text:
            on_text(piece.text)
        logprobs += piece.logprobs
        for name in ("cached_tokens", "prompt_tokens", "new_tokens"):
            if getattr(piece, name) is not None:
                setattr(last, name, getattr(piece, name))
        if ended:
            continue  # after the last piece of text: only figures
        if piece.stop_reason is not None:
            stop_reason, ended = piece.stop_reason, True
            if piece.more:
                continue
            break
        if should_cancel():
            stop_reason, ended = "cancelled", True
        elif should_stop is not None and should_stop(text):
            stop_reason, ended = "stop_rule", True
        elif deadline is not None and time.perf_counter() > deadline:
            stop_reason, ended = "time_budget", True
        if ended:
            break
    if not ended:
        raise RemoteError(f"{where}: the stream ended without its last event", reached=False)
    end = time.perf_counter()
    cached = last.cached_tokens or 0
    prompt = last.prompt_tokens if last.prompt_tokens is not None else cached
    return Completion(
        text=text,
        stop_reason=stop_reason,
        prompt_tokens=prompt,
        reused_tokens=cached,
        prefilled_tokens=max(prompt - cached, 0),
        new_tokens=last.new_tokens if last.new_tokens is not None else len(logprobs),
        prefill_s=(first_at or end) - t0,
        decode_s=end - (first_at or end),
        token_logprobs=logprobs,
    )
