"""Giving memory back to the operating system after documents are closed.

Closing a document drops every copy the server held of it (its text, tree, index rows, suggestions, KV session),
but glibc's allocator keeps the freed pages of its heap for reuse, so the process's resident size would stay where
the largest document took it. `trim()` asks glibc to return them (`malloc_trim(0)`); with another C library (musl,
macOS) it does nothing. Trimming walks the heap, a few milliseconds, so the server does it once per burst of closes,
TRIM_DELAY_S after the first, once the other threads have let go of their copies. (It did so only after a document of
1 MB or more; but each closed document's KV session, a megabyte or more of the engine's, stayed with the allocator
too: `bench-load --docs 50` left the RSS where typing took it after every document was closed.)
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import functools
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)

TRIM_DELAY_S = 0.5  # after the close: the index and engine threads drop their copies meanwhile
_scheduled: set[asyncio.AbstractEventLoop] = set()  # loops with a trim due: one per burst of closes


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        fn = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None
    fn.argtypes, fn.restype = [ctypes.c_size_t], ctypes.c_int
    return fn


def trim() -> bool:
    """Return the allocator's free pages to the OS; True if glibc did (False: nothing to return, or no glibc)."""
    fn = _malloc_trim()
    return bool(fn(0)) if fn is not None else False


def trim_soon() -> None:
    """`trim()` TRIM_DELAY_S from now on the running event loop, unless one is due already (at once when there is
    no loop)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        trim()
        return
    if loop in _scheduled:
        return
    _scheduled.add(loop)

    def due() -> None:
        _scheduled.discard(loop)
        trim()

    loop.call_later(TRIM_DELAY_S, due)
