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

from waferline.engine.scheduler import Completer, Completion, EditRequest, Job, Scheduler
from waferline.server.options import Options
from waferline.server.stats import Stats

log = logging.getLogger(__name__)


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

    def context_chars(self, max_new_tokens: int) -> int | None:
        return None  # no context limit: the plan's default window

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
        out, reason = "", "stop_token"
        for ch in self.text[: request.max_new_tokens]:
            if should_cancel():
                reason = "cancelled"
                break
            if self.token_delay_s:
                time.sleep(self.token_delay_s)
            out += ch
            if request.should_stop is not None and request.should_stop(out):
                reason = "stop_rule"
                break
        else:
            if len(self.text) > request.max_new_tokens:
                reason = "max_tokens"
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
    """Async front of the scheduler for the event loop: `load` the engine, await `complete`, `precompute` when idle,
    `drop` a closed document's session. Requests that arrive while the engine loads wait for it in the queue."""

    def __init__(self, stats: Stats) -> None:
        self.stats = stats
        self.scheduler = Scheduler()
        self.completer: Completer | None = None
        self.load_error: str | None = None
        self._loaded_once = asyncio.Event()  # set when the first load ends, either way: requests wait for it

    async def load(self, factory: Callable[[], Completer]) -> str:
        """Build the completer on the worker thread (replacing any previous one); its description once ready."""

        def work(_cancel: Callable[[], bool]) -> str:
            self.completer, self.load_error = None, None
            try:
                self.completer = factory()
            except Exception as e:
                self.load_error = f"{type(e).__name__}: {e}"
                raise
            return self.completer.describe()

        job = self.scheduler.submit("__engine__", work)
        try:
            result = await asyncio.wrap_future(job.future)
        finally:
            self._loaded_once.set()
        if result is None:
            raise RuntimeError("superseded by a newer engine configuration")
        return str(result)

    def _run(self, request: EditRequest, should_cancel: Callable[[], bool], job: Job) -> Completion:
        queue_s = (job.started_at or job.submitted_at) - job.submitted_at
        if self.completer is None:  # the model failed to load: answer empty, the user was told why
            return Completion(text="", stop_reason="unavailable", queue_s=queue_s)
        try:
            completion = self.completer.complete(request, should_cancel)
        except ValueError as e:  # a prompt the engine refuses (too long for the context...): an empty answer
            log.warning("engine refused the request for %s: %s", request.session_id, e)
            self.stats.errors += 1
            return Completion(text="", stop_reason="error", queue_s=queue_s)
        completion.queue_s = queue_s
        self.stats.add_generation(
            prompt_tokens=completion.prompt_tokens,
            prefilled_tokens=completion.prefilled_tokens,
            new_tokens=completion.new_tokens,
            prefill_s=completion.prefill_s,
            decode_s=completion.decode_s,
        )
        return completion

    def _submit(self, request: EditRequest, *, idle: bool, document: str | None = None) -> Job:
        """Queue the request under its document's key (by default its session), so a newer one supersedes it."""
        holder: list[Job] = []
        job = self.scheduler.submit(
            document or request.session_id,
            lambda should_cancel: self._run(request, should_cancel, holder[0]),
            idle=idle,
        )
        holder.append(job)
        return job

    async def _await(self, job: Job) -> Completion | None:
        try:
            return await asyncio.wrap_future(job.future)
        except asyncio.CancelledError:
            self.scheduler.cancel(job)  # $/cancelRequest: stop decoding for a request nobody waits for
            raise

    async def complete(self, request: EditRequest) -> Completion | None:
        """The completion, or None if a newer request for the same document superseded this one. A request that
        comes before the engine's first load has ended waits for it (an editor may ask as soon as it opens)."""
        await self._loaded_once.wait()
        return await self._await(self._submit(request, idle=False))

    async def precompute(self, request: EditRequest, *, document: str | None = None) -> Completion | None:
        """Like `complete`, but only while the engine has nothing else to do: any regular request preempts it, and a
        regular request for `document` supersedes it (the request may use a KV session of its own)."""
        return await self._await(self._submit(request, idle=True, document=document))

    def context_chars(self, max_new_tokens: int) -> int | None:
        """The prompt characters the loaded model's context holds (None before a model is loaded, or no limit)."""
        return self.completer.context_chars(max_new_tokens) if self.completer is not None else None

    def describe(self) -> str:
        if self.completer is not None:
            return self.completer.describe()
        return f"failed to load: {self.load_error}" if self.load_error else "no engine loaded"

    def busy(self) -> bool:
        return self.scheduler.pending() > 0

    def drop(self, session_id: str) -> None:
        """Free a closed document's KV session, on the worker thread so it never races a decode."""

        def work(_cancel: Callable[[], bool]) -> None:
            if self.completer is not None:
                self.completer.drop_session(session_id)
                self.completer.drop_session(session_id + "#precompute")  # inline.precompute_session

        self.scheduler.submit(f"drop:{session_id}", work)

    def close(self) -> None:
        self.scheduler.close()


def build_completer(options: Options) -> Completer:
    """The completer the options ask for: the test double when `testCompletion` is set, else the model."""
    if options.test_completion is not None:
        return FixedCompleter(options.test_completion, options.test_token_delay_ms / 1000.0)
    from waferline.engine.scheduler import ModelCompleter

    return ModelCompleter.load(
        options.model,
        backend=options.backend,
        dtype=options.dtype,
        kv_cache_mb=options.kv_cache_mb,
        threads=options.threads,
    )
