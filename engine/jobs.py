"""The engine's scheduler: model work runs on one thread, one job at a time, the newest job per document winning.

Completion requests arrive faster than a model answers when a developer types, so three rules keep the editor
responsive: (1) model work never runs on the caller's thread (the LSP event loop must keep reading keystrokes);
(2) a newer job for the same key (a document's session) supersedes the older one: a queued one is dropped, a running
one is asked to stop between tokens, and both are answered at once with an empty result; (3) idle jobs
(precomputing the next suggestion) run only when nothing else waits, and any new regular job stops them.
Every job's future resolves exactly once: with its result, with None when superseded or cancelled, or with the
exception its work raised. Serialising the work on one thread also means the model, its KV sessions and the
device are only ever touched by that thread, so they need no locks.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from waferline.engine.healing import TokenHealer

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
    stop_reason: str  # generate.STOP_REASONS: stop_token, stop_string, stop_rule, max_tokens, time_budget, cancelled...
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
    def context_chars(self, max_new_tokens: int) -> int | None:
        """How many characters of prompt text fit the model's context with `max_new_tokens` to spare (None: any)."""
        ...


# fn(should_cancel) -> result. should_cancel() turns True when the job is superseded, cancelled or (for idle jobs)
# preempted; the work checks it between tokens and returns what it has.
Work = Callable[[Callable[[], bool]], Any]


@dataclass(eq=False)
class Job:
    key: str
    work: Work
    idle: bool = False
    future: Future[Any] = field(default_factory=Future)
    submitted_at: float = field(default_factory=time.perf_counter)
    started_at: float | None = None
    superseded: bool = False
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def stop(self, *, superseded: bool = False) -> None:
        """Ask the job to end early; it is answered with None (superseded or cancelled), never left pending."""
        self.superseded = self.superseded or superseded
        self._stop.set()


class Scheduler:
    """A single worker thread with a queue of regular jobs and a queue of idle jobs; see the module docstring."""

    def __init__(self, name: str = "waferline-engine") -> None:
        self._lock = threading.Condition()
        self._regular: collections.deque[Job] = collections.deque()
        self._idle: collections.deque[Job] = collections.deque()
        self._running: Job | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    # -- callers (any thread) ------------------------------------------------------------------------------------
    def submit(self, key: str, work: Work, *, idle: bool = False) -> Job:
        """Queue `work` for document `key`; older jobs for the same key (of the same kind, for idle ones) stop."""
        job = Job(key=key, work=work, idle=idle)
        with self._lock:
            if self._closed:
                job.future.set_exception(RuntimeError("the engine scheduler is closed"))
                return job
            queue = self._idle if idle else self._regular
            for old in [j for j in queue if j.key == key]:
                queue.remove(old)
                self._answer_stopped(old, superseded=True)
            if not idle:
                # A regular job for this key makes that key's idle work stale too.
                for old in [j for j in self._idle if j.key == key]:
                    self._idle.remove(old)
                    self._answer_stopped(old, superseded=True)
            running = self._running
            if running is not None and running.key == key and (running.idle or not idle):
                running.stop(superseded=True)
            queue.append(job)
            self._lock.notify()
        return job

    def cancel(self, job: Job) -> None:
        """The client gave up on this job ($/cancelRequest): drop it if queued, stop it between tokens if running."""
        with self._lock:
            for queue in (self._regular, self._idle):
                if job in queue:
                    queue.remove(job)
                    self._answer_stopped(job, superseded=False)
                    return
            job.stop()

    def pending(self) -> int:
        """Regular jobs waiting or running: the idle work waits for this to reach zero."""
        with self._lock:
            running = 1 if self._running is not None and not self._running.idle else 0
            return len(self._regular) + running

    def close(self, timeout: float = 5.0) -> None:
        """Stop the running job, answer every queued one with None, and end the thread."""
        with self._lock:
            self._closed = True
            for queue in (self._regular, self._idle):
                while queue:
                    self._answer_stopped(queue.popleft(), superseded=False)
            if self._running is not None:
                self._running.stop()
            self._lock.notify_all()
        self._thread.join(timeout)

    # -- the worker thread ---------------------------------------------------------------------------------------
    def _next_job(self) -> Job | None:
        with self._lock:
            while not self._closed and not self._regular and not self._idle:
                self._lock.wait()
            if self._closed:
                return None
            job = self._regular.popleft() if self._regular else self._idle.popleft()
            self._running = job
            return job

    def _loop(self) -> None:
        while (job := self._next_job()) is not None:
            job.started_at = time.perf_counter()

            def should_cancel(job: Job = job) -> bool:
                # An idle job also yields to any regular job that arrived after it started.
                return job.stopped or (job.idle and bool(self._regular))

            try:
                result = None if job.stopped else job.work(should_cancel)
            except BaseException as e:  # the future carries it to the caller, who logs and answers the client
                with self._lock:
                    self._running = None
                _resolve(job.future, exception=e)
                continue
            with self._lock:
                self._running = None
                _resolve(job.future, None if job.superseded else result)

    @staticmethod
    def _answer_stopped(job: Job, *, superseded: bool) -> None:
        job.stop(superseded=superseded)
        _resolve(job.future, None)


def _resolve(future: Future[Any], result: Any = None, *, exception: BaseException | None = None) -> None:
    """Set a future's outcome unless the caller already cancelled it (asyncio cancels the future it wraps)."""
    try:
        if exception is not None:
            future.set_exception(exception)
        else:
            future.set_result(result)
    except InvalidStateError:
        pass  # cancelled by the awaiting side, which has answered the client already


FIM_OVERHEAD_TOKENS = 8  # control tokens of a FIM prompt, and a margin
CONTEXT_SAFETY = 0.85  # code denser than the sample (long identifiers, Unicode) takes more tokens per character


class ModelCompleter:
    """The real engine: an EditRequest becomes a FIM prompt (suffix-prefix-middle for models trained on it, so a
    keystroke only appends tokens), generated in the document's KV session, which keeps every shared prefix."""

    def __init__(self, loaded: Any, *, kv_cache_bytes: int = 256 << 20, max_tokens_per_session: int = 4096) -> None:
        from waferline.engine.kvcache import SessionPool

        if loaded.fim is None:
            raise ValueError(
                f"model {loaded.name} has no fill-in-the-middle tokens; waferline needs a FIM-trained model"
            )
        self.loaded = loaded
        sample = Path(__file__).read_text(encoding="utf-8")  # code, to measure this tokenizer's characters per token
        self.chars_per_token = len(sample) / max(len(loaded.tokenizer.encode(sample)), 1)
        self.pool = SessionPool(
            loaded.model, max_bytes=kv_cache_bytes, max_tokens_per_session=max_tokens_per_session
        )  # sessions' caches together stay under kv_cache_bytes: least recently used documents are evicted
        # Token healing when the prompt ends at the cursor (suffix-prefix-middle): a cursor inside a word or after
        # indentation no longer makes the model start a new token there (waferline.engine.healing).
        self.healer: TokenHealer | None = None
        if loaded.fim.default_order == "spm":
            from waferline.engine.healing import TokenHealer

            self.healer = TokenHealer(loaded.tokenizer)

    @classmethod
    def load(
        cls, model: str | None, *, backend: str = "cpu", dtype: str = "auto", kv_cache_mb: int = 256, threads: int = 0
    ) -> ModelCompleter:
        """Load the model and warm it up.

        `dtype` "auto" is int8 weights (with bfloat16 activations) on the torch backends: decode streams a quarter of
        the bytes of float32 and ran 3-4x faster on the 2-core machines, with the same greedy tokens in our checks;
        float32 on the wafer emulator. `threads` 0 lets the engine choose (one thread for a small model: on a small
        machine a second thread mostly waits at barriers for a core busy with the event loop).
        """
        from waferline.engine.generate_cli import load, set_threads

        if dtype == "auto":
            dtype = "int8" if backend in ("cpu", "cuda") else "float32"
        loaded = load(model, backend=backend, dtype=dtype)
        set_threads(threads or None, loaded.args.n_params)
        completer = cls(loaded, kv_cache_bytes=kv_cache_mb << 20)
        completer.warm_up()
        return completer

    def warm_up(self) -> None:
        """One short generation, so the first keystroke does not pay for first-call allocations and dispatch."""
        request = EditRequest(session_id="__warm_up__", prefix="def f(x):\n    return ", suffix="\n", max_new_tokens=4)
        self.complete(request, lambda: False)
        self.pool.drop("__warm_up__")

    def context_chars(self, max_new_tokens: int) -> int:
        """Characters of prompt text that fit the context, so the server's plan sizes its window to the model and
        the prompt never has to be cut here (a cut that moved with every keystroke would defeat the KV cache)."""
        room = self.pool.max_tokens_per_session - max_new_tokens - FIM_OVERHEAD_TOKENS
        return max(int(room * self.chars_per_token * CONTEXT_SAFETY), 256)

    def describe(self) -> str:
        lm = self.loaded
        weights = "random weights" if lm.path is None else str(lm.path)
        int8 = getattr(lm.model.device, "weights", None) == "int8"
        dtype = "int8" if int8 else str(lm.dtype).removeprefix("torch.")
        return (
            f"{lm.name} ({lm.args.n_params / 1e6:.1f}M params, {weights}) on {lm.backend} {dtype}, FIM {lm.fim.family}"
        )

    def prompt_ids(self, request: EditRequest, room: int) -> list[int]:
        """The FIM prompt, shortened from its far ends (start of the prefix, end of the suffix) to fit `room`."""
        prefix, suffix = request.prefix, request.suffix
        for _ in range(8):
            ids: list[int] = self.loaded.fim.build(prefix, suffix)
            if len(ids) <= room:
                return ids
            keep = max(len(ids) - room, 1) / len(ids)  # roughly the share of characters to drop
            cut_p, cut_s = int(len(prefix) * keep) + 1, int(len(suffix) * keep) + 1
            prefix, suffix = prefix[cut_p:], suffix[: max(len(suffix) - cut_s, 0)]
        raise ValueError(f"could not fit the prompt into {room} tokens")

    def complete(self, request: EditRequest, should_cancel: Callable[[], bool]) -> Completion:
        from waferline.engine.generate import generate

        lm = self.loaded
        session = self.pool.get(request.session_id)
        ids = self.prompt_ids(request, session.max_tokens - request.max_new_tokens)
        healing = self.healer.heal(ids) if self.healer is not None and request.prefix else None
        result = generate(
            session,
            healing.prompt if healing is not None else ids,
            healing=healing,
            max_new_tokens=request.max_new_tokens + (healing is not None),  # the first token re-makes the healed one
            temperature=request.temperature,
            stop_token_ids=tuple(lm.fim.stop_ids) + tuple(lm.special.stop_ids),
            stop_strings=request.stop_strings,
            stop_rule=request.should_stop,
            tokenizer=lm.tokenizer,
            time_budget_s=request.time_budget_s,
            should_cancel=should_cancel,
        )
        return Completion(
            text=result.text,
            stop_reason=result.stop_reason,
            prompt_tokens=result.prompt_tokens,
            reused_tokens=result.reused_tokens,
            prefilled_tokens=result.prefilled_tokens,
            new_tokens=result.new_tokens,
            prefill_s=result.prefill_s,
            decode_s=result.decode_s,
            timings=dict(result.timings),
        )

    def drop_session(self, session_id: str) -> None:
        self.pool.drop(session_id)
