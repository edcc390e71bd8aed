"""engine/heap.py, for the server: a loaded model's objects frozen out of full collections and given back before it
is replaced; and the server's worker doing both around each engine it loads."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator

import pytest

from waferline.engine import heap
from waferline.server.stats import Stats
from waferline.server.worker import Worker


@pytest.fixture(autouse=True)
def unfrozen() -> Iterator[None]:
    heap.release()
    yield
    heap.release()


class Cycle:
    """An engine stand-in that is its own reference cycle: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self
        self.payload = [object() for _ in range(1000)]


def test_settle_freezes_what_is_alive_and_release_gives_it_back() -> None:
    kept = Cycle()
    frozen = heap.settle()
    assert frozen >= 1000 and gc.get_freeze_count() == frozen
    gone = weakref.ref(kept)
    del kept
    gc.collect()
    assert gone() is not None, "a frozen cycle is not collected"
    later = Cycle()  # what comes after the freeze is collected as usual
    later_ref = weakref.ref(later)
    del later
    gc.collect()
    assert later_ref() is None
    heap.release()
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert gone() is None, "released, the old cycle is freed"


class FakeEngine(Cycle):
    def describe(self):  # type: ignore[no-untyped-def]
        from waferline.engine.api import EngineInfo

        return EngineInfo(description="fake", can_chat=False)


def test_the_worker_freezes_each_engine_it_loads_and_frees_the_one_it_replaces() -> None:
    async def run() -> tuple[int, weakref.ref, int]:
        worker = Worker(Stats())
        await worker.load(FakeEngine)
        first = weakref.ref(worker._engine)  # type: ignore[arg-type]
        after_first = gc.get_freeze_count()
        await worker.load(FakeEngine)
        return after_first, first, gc.get_freeze_count()

    after_first, first, after_second = asyncio.run(run())
    assert after_first >= 1000, "the loaded engine's objects are frozen"
    gc.collect()
    assert after_second >= 1000 and first() is None, "the replaced engine (a cycle) was freed"
