"""The server's handle on the engine: a request goes in, a Completion comes out, off the event loop.

This module is the adapter between the LSP side (which thinks in text, cursors and syntax) and the engine behind
the `Engine` interface (engine/api.py). Each request is one job on the engine's queue (engine/jobs.py) that calls
`Engine.complete` or `Engine.chat`, under a key, on the lane the engine names for it (the engine thread for the
local model; a lane per document for a remote one): a newer request for the same key supersedes the older one
between tokens, and a `$/cancelRequest` (which cancels the awaiting task) stops the generation too. Every call
returns: a Completion, or None when superseded or cancelled.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from collections.abc import Callable

from waferline.engine import heap
from waferline.engine.api import (
    ChatRequest,
    ChatUnsupported,
    Completion,
    EditRequest,
    Engine,
    EngineInfo,
    EngineUnavailable,
    Job,
    JobQueue,
    ShouldCancel,
)
from waferline.server.engine_state import EngineHealth
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
        self.health = EngineHealth()  # how the engine's requests go: its state for the user (server/engine_state.py)
        self.engines_loaded = 0  # engines built so far: which engine a session's cache belongs to

    async def load(self, factory: Callable[[], Engine]) -> str:
        """Build the engine on the engine thread (replacing any previous one); its description once ready."""
        self._loading += 1
        self._ready.clear()

        def work(_cancel: Callable[[], bool]) -> str:
            heap.release()  # the engine this one replaces may be freed (engine/heap.py)
            self._jobs.quiesce()  # requests on other lanes (a remote engine's) end before their engine closes
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
            heap.settle()  # the engine's objects out of the collector's full collections (30 ms each for SmolLM2)
            return self._info.description

        job = self._jobs.submit("__engine__", work)
        try:
            result = await asyncio.wrap_future(job.future)
        finally:
            self._loading -= 1
            if self._loading == 0:
                self._ready.set()
        self.health.reset(self._info.problems if self._info is not None else {})
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

        chat_style = method == "chat" or (isinstance(request, EditRequest) and request.route == "chat")
        route = "chat" if chat_style else "completion"
        job = self._jobs.submit(key, call, idle=idle, lane=engine.lane(request, key))
        try:
            completion = await asyncio.wrap_future(job.future)
        except asyncio.CancelledError:
            self._jobs.cancel(job)  # $/cancelRequest: stop decoding for a request nobody waits for
            raise
        except EngineUnavailable as e:  # logged by the engine once per reason, shown once per outage (health)
            self.stats.errors += 1
            self.health.failed(route, str(e), answered_locally=False)
            if not refused_empty:
                raise
            return Completion(text="", stop_reason="error", queue_s=_queue_s(job))
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
                self.stats.count("fallback_answers")
            if route == "chat":
                self.stats.count("chat_generations")
            if done.unavailable is not None:
                self.health.failed(route, done.unavailable, answered_locally=True)
            elif done.complete:
                self.health.answered(route)
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

    def refresh(self) -> None:
        """Describe the engine again (a remote engine gone or back changes what it says); from the event loop."""
        if self._engine is not None:
            self._info = self._engine.describe()

    def warning(self) -> str | None:
        """What the loaded engine says the user should be told (a remote engine down, the local one answering)."""
        return self._info.warning if self._info is not None else None

    def loaded(self) -> bool:
        return self._info is not None

    def pending(self) -> bool:
        """Whether part of the engine still loads in the background (a chat model): its description will change."""
        return self._info is not None and self._info.pending

    def can_chat(self) -> bool:
        """Whether the loaded engine follows instructions (ask, rewrite); False before or without a model."""
        if self.pending():
            self.refresh()
        return self._info is not None and self._info.can_chat

    def describe(self) -> str:
        if self._info is not None:
            return self._info.description
        return f"failed to load: {self.load_error}" if self.load_error else "no engine loaded"

    def describe_chat(self) -> str:
        """The engine of chat-style work: its own description when the options route it elsewhere."""
        return self._info.chat or self.describe() if self._info is not None else self.describe()

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
