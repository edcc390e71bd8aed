"""Tile memory: every tile is an SRAM arena of fixed capacity, and one table lists everything every tile holds.

An allocation covers a rectangle of tiles at the same byte offset in each (the way a mesh program lays out a shard
of one tensor on every core of its rectangle): `bytes_per_tile` at `offset` in each tile of `rect`. The arena's
table is the llama2.c RunState of the wafer: each entry names the tensor, its per-tile shape and its bytes, and
`allocate` checks the capacity right next to it. The bytes themselves are real: an allocation's bytes for all of
its tiles live in one host tensor (its slab), laid out so that every tile of the rectangle computes in one batched
call; `Tile.read` returns exactly the bytes one tile holds. In analytic mode the slabs live on torch's "meta"
device: the same table, offsets and capacity checks, no numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol

import torch
from torch import Tensor

from waferline.hardware.wafer.spec import WaferSpec

ALIGN = 16  # bytes; every allocation starts on a 16-byte boundary of its tiles' SRAM


class SlabLayout(Protocol):
    """How the tiles of one allocation sit in its slab (placement.py has one per kind of tensor)."""

    def tile_view(self, slab: Tensor) -> Tensor:
        """(rect rows, rect cols, *tile_shape)."""
        ...


class WaferOutOfMemory(ValueError):
    """A model or cache does not fit in the wafer's SRAM (a ValueError so that the CLI prints it as one line)."""


@dataclass(frozen=True)
class Rect:
    """Tiles row0..row0+rows-1 x col0..col0+cols-1."""

    row0: int
    col0: int
    rows: int
    cols: int

    @property
    def tiles(self) -> int:
        return self.rows * self.cols

    def intersects(self, other: Rect) -> bool:
        return not (
            self.row0 + self.rows <= other.row0
            or other.row0 + other.rows <= self.row0
            or self.col0 + self.cols <= other.col0
            or other.col0 + other.cols <= self.col0
        )

    def overlap(self, other: Rect) -> int:
        """Tiles in both rectangles."""
        rows = min(self.row0 + self.rows, other.row0 + other.rows) - max(self.row0, other.row0)
        cols = min(self.col0 + self.cols, other.col0 + other.cols) - max(self.col0, other.col0)
        return max(rows, 0) * max(cols, 0)

    def contains(self, row: int, col: int) -> bool:
        return self.row0 <= row < self.row0 + self.rows and self.col0 <= col < self.col0 + self.cols


@dataclass(eq=False)
class Allocation:
    """One entry of the tile-memory table. `slab` holds the bytes of every tile of `rect` (see `tile_view`)."""

    name: str
    kind: str  # "weight", "kv", "scratch"
    rect: Rect | None  # None: spilled to off-wafer memory
    offset: int  # bytes into each tile's SRAM
    bytes_per_tile: int
    tile_shape: tuple[int, ...]  # the shape of the block one tile holds
    dtype: torch.dtype
    payload_bytes: int  # bytes of real data across all tiles (the rest is padding of ragged edge blocks)
    layout: SlabLayout | None = field(default=None, repr=False)
    slab: Tensor | None = field(default=None, repr=False)

    @property
    def total_bytes(self) -> int:
        return self.bytes_per_tile * (self.rect.tiles if self.rect else 1)

    @property
    def spilled(self) -> bool:
        return self.rect is None


class SramGrid:
    """All tiles of one wafer: their capacity, their allocation table, and per-tile bytes in use."""

    def __init__(self, spec: WaferSpec, device: torch.device) -> None:
        self.spec = spec
        self.device = device
        self.capacity = spec.sram_bytes_per_tile
        self.table: list[Allocation] = []
        self.spilled_bytes = 0
        self._usage: Usage | None = None  # per-tile bytes, recomputed after a change

    # -- the table and the capacity check, side by side ----------------------------------------------------------------
    def allocate(
        self,
        name: str,
        kind: str,
        shape: tuple[int, int],
        tile_shape: tuple[int, ...],
        dtype: torch.dtype,
        payload_bytes: int,
        *,
        layout: SlabLayout | None = None,
        origin: tuple[int, int] | None = None,
        spill_ok: bool = False,
        limit: int | None = None,
    ) -> Allocation | None:
        """Reserve `tile_shape` of `dtype` in each tile of some rows x cols rectangle (shape), at one offset.

        Picks, among candidate origins, the one with the lowest free offset and then the fewest bytes already in
        it (so that rectangles spread over the wafer), or uses `origin` when the caller pins it. Returns None when
        no origin has room; with `spill_ok` the allocation goes to off-wafer memory instead. `limit` caps how high in a
        tile's SRAM this allocation may reach (default: the capacity), so that weights leave room for KV pages.
        """
        top = self.capacity if limit is None else min(limit, self.capacity)
        rows, cols = shape
        assert 0 < rows <= self.spec.rows and 0 < cols <= self.spec.cols, f"{name}: {rows}x{cols} tiles off the grid"
        elem = torch.empty((), dtype=dtype).element_size()
        nbytes = math.prod(tile_shape) * elem
        per_tile = -(-nbytes // ALIGN) * ALIGN
        candidates = [Rect(*origin, rows, cols)] if origin else self._candidate_rects(rows, cols)
        fits = [(fit, rect) for rect in candidates if (fit := self._first_fit(rect, per_tile))[0] + per_tile <= top]
        best: tuple[int, Rect] | None = None
        if fits:
            (offset, _), rect = min(fits, key=lambda f: f[0])  # lowest offset, then the least loaded rectangle
            best = (offset, rect)
        if best is None:
            if not spill_ok:
                return None
            alloc = Allocation(name, kind, None, 0, nbytes, tile_shape, dtype, payload_bytes, layout)
            self.spilled_bytes += payload_bytes
            self.table.append(alloc)
            return alloc
        offset, rect = best
        assert offset % ALIGN == 0 and offset + per_tile <= self.capacity, f"{name}: past a tile's {self.capacity} B"
        alloc = Allocation(name, kind, rect, offset, per_tile, tile_shape, dtype, payload_bytes, layout)
        self.table.append(alloc)
        self._usage = None
        return alloc

    def free(self, alloc: Allocation) -> None:
        self.table.remove(alloc)
        self._usage = None
        if alloc.rect is None:
            self.spilled_bytes -= alloc.payload_bytes
        alloc.slab = None

    def _first_fit(self, rect: Rect, nbytes: int) -> tuple[int, int]:
        """(lowest aligned offset at which `nbytes` is free in every tile of `rect`, bytes already in `rect`)."""
        busy, load = [], 0
        for a in self.table:
            if a.rect and a.rect.intersects(rect):
                busy.append((a.offset, a.offset + a.bytes_per_tile))
                load += a.bytes_per_tile * a.rect.overlap(rect)
        offset = 0
        for start, end in sorted(busy):
            if start - offset >= nbytes:
                break
            offset = max(offset, end)
        return offset, load

    def _candidate_rects(self, rows: int, cols: int, limit: int = 8) -> list[Rect]:
        """Origins on a lattice of the rectangle's own size (at most `limit` per axis), deterministic order."""

        def starts(extent: int, size: int) -> list[int]:
            last = extent - size
            if last == 0:
                return [0]
            step = max(size, -(-last // (limit - 1)))
            return sorted({*range(0, last + 1, step), last})

        return [Rect(r, c, rows, cols) for r in starts(self.spec.rows, rows) for c in starts(self.spec.cols, cols)]

    # -- what the tiles hold -----------------------------------------------------------------------------------------
    @property
    def usage(self) -> Usage:
        if self._usage is None:
            self._usage = Usage.of(self.spec.rows, self.spec.cols, [a for a in self.table if a.rect is not None])
        return self._usage

    @property
    def bytes_used(self) -> int:
        return sum(a.total_bytes for a in self.table if a.rect is not None)

    @property
    def tiles_used(self) -> int:
        return self.usage.tiles_used

    @property
    def max_tile_bytes(self) -> int:
        return self.usage.max_bytes()

    def used_map(self) -> Tensor:
        """Bytes in use per tile, (rows, cols) int64 (materialises the whole grid: for plots and tests)."""
        return self.usage.expand()

    def tile(self, row: int, col: int) -> Tile:
        return Tile(self, row, col)

    def format_table(self, limit: int | None = None) -> str:
        """The tile-memory table: every allocation with its rectangle, per-tile shape and bytes, then the totals."""
        lines = [
            f"{'allocation':<28} {'kind':<7} {'tiles (r0,c0 rxc)':<22} {'per tile':<18} {'B/tile':>8} {'bytes':>14}"
        ]
        for a in self.table[:limit]:
            where = "off-wafer" if a.rect is None else f"({a.rect.row0},{a.rect.col0}) {a.rect.rows}x{a.rect.cols}"
            shape = "x".join(map(str, a.tile_shape)) + f" {str(a.dtype).removeprefix('torch.')}"
            lines.append(f"{a.name:<28} {a.kind:<7} {where:<22} {shape:<18} {a.bytes_per_tile:>8} {a.total_bytes:>14,}")
        if limit is not None and len(self.table) > limit:
            lines.append(f"... {len(self.table) - limit} more")
        lines.append(
            f"{'in use':<28} {'':<7} {self.tiles_used:>10,} tiles {'':<23} "
            f"{self.max_tile_bytes:>8} {self.bytes_used:>14,}"
            f"   (capacity {self.capacity:,} B/tile, {self.spec.sram_bytes:,} B)"
        )
        return "\n".join(lines)


@dataclass(frozen=True)
class Tile:
    """One tile's view of the arena: which allocations it holds and their bytes."""

    grid: SramGrid
    row: int
    col: int

    @property
    def allocations(self) -> list[Allocation]:
        return sorted(
            (a for a in self.grid.table if a.rect and a.rect.contains(self.row, self.col)), key=lambda a: a.offset
        )

    @property
    def bytes_used(self) -> int:
        return sum(a.bytes_per_tile for a in self.allocations)

    def read(self, alloc: Allocation) -> Tensor:
        """The block of `alloc` this tile holds, shape `alloc.tile_shape`."""
        assert alloc.rect is not None and alloc.rect.contains(self.row, self.col), f"tile does not hold {alloc.name}"
        assert alloc.slab is not None, f"{alloc.name} holds no bytes"
        view = tile_view(alloc)
        return view[self.row - alloc.rect.row0][self.col - alloc.rect.col0]


@dataclass(frozen=True)
class Usage:
    """Bytes per tile on a compressed grid: allocations are rectangles, so the grid splits into cells between their
    edges in which every tile holds the same bytes. Cell (i, j) spans rows row_edges[i]..row_edges[i+1]-1."""

    row_edges: Tensor  # (m + 1,) int64
    col_edges: Tensor  # (n + 1,) int64
    cells: Tensor  # (m, n) int64 bytes per tile in each cell

    @classmethod
    def of(cls, rows: int, cols: int, allocs: list[Allocation]) -> Usage:
        rs = sorted(
            {0, rows, *(a.rect.row0 for a in allocs if a.rect), *(a.rect.row0 + a.rect.rows for a in allocs if a.rect)}
        )
        cs = sorted(
            {0, cols, *(a.rect.col0 for a in allocs if a.rect), *(a.rect.col0 + a.rect.cols for a in allocs if a.rect)}
        )
        r_index = {r: i for i, r in enumerate(rs)}
        c_index = {c: i for i, c in enumerate(cs)}
        diff = torch.zeros(len(rs), len(cs), dtype=torch.int64)  # 2-D difference array over cell indices
        for a in allocs:
            assert a.rect is not None
            r0, r1 = r_index[a.rect.row0], r_index[a.rect.row0 + a.rect.rows]
            c0, c1 = c_index[a.rect.col0], c_index[a.rect.col0 + a.rect.cols]
            diff[r0, c0] += a.bytes_per_tile
            diff[r0, c1] -= a.bytes_per_tile
            diff[r1, c0] -= a.bytes_per_tile
            diff[r1, c1] += a.bytes_per_tile
        cells = diff.cumsum(0).cumsum(1)[:-1, :-1]
        return cls(torch.tensor(rs), torch.tensor(cs), cells)

    @property
    def tiles_used(self) -> int:
        area = self.row_edges.diff().unsqueeze(1) * self.col_edges.diff().unsqueeze(0)  # tiles per cell
        return int((area * (self.cells > 0)).sum())

    def max_bytes(self, rect: Rect | None = None) -> int:
        """The fullest tile's bytes, over the whole grid or within `rect`."""
        if rect is None:
            return int(self.cells.max()) if self.cells.numel() else 0
        rows = (self.row_edges[1:] > rect.row0) & (self.row_edges[:-1] < rect.row0 + rect.rows)
        cols = (self.col_edges[1:] > rect.col0) & (self.col_edges[:-1] < rect.col0 + rect.cols)
        return int(self.cells[rows][:, cols].max())

    def expand(self) -> Tensor:
        reps_r, reps_c = self.row_edges.diff(), self.col_edges.diff()
        return self.cells.repeat_interleave(reps_r, 0).repeat_interleave(reps_c, 1)  # (rows, cols)


def tile_view(alloc: Allocation) -> Tensor:
    """The slab seen tile by tile: (rect rows, rect cols, *tile_shape), a view without copies where the layout allows.

    Each slab kind says how its tiles sit in it (see placement.py); this function is the one place that knows.
    """
    assert alloc.slab is not None and alloc.layout is not None, f"{alloc.name}: no slab or no layout"
    return alloc.layout.tile_view(alloc.slab)
