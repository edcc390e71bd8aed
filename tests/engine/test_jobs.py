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


# -- lanes ------------------------------------------------------------------------------------------------------------
def test_jobs_on_different_lanes_run_at_the_same_time(scheduler: JobQueue) -> None:
    started, release = threading.Event(), threading.Event()
    slow = scheduler.submit("a", blocking_work(started, release, "a"), lane="remote a")
    assert started.wait(5)
    other = scheduler.submit("b", lambda _c: threading.current_thread().name, lane="remote b")
    local = scheduler.submit("c", lambda _c: threading.current_thread().name)
    assert other.future.result(timeout=5) != local.future.result(timeout=5), "each lane is a thread of its own"
    assert not slow.future.done(), "both answered while the first lane's job still ran"
    release.set()
    assert slow.future.result(timeout=5) == "a"


def test_a_newer_job_supersedes_the_same_key_on_another_lane(scheduler: JobQueue) -> None:
    started, release = threading.Event(), threading.Event()
    first = scheduler.submit("doc", blocking_work(started, release, "first"), lane="remote doc")
    assert started.wait(5)
    second = scheduler.submit("doc", lambda _c: "second")
    assert first.future.result(timeout=5) is None and second.future.result(timeout=5) == "second"


def test_idle_work_yields_only_to_regular_work_on_its_own_lane(scheduler: JobQueue) -> None:
    started, release = threading.Event(), threading.Event()
    idle = scheduler.submit("hover", blocking_work(started, release, "idle"), idle=True, lane="remote hover")
    assert started.wait(5)
    assert scheduler.submit("doc", lambda _c: "keystroke").future.result(timeout=5) == "keystroke"
    release.set()
    assert idle.future.result(timeout=5) == "idle", "a keystroke on the local lane does not preempt remote work"


def test_quiesce_stops_the_other_lanes_and_waits_for_them(scheduler: JobQueue) -> None:
    started, release = threading.Event(), threading.Event()
    remote = scheduler.submit("a", blocking_work(started, release, "a"), lane="remote a")
    assert started.wait(5)
    queued = scheduler.submit("b", lambda _c: "b", lane="remote a")
    done = scheduler.submit("__engine__", lambda _c: (scheduler.quiesce(), remote.future.done())[1])
    assert done.future.result(timeout=5) is True, "the load job resumes once the other lanes are idle"
    assert remote.future.result(timeout=5) == "stopped:a" and queued.future.result(timeout=5) is None


def test_an_idle_lane_ends_its_thread_and_a_new_job_starts_it_again(
    scheduler: JobQueue, monkeypatch: pytest.MonkeyPatch
) -> None:  # fmt: skip
    import waferline.engine.jobs as jobs

    monkeypatch.setattr(jobs, "LINGER_S", 0.05)
    first = scheduler.submit("a", lambda _c: threading.current_thread(), lane="remote a")
    thread = first.future.result(timeout=5)
    thread.join(5)
    assert not thread.is_alive() and "remote a" not in scheduler._lanes
    assert scheduler.submit("a", lambda _c: "again", lane="remote a").future.result(timeout=5) == "again"
