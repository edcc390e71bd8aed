"""The engine's job queue: model work runs on one thread, one job at a time, the newest job per key winning.

Completion requests arrive faster than a model answers when a developer types, so three rules keep the editor
responsive: (1) model work never runs on the caller's thread (the LSP event loop must keep reading keystrokes);
(2) a newer job for the same key (a document's session) supersedes the older one: a queued one is dropped, a running
one is asked to stop between tokens, and both are answered at once with an empty result; (3) idle jobs
(precomputing the next suggestion) run only when nothing else waits, and any new regular job stops them.
Every job's future resolves exactly once: with its result, with None when superseded or cancelled, or with the
exception its work raised. Serialising the work on one thread also means the model, its KV sessions and the
device are only ever touched by that thread, so they need no locks. The queue knows nothing of models: a job is
any function of a cancellation check.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from typing import Any

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
    outcome: Any = None  # what the work returned, kept even when the future says None (superseded): for accounting
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def stop(self, *, superseded: bool = False) -> None:
        """Ask the job to end early; it is answered with None (superseded or cancelled), never left pending."""
        self.superseded = self.superseded or superseded
        self._stop.set()


class JobQueue:
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
                job.future.set_exception(RuntimeError("the engine job queue is closed"))
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
                result = job.outcome = None if job.stopped else job.work(should_cancel)
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
