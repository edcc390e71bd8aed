"""The server's handle on the engine: a request goes in, a Completion comes out, off the event loop.

This module is the adapter between the LSP side (which thinks in text, cursors and syntax) and the engine behind
the `Engine` interface (engine/api.py). Each request is one job on the engine's single-threaded queue
(engine/jobs.py) that calls `Engine.complete` or `Engine.chat`, under a key: a newer request for the same key
supersedes the older one between tokens, and a `$/cancelRequest` (which cancels the awaiting task) stops the
generation too. Every call returns: a Completion, or None when superseded or cancelled.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from collections.abc import Callable

from waferline.engine.api import ChatRequest, ChatUnsupported, Completion, EditRequest, Engine, EngineInfo, ShouldCancel
from waferline.engine.jobs import Job, JobQueue
from waferline.server.options import Options
from waferline.server.stats import Stats

log = logging.getLogger(__name__)

Prepare = Callable[[EditRequest], EditRequest]  # finishes a request on the engine thread, when its job starts


class Worker:
    """Async front of the engine for the event loop: `load` the engine, await `complete` or `chat`, `precompute`
    or `warm` when idle, `drop` a closed document's session. Requests that arrive while the engine loads wait for it."""

    def __init__(self, stats: Stats) -> None:
        self.stats = stats
        self._jobs = JobQueue()
        self._engine: Engine | None = None
        self._info: EngineInfo | None = None  # the engine's own description, taken on the engine thread at load
        self.load_error: str | None = None
        # Clear while a load is under way, set when it ends either way: a request binds the engine it will run on
        # when it is submitted, so it waits for a load that started before it (the first, or a reconfiguration).
        self._ready = asyncio.Event()
        self._loading = 0  # loads submitted and not ended
        self.engines_loaded = 0  # engines built so far: which engine a session's cache belongs to

    async def load(self, factory: Callable[[], Engine]) -> str:
        """Build the engine on the engine thread (replacing any previous one); its description once ready."""
        self._loading += 1
        self._ready.clear()

        def work(_cancel: Callable[[], bool]) -> str:
            if (close := getattr(self._engine, "close", None)) is not None:
                close()  # a remote engine's client and loop thread
            self._engine, self._info, self.load_error = None, None, None
            try:
                engine = factory()
                self._info = engine.describe()
            except Exception as e:
                self.load_error = f"{type(e).__name__}: {e}"
                raise
            self._engine = engine
            self.engines_loaded += 1
            return self._info.description

        job = self._jobs.submit("__engine__", work)
        try:
            result = await asyncio.wrap_future(job.future)
        finally:
            self._loading -= 1
            if self._loading == 0:
                self._ready.set()
        if result is None:
            raise RuntimeError("superseded by a newer engine configuration")
        return str(result)

    async def settled(self) -> None:
        """Wait until the engine's latest load has ended, either way (an editor may ask as soon as it opens)."""
        await self._ready.wait()

    # -- requests ------------------------------------------------------------------------------------------------
    async def complete(self, request: EditRequest, *, prepare: Prepare | None = None) -> Completion | None:
        """The completion, or None if a newer request for the same session superseded it. A prompt the engine
        refuses (too long for its context...) is answered with an empty completion. `prepare` finishes the request
        on the engine thread when its job starts (work a job superseded in the queue never does)."""
        await self.settled()
        return await self._submit(request.session_id, "complete", request, refused_empty=True, prepare=prepare)

    async def precompute(
        self, request: EditRequest, *, document: str | None = None, prepare: Prepare | None = None
    ) -> Completion | None:
        """Like `complete`, but only while the engine has nothing else to do: any regular request preempts it, and a
        regular request for `document` supersedes it (the request may use a KV session of its own)."""
        await self.settled()
        key = document or request.session_id
        return await self._submit(key, "complete", request, refused_empty=True, idle=True, prepare=prepare)

    async def warm(self, request: EditRequest) -> Completion | None:
        """Prefill `request`'s prompt into its session (`Engine.warm`) as an idle job under the document's key: it
        runs only when nothing else waits, any regular job preempts it between chunks, and a regular request for the
        same document (or a newer warm-up or precompute) supersedes it. The completion when it finished, else None.
        Each warm-up is counted once, done or cancelled, apart from the requests' prompt figures: by its job when it
        ran, here when it never did (dropped from the queue, superseded or cancelled first)."""
        await self.settled()
        engine, once = self._engine, _Once()
        if engine is None:
            return None
        stats = self.stats

        def work(cancel: ShouldCancel) -> Completion:
            if not once.claim():
                return Completion(text="", stop_reason="cancelled")
            done = engine.warm(request, cancel)
            if done.stop_reason != "unsupported":
                stats.add_warmup(done=done.stop_reason == "prefilled", prefilled_tokens=done.prefilled_tokens)
            return done

        job = self._jobs.submit(request.session_id, work, idle=True)
        try:
            completion: Completion | None = await asyncio.wrap_future(job.future)
        except asyncio.CancelledError:
            self._jobs.cancel(job)
            if once.claim():
                stats.add_warmup(done=False, prefilled_tokens=0)
            raise
        except ValueError as e:
            log.debug("the engine refused to warm %s: %s", request.session_id, e)
            return None
        if completion is None and once.claim():
            stats.add_warmup(done=False, prefilled_tokens=0)
        return completion if completion is not None and completion.stop_reason == "prefilled" else None

    def can_warm(self) -> bool:
        """Whether the loaded engine keeps a cache a warm-up fills (the local model; not a remote engine)."""
        return self._info is not None and self._info.can_warm

    async def chat(self, request: ChatRequest) -> Completion | None:
        """The assistant's reply, or None when superseded or cancelled (by a newer request for the same session).
        ValueError when the engine refuses the messages, ChatUnsupported when it cannot follow instructions."""
        await self.settled()
        return await self._submit(request.session_id, "chat", request, refused_empty=False)

    async def _submit(
        self, key: str, method: str, request: EditRequest | ChatRequest, *, refused_empty: bool, idle: bool = False,
        prepare: Prepare | None = None,
    ) -> Completion | None:  # fmt: skip
        """Queue the engine's `method` ("complete" or "chat") on the engine thread under `key` and await it: the job
        is the engine's bound method itself, and the accounting (queue time, statistics, a refused prompt) happens
        here, on the event loop."""
        engine = self._engine
        if engine is None:
            if not refused_empty:
                raise ChatUnsupported(f"no engine is loaded ({self.load_error or 'not yet'})")
            return Completion(text="", stop_reason="unavailable")  # the model failed to load: the user was told why
        call: Callable[[ShouldCancel], Completion] = functools.partial(getattr(engine, method), request)
        if prepare is not None and isinstance(request, EditRequest):
            run = getattr(engine, method)

            def call(cancel: ShouldCancel, request: EditRequest = request) -> Completion:
                return run(prepare(request), cancel)

        job = self._jobs.submit(key, call, idle=idle)
        try:
            completion = await asyncio.wrap_future(job.future)
        except asyncio.CancelledError:
            self._jobs.cancel(job)  # $/cancelRequest: stop decoding for a request nobody waits for
            raise
        except ValueError as e:
            if not refused_empty:
                raise
            log.warning("engine refused the request for %s: %s", key, e)
            self.stats.errors += 1
            return Completion(text="", stop_reason="error", queue_s=_queue_s(job))
        done = job.outcome  # the completion, also when it was superseded: its tokens were decoded all the same
        if isinstance(done, Completion):
            done.queue_s = _queue_s(job)
            if done.timings.get("fallback"):
                self.stats.count_shed("fallback_answers")
            self.stats.add_generation(
                prompt_tokens=done.prompt_tokens,
                prefilled_tokens=done.prefilled_tokens,
                new_tokens=done.new_tokens,
                prefill_s=done.prefill_s,
                decode_s=done.decode_s,
                decode_steps=done.decode_steps,
                drafted_tokens=done.drafted_tokens,
                accepted_tokens=done.accepted_tokens,
                draft_sources=done.draft_sources,
            )
        return completion

    # -- what the engine is --------------------------------------------------------------------------------------
    def context_chars(self, max_new_tokens: int) -> int | None:
        """The prompt characters the loaded model's context holds (None before a model is loaded, or no limit)."""
        return self._engine.context_chars(max_new_tokens) if self._engine is not None else None

    def warning(self) -> str | None:
        """What the loaded engine says the user should be told (a remote engine down, the local one answering)."""
        return self._info.warning if self._info is not None else None

    def can_chat(self) -> bool:
        """Whether the loaded engine follows instructions (ask, rewrite); False before or without a model."""
        return self._info is not None and self._info.can_chat

    def describe(self) -> str:
        if self._info is not None:
            return self._info.description
        return f"failed to load: {self.load_error}" if self.load_error else "no engine loaded"

    def busy(self) -> bool:
        return self._jobs.pending() > 0

    def drop(self, session_id: str) -> None:
        """Free a closed document's KV session, on the engine thread so it never races a decode."""

        def work(_cancel: Callable[[], bool]) -> None:
            if self._engine is not None:
                self._engine.drop_session(session_id)
                self._engine.drop_session(session_id + "#precompute")  # inline.precompute_session

        self._jobs.submit(f"drop:{session_id}", work)

    def close(self) -> None:
        self._jobs.close()


class _Once:
    """Claimed by one side only: a warm-up's job when it starts, or its caller when it never ran (any thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._claimed = False

    def claim(self) -> bool:
        with self._lock:
            claimed, self._claimed = self._claimed, True
            return not claimed


def _queue_s(job: Job) -> float:
    return (job.started_at or job.submitted_at) - job.submitted_at


def build_engine(options: Options) -> Engine:
    """The engine the options ask for: a remote server (`engineUrl`, with the local model behind it unless
    `engineFallback` is off) or the local model."""
    if not options.engine_url:
        return _local_engine(options)
    from waferline.engine.fallback import FallbackEngine
    from waferline.engine.remote.engine import RemoteEngine
    from waferline.engine.remote.stream import RemoteError

    try:
        remote = RemoteEngine(
            options.engine_dialect,  # type: ignore[arg-type]  # one of DIALECTS: the option's choices
            options.engine_url,
            model=options.engine_model,
            fim_template=None if options.engine_fim_template == "auto" else options.engine_fim_template,
        )
    except RemoteError as e:
        if not options.engine_fallback:
            raise
        return FallbackEngine(None, _local_engine(options), reason=str(e))
    return FallbackEngine(remote, _local_engine(options)) if options.engine_fallback else remote


def _local_engine(options: Options) -> Engine:
    from waferline.engine.local import LocalEngine

    return LocalEngine.load(
        options.model,
        backend=options.backend,
        weights=options.dtype,
        kv_cache_mb=options.kv_cache_mb,
        threads=options.threads,
        speculate=options.speculate,
    )
