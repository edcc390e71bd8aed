"""The engine's job queue: model work runs off the caller's thread, one job at a time per lane, the newest job per
key winning.

Completion requests arrive faster than a model answers when a developer types, so three rules keep the editor
responsive: (1) model work never runs on the caller's thread (the LSP event loop must keep reading keystrokes);
(2) a newer job for the same key (a document's session) supersedes the older one: a queued one is dropped, a running
one is asked to stop between tokens, and both are answered at once with an empty result; (3) idle jobs
(precomputing the next suggestion) run only when nothing else waits on their lane, and any new regular job there
stops them. Every job's future resolves exactly once: with its result, with None when superseded or cancelled, or
with the exception its work raised.

A *lane* is a queue with its own thread: jobs on one lane run one at a time, jobs on different lanes at the same
time. The default lane (`DEFAULT_LANE`, the engine thread) is the local model's: serialising its work on one thread
means the model, its KV sessions and the device are only ever touched by one thread, so they need no locks. A remote
engine puts each document's requests on a lane of its own (engine/api.py `Engine.lane`), so that documents wait on
the network side by side while each has at most one request upstream. Lanes other than the default one start with
their first job and end after `LINGER_S` without one. The queue knows nothing of models: a job is any function of a
cancellation check.
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


DEFAULT_LANE = "engine"
LINGER_S = 30.0  # a lane other than the default one ends its thread after this long without work


@dataclass(eq=False)
class _Lane:
    name: str
    ready: threading.Condition  # on the queue's lock: notified when a job is queued here
    regular: collections.deque[Job] = field(default_factory=collections.deque)
    idle: collections.deque[Job] = field(default_factory=collections.deque)
    running: Job | None = None


class JobQueue:
    """Lanes, each a thread with a queue of regular jobs and a queue of idle jobs; see the module docstring."""

    def __init__(self, name: str = "waferline-engine") -> None:
        self._name = name
        self._lock = threading.Lock()
        self._quiet = threading.Condition(self._lock)  # notified whenever a job ends
        self._lanes: dict[str, _Lane] = {}
        self._threads: list[threading.Thread] = []
        self._closed = False
        with self._lock:
            self._lane(DEFAULT_LANE)

    def _lane(self, name: str) -> _Lane:
        """The lane of this name, started if it is not running (under the lock)."""
        lane = self._lanes.get(name)
        if lane is None:
            lane = self._lanes[name] = _Lane(name, threading.Condition(self._lock))
            thread_name = self._name if name == DEFAULT_LANE else f"{self._name} {name}"[:60]
            thread = threading.Thread(target=self._loop, args=(lane,), name=thread_name, daemon=True)
            self._threads = [t for t in self._threads if t.is_alive()] + [thread]
            thread.start()
        return lane

    # -- callers (any thread) ------------------------------------------------------------------------------------
    def submit(self, key: str, work: Work, *, idle: bool = False, lane: str = DEFAULT_LANE) -> Job:
        """Queue `work` for document `key` on `lane`; older jobs for the same key (of the same kind, for idle ones)
        stop, whichever lane they are on."""
        job = Job(key=key, work=work, idle=idle)
        with self._lock:
            if self._closed:
                job.future.set_exception(RuntimeError("the engine job queue is closed"))
                return job
            for other in self._lanes.values():
                queue = other.idle if idle else other.regular
                for old in [j for j in queue if j.key == key]:
                    queue.remove(old)
                    self._answer_stopped(old, superseded=True)
                if not idle:
                    # A regular job for this key makes that key's idle work stale too.
                    for old in [j for j in other.idle if j.key == key]:
                        other.idle.remove(old)
                        self._answer_stopped(old, superseded=True)
                running = other.running
                if running is not None and running.key == key and (running.idle or not idle):
                    running.stop(superseded=True)
            target = self._lane(lane)
            (target.idle if idle else target.regular).append(job)
            target.ready.notify()
        return job

    def cancel(self, job: Job) -> None:
        """The client gave up on this job ($/cancelRequest): drop it if queued, stop it between tokens if running."""
        with self._lock:
            for lane in self._lanes.values():
                for queue in (lane.regular, lane.idle):
                    if job in queue:
                        queue.remove(job)
                        self._answer_stopped(job, superseded=False)
                        return
            job.stop()

    def pending(self) -> int:
        """Regular jobs waiting or running, on every lane: the idle work waits for this to reach zero."""
        with self._lock:
            running = sum(1 for lane in self._lanes.values() if lane.running is not None and not lane.running.idle)
            return sum(len(lane.regular) for lane in self._lanes.values()) + running

    def quiesce(self, timeout: float = 10.0) -> None:
        """Stop every job on the lanes other than the default one and wait until none of them runs: the engine they
        call is about to be replaced. Called from a job of the default lane (the engine's load)."""
        with self._lock:
            others = [lane for name, lane in self._lanes.items() if name != DEFAULT_LANE]
            for lane in others:
                for queue in (lane.regular, lane.idle):
                    while queue:
                        self._answer_stopped(queue.popleft(), superseded=False)
                if lane.running is not None:
                    lane.running.stop()
            self._quiet.wait_for(lambda: all(lane.running is None for lane in others), timeout)

    def close(self, timeout: float = 5.0) -> None:
        """Stop the running jobs, answer every queued one with None, and end the threads."""
        with self._lock:
            self._closed = True
            for lane in self._lanes.values():
                for queue in (lane.regular, lane.idle):
                    while queue:
                        self._answer_stopped(queue.popleft(), superseded=False)
                if lane.running is not None:
                    lane.running.stop()
                lane.ready.notify_all()
            threads = list(self._threads)
        deadline = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(deadline - time.monotonic(), 0.0))

    # -- the lanes' threads --------------------------------------------------------------------------------------
    def _next_job(self, lane: _Lane) -> Job | None:
        with self._lock:
            while not self._closed and not lane.regular and not lane.idle:
                if lane.name == DEFAULT_LANE:
                    lane.ready.wait()
                elif not lane.ready.wait(LINGER_S) and not lane.regular and not lane.idle:
                    del self._lanes[lane.name]  # a job for this lane from now on starts a new one
                    return None
            if self._closed:
                return None
            job = lane.regular.popleft() if lane.regular else lane.idle.popleft()
            lane.running = job
            return job

    def _loop(self, lane: _Lane) -> None:
        while (job := self._next_job(lane)) is not None:
            job.started_at = time.perf_counter()

            def should_cancel(job: Job = job) -> bool:
                # An idle job also yields to any regular job that arrived on its lane after it started.
                return job.stopped or (job.idle and bool(lane.regular))

            try:
                result = job.outcome = None if job.stopped else job.work(should_cancel)
            except BaseException as e:  # the future carries it to the caller, who logs and answers the client
                with self._lock:
                    lane.running = None
                    self._quiet.notify_all()
                _resolve(job.future, exception=e)
                continue
            with self._lock:
                lane.running = None
                self._quiet.notify_all()
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
