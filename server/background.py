"""Work the event loop runs without awaiting it: indexing on `initialized`, hover summaries, precomputed suggestions,
warm-ups."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

log = logging.getLogger(__name__)


class Background:
    """The server's background tasks: a reference kept to each (asyncio holds tasks weakly), and what one raises
    logged instead of lost."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run `coro` as a task, kept until it ends; the task, for a caller that may cancel it."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)

        def done(t: asyncio.Task[None]) -> None:
            self._tasks.discard(t)
            if not t.cancelled() and (e := t.exception()) is not None:
                log.error("background task failed: %r", e, exc_info=e)

        task.add_done_callback(done)
        return task
