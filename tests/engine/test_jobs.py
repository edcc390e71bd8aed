"""The engine's job queue answers every job once: with its result, or None when superseded or cancelled."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from waferline.engine.jobs import JobQueue


def blocking_work(started: threading.Event, release: threading.Event, result: str) -> Callable[..., str]:
    """Work that signals it started, then waits (checking for cancellation) until released or stopped."""

    def work(should_cancel: Callable[[], bool]) -> str:
        started.set()
        while not release.wait(0.002):
            if should_cancel():
                return "stopped:" + result
        return result

    return work


@pytest.fixture
def scheduler():
    s = JobQueue()
    yield s
    s.close()


def test_runs_jobs_in_order_on_one_thread(scheduler: JobQueue) -> None:
    threads: list[str] = []
    jobs = [
        scheduler.submit(f"doc{i}", lambda _c, i=i: threads.append(threading.current_thread().name) or i)
        for i in range(5)
    ]
    assert [j.future.result(timeout=5) for j in jobs] == [0, 1, 2, 3, 4]
    assert len(set(threads)) == 1 and threads[0] != threading.current_thread().name


def test_newer_job_supersedes_running_and_queued_for_same_key(scheduler: JobQueue) -> None:
    started, release = threading.Event(), threading.Event()
    first = scheduler.submit("doc", blocking_work(started, release, "first"))
    assert started.wait(5)
    second = scheduler.submit("doc", lambda _c: "second")
    third = scheduler.submit("doc", lambda _c: "third")
    assert first.future.result(timeout=5) is None, "a superseded running job is answered with None"
    assert second.future.result(timeout=5) is None, "a superseded queued job is answered with None"
    assert third.future.result(timeout=5) == "third"


def test_other_documents_are_not_superseded(scheduler: JobQueue) -> None:
    started, release = threading.Event(), threading.Event()
    a = scheduler.submit("a", blocking_work(started, release, "a"))
    assert started.wait(5)
    b = scheduler.submit("b", lambda _c: "b")
    release.set()
    assert a.future.result(timeout=5) == "a"
    assert b.future.result(timeout=5) == "b"


def test_cancel_running_job_stops_it_between_tokens(scheduler: JobQueue) -> None:
    started, release = threading.Event(), threading.Event()
    job = scheduler.submit("doc", blocking_work(started, release, "x"))
    assert started.wait(5)
    scheduler.cancel(job)
    assert job.future.result(timeout=5) == "stopped:x", "a cancelled job returns what it had"
    assert scheduler.submit("doc", lambda _c: "next").future.result(timeout=5) == "next"


def test_idle_job_yields_to_regular_work(scheduler: JobQueue) -> None:
    started, release = threading.Event(), threading.Event()
    idle = scheduler.submit("a", blocking_work(started, release, "idle"), idle=True)
    assert started.wait(5)
    regular = scheduler.submit("b", lambda _c: "regular")
    assert idle.future.result(timeout=5) == "stopped:idle"
    assert regular.future.result(timeout=5) == "regular"


def test_idle_job_waits_for_queued_regular_jobs(scheduler: JobQueue) -> None:
    order: list[str] = []
    started, release = threading.Event(), threading.Event()
    blocker = scheduler.submit("x", blocking_work(started, release, "blocker"))
    assert started.wait(5)
    idle = scheduler.submit("a", lambda _c: order.append("idle"), idle=True)
    regular = scheduler.submit("b", lambda _c: order.append("regular"))
    release.set()
    for j in (blocker, idle, regular):
        j.future.result(timeout=5)
    assert order == ["regular", "idle"]


def test_regular_job_supersedes_idle_job_of_same_key(scheduler: JobQueue) -> None:
    started, release = threading.Event(), threading.Event()
    blocker = scheduler.submit("x", blocking_work(started, release, "blocker"))
    assert started.wait(5)
    idle = scheduler.submit("a", lambda _c: "idle", idle=True)
    regular = scheduler.submit("a", lambda _c: "regular")
    release.set()
    assert idle.future.result(timeout=5) is None
    assert regular.future.result(timeout=5) == "regular"
    assert blocker.future.result(timeout=5) == "blocker"


def test_exception_reaches_caller_and_worker_survives(scheduler: JobQueue) -> None:
    def boom(_c: Callable[[], bool]) -> None:
        raise ValueError("bad prompt")

    failing = scheduler.submit("doc", boom)
    with pytest.raises(ValueError, match="bad prompt"):
        failing.future.result(timeout=5)
    assert scheduler.submit("doc", lambda _c: 7).future.result(timeout=5) == 7


def test_close_answers_queued_jobs() -> None:
    s = JobQueue()
    started, release = threading.Event(), threading.Event()
    running = s.submit("a", blocking_work(started, release, "a"))
    assert started.wait(5)
    queued = s.submit("b", lambda _c: "b")
    s.close()
    assert queued.future.result(timeout=5) is None
    assert running.future.result(timeout=5) == "stopped:a"
    after = s.submit("c", lambda _c: "c")
    with pytest.raises(RuntimeError, match="closed"):
        after.future.result(timeout=5)
