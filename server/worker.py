"""The server's handle on the engine: an EditRequest goes in, a Completion comes out, off the event loop.

This module is the adapter between the LSP side (which thinks in text, cursors and syntax) and the engine (which
thinks in tokens and KV sessions). `Worker.complete` is what a handler awaits: it hands the request to the engine's
single-threaded `Scheduler`, so a newer request for the same document supersedes the older one between tokens,
and a `$/cancelRequest` (which cancels the awaiting task) stops the generation too. Every call returns: a
Completion, or None when superseded or cancelled.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from waferline.engine.scheduler import Job, Scheduler
from waferline.server.stats import Stats

log = logging.getLogger(__name__)


@dataclass(kw_only=True)
class EditRequest:
    """What the engine needs to complete at a cursor: prompt parts, stop rules and a budget; no LSP, no tokens."""

    session_id: str  # one KV session per document, so a keystroke reuses that document's cache
    prefix: str  # text before the cursor the model sees (stable context first, see inline.py)
    suffix: str  # text after the cursor the model sees
    max_new_tokens: int = 32
    temperature: float = 0.0
    time_budget_s: float | None = 0.3
    stop_strings: tuple[str, ...] = ()
    # The syntax stop rule: called with the completion so far, True ends generation (end of statement or block).
    should_stop: Callable[[str], bool] | None = None


@dataclass
class Completion:
    text: str
    stop_reason: str  # "stop" (model or stop string), "rule" (syntax stop), "length", "budget", "cancelled"
    prompt_tokens: int = 0
    reused_tokens: int = 0  # prompt tokens served from the session's KV cache
    prefilled_tokens: int = 0  # prompt tokens computed for this request
    new_tokens: int = 0
    prefill_s: float = 0.0
    decode_s: float = 0.0
    queue_s: float = 0.0  # time spent waiting for the worker thread
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        """False when generation was cut short by cancellation: the text may end mid-thought."""
        return self.stop_reason != "cancelled"


class Completer(Protocol):
    """The engine side of a completion. Called only on the scheduler's thread."""

    def complete(self, request: EditRequest, should_cancel: Callable[[], bool]) -> Completion: ...
    def drop_session(self, session_id: str) -> None: ...
    def describe(self) -> str: ...


class FixedCompleter:
    """TEST DOUBLE, selected by the `testCompletion` option: returns a fixed text, one character per token.

    Protocol tests use it so that what they assert does not depend on what a random model generates. It behaves
    like a model in what the protocol can observe: it runs on the worker thread, honours the syntax stop rule,
    checks for cancellation between tokens (sleeping `token_delay_s` per token so tests can supersede it), and
    counts prompt characters as tokens with longest-common-prefix reuse per session, as a KV cache would.
    """

    def __init__(self, text: str, token_delay_s: float = 0.0) -> None:
        self.text = text
        self.token_delay_s = token_delay_s
        self._prompts: dict[str, str] = {}

    def describe(self) -> str:
        return f"test double (fixed completion {self.text!r})"

    def complete(self, request: EditRequest, should_cancel: Callable[[], bool]) -> Completion:
        t0 = time.perf_counter()
        prompt = request.suffix + "\x00" + request.prefix  # suffix-prefix-middle: typing appends
        old = self._prompts.get(request.session_id, "")
        reused = 0
        for a, b in zip(old, prompt, strict=False):
            if a != b:
                break
            reused += 1
        self._prompts[request.session_id] = prompt
        t1 = time.perf_counter()
        out, reason = "", "stop"
        for ch in self.text[: request.max_new_tokens]:
            if should_cancel():
                reason = "cancelled"
                break
            if self.token_delay_s:
                time.sleep(self.token_delay_s)
            out += ch
            if request.should_stop is not None and request.should_stop(out):
                reason = "rule"
                break
        else:
            if len(self.text) > request.max_new_tokens:
                reason = "length"
        return Completion(
            text=out,
            stop_reason=reason,
            prompt_tokens=len(prompt),
            reused_tokens=reused,
            prefilled_tokens=len(prompt) - reused,
            new_tokens=len(out),
            prefill_s=t1 - t0,
            decode_s=time.perf_counter() - t1,
        )

    def drop_session(self, session_id: str) -> None:
        self._prompts.pop(session_id, None)


class Worker:
    """Async front of the scheduler for the event loop: await `complete`, fire `precompute`, `drop` on close."""

    def __init__(self, completer: Completer, stats: Stats) -> None:
        self.completer = completer
        self.stats = stats
        self.scheduler = Scheduler()

    def _run(self, request: EditRequest, should_cancel: Callable[[], bool], job: Job) -> Completion:
        completion = self.completer.complete(request, should_cancel)
        completion.queue_s = (job.started_at or job.submitted_at) - job.submitted_at
        self.stats.add_generation(
            prompt_tokens=completion.prompt_tokens,
            prefilled_tokens=completion.prefilled_tokens,
            new_tokens=completion.new_tokens,
            prefill_s=completion.prefill_s,
            decode_s=completion.decode_s,
        )
        return completion

    def _submit(self, request: EditRequest, *, idle: bool) -> Job:
        holder: list[Job] = []
        job = self.scheduler.submit(
            request.session_id, lambda should_cancel: self._run(request, should_cancel, holder[0]), idle=idle
        )
        holder.append(job)
        return job

    async def complete(self, request: EditRequest) -> Completion | None:
        """The completion, or None if a newer request for the document superseded this one."""
        job = self._submit(request, idle=False)
        try:
            return await asyncio.wrap_future(job.future)
        except asyncio.CancelledError:
            self.scheduler.cancel(job)  # $/cancelRequest: stop decoding for a request nobody waits for
            raise

    async def precompute(self, request: EditRequest) -> Completion | None:
        """Like `complete`, but only while the engine has nothing else to do; any regular request preempts it."""
        job = self._submit(request, idle=True)
        try:
            return await asyncio.wrap_future(job.future)
        except asyncio.CancelledError:
            self.scheduler.cancel(job)
            raise

    def busy(self) -> bool:
        return self.scheduler.pending() > 0

    def drop(self, session_id: str) -> None:
        """Free a closed document's KV session, on the worker thread so it never races a decode."""
        self.scheduler.submit(f"drop:{session_id}", lambda _cancel: self.completer.drop_session(session_id))

    def close(self) -> None:
        self.scheduler.close()
