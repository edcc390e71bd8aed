"""Memory on 2 MB pages for what the fused step streams every token: the GGUF block weights, the int8 rows it reads
(fused.py moves them when it builds a step that reads them by rows) and the KV caches.

A one-token step reads a ~100 MB model front to back. On 4 KB pages that is ~25,000 pages a token, each a TLB miss
and a place where the hardware's prefetch starts over; on an AMD EPYC (Zen 4) one thread read the same bytes
1.2-1.6x faster from 2 MB pages, and SmolLM2's steps ran 1.10-1.22x faster on one thread, 1.05-1.08x on two
(docs/benchmarks-decode.md, 2026-12-07). Linux gives an anonymous private mapping transparent huge pages when it
is advised so (MADV_HUGEPAGE) and /sys/kernel/mm/transparent_hugepage/enabled is `always` or `madvise` (the default
of most distributions); with `never`, elsewhere than Linux, or with WAFERLINE_HUGE_PAGES=0, tensors stay where
torch put them.

`Arena.copy` places tensors one after another in mappings of `BLOCK_BYTES` (a larger tensor gets one of its own),
2 MB aligned: pages are only resident once written, so an arena costs what it holds plus at most a page of each
mapping's end. An arena is never freed piece by piece; what it holds lives as long as the model that placed it (each
tensor keeps its mapping alive). `empty` gives a tensor of 2 MB or more its own mapping, freed with it (a KV
cache).
"""

from __future__ import annotations

import logging
import math
import mmap
import os

import torch
from torch import Tensor

log = logging.getLogger("waferline.hardware")

PAGE = 2 << 20  # a transparent huge page on x86-64 and most aarch64 kernels
BLOCK_BYTES = 64 << 20  # an arena's mappings; untouched pages of the last one cost nothing
ALIGN = 64  # each tensor starts on a cache line


def enabled() -> bool:
    """Whether tensors go on 2 MB pages: on Linux (MADV_HUGEPAGE), unless WAFERLINE_HUGE_PAGES=0."""
    off = os.environ.get("WAFERLINE_HUGE_PAGES", "1").strip().lower() in ("0", "false", "no", "off")
    return not off and hasattr(mmap, "MADV_HUGEPAGE")


def _mapping(nbytes: int) -> Tensor | None:
    """A uint8 tensor of `nbytes` starting on a 2 MB boundary, in an anonymous private mapping whose whole 2 MB pages
    are advised MADV_HUGEPAGE (a last partial one is not: a huge page there would be resident in full once touched);
    None (logged once) where the system refuses the mapping or the advice."""
    try:
        m = mmap.mmap(-1, nbytes + PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        whole = torch.frombuffer(m, dtype=torch.uint8)  # keeps the mapping alive as long as a view of it lives
        start = -whole.data_ptr() % PAGE  # a multiple of the system's page: the mapping starts on one
        if nbytes >= PAGE:
            m.madvise(mmap.MADV_HUGEPAGE, start, nbytes // PAGE * PAGE)
    except (OSError, ValueError) as e:
        _refused(e)
        return None
    return whole[start : start + nbytes]


_warned = False


def _refused(e: Exception) -> None:
    global _warned
    if not _warned:
        _warned = True
        log.info("weights stay on the system's default pages: a 2 MB-page mapping was refused (%s)", e)


def _round(nbytes: int, to: int) -> int:
    return -(-nbytes // to) * to


def empty(shape: tuple[int, ...], dtype: torch.dtype, *, zero: bool = False) -> Tensor:
    """A contiguous CPU tensor on a mapping of its own (its whole 2 MB pages huge where `enabled()`), else torch's
    (under 2 MB, or switched off); freed with it. A fresh mapping reads as zeros, so `zero` costs nothing there."""
    nbytes = math.prod(shape) * dtype.itemsize
    buf = _mapping(max(nbytes, 1)) if enabled() and nbytes >= PAGE else None  # smaller: no whole huge page
    if buf is None:
        return torch.zeros(shape, dtype=dtype) if zero else torch.empty(shape, dtype=dtype)
    return buf[:nbytes].view(dtype).view(shape)


class Arena:
    """Tensors copied one after another onto 2 MB pages (module docstring). Where `enabled()` is false or the system
    refuses the mapping, `copy` returns its argument."""

    def __init__(self, block_bytes: int = BLOCK_BYTES) -> None:
        self.block_bytes = block_bytes
        self._block: Tensor | None = None
        self._at = 0
        self.on = enabled()
        self.nbytes = 0  # bytes placed

    def take(self, nbytes: int) -> Tensor | None:
        """`nbytes` of the arena, uninitialised (a uint8 tensor, 1-D), for a caller that writes them itself; None
        where the arena is off or the system refused its mapping (then it stays off), or for 0 bytes."""
        if not self.on or nbytes <= 0:
            return None
        if self._block is None or self._at + nbytes > self._block.numel():
            size = max(self.block_bytes, _round(nbytes, PAGE))
            block = _mapping(size)
            if block is None:
                self.on = False
                return None
            if nbytes > self.block_bytes:  # a tensor larger than a block keeps the current block for the next ones
                self.nbytes += nbytes
                return block[:nbytes]
            self._block, self._at = block, 0
        out = self._block[self._at : self._at + nbytes]
        self._at = _round(self._at + nbytes, ALIGN)
        self.nbytes += nbytes
        return out

    def copy(self, t: Tensor) -> Tensor:
        """`t` (a CPU tensor) copied into the arena: same dtype, shape and values, contiguous; `t` itself where
        the arena is off or refused."""
        out = self.take(t.numel() * t.element_size()) if t.device.type == "cpu" else None
        if out is None:
            return t
        placed = out.view(t.dtype).view(t.shape) if t.dim() else out.view(t.dtype)[0]
        placed.copy_(t)
        return placed


def process_huge_mb() -> float | None:
    """MB of this process's memory on transparent huge pages (AnonHugePages of /proc/self/smaps_rollup), None where
    the system does not say."""
    try:
        with open("/proc/self/smaps_rollup") as f:
            for line in f:
                if line.startswith("AnonHugePages:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None
