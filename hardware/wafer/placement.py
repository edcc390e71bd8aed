"""Where every tensor goes on the mesh: 2-D blocks of weight matrices, vectors along the root column, KV pages.

A weight matrix W (out, in) is split, as WaferLLM's MeshGEMV does, into a pr x pc grid of blocks of (bo, bi):
tile (r, c) holds W[r*bo:(r+1)*bo, c*bi:(c+1)*bi]. The input x is split the same way along the columns, every tile
multiplies its block by its column's chunk, and the partial sums meet along each row (a two-level tree) at the
root column, the grid's middle column (collectives.root). So a vector (a norm weight, a bias, an activation
between operations) lives split along the root column: row r holds elements [r*b, (r+1)*b). A KV cache spreads
positions round-robin over the tile rows (position p on row p % rows, so no row fills before another) and each kv
head's features over a group of columns.

Placement is deterministic: the same shapes on the same grid always give the same layout, and `describe` prints it.
The rectangle is as large as the grid allows (min(rows, out) x min(cols, in)): decode is a chain of GEMVs, and a
GEMV is fastest spread over as many tiles as possible, since each tile streams only its own block.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from waferline.hardware.wafer.collectives import root
from waferline.hardware.wafer.tiles import Allocation, SramGrid


def split(n: int, parts: int) -> tuple[int, int]:
    """Split n elements over at most `parts` tiles in equal blocks: (tiles used, block size), no empty tile."""
    assert n > 0 and parts > 0, f"cannot split {n} elements over {parts} tiles"
    block = -(-n // min(parts, n))
    return -(-n // block), block


@dataclass(frozen=True)
class MatrixLayout:
    """W (out, in) as pr x pc blocks of (bo, bi). Slab: (pc, bi, pr, bo), i.e. the padded W transposed, so that
    the partial products of all tiles are one batched matmul over the pc tile columns."""

    out_features: int
    in_features: int
    pr: int
    pc: int
    bo: int
    bi: int

    @property
    def tile_shape(self) -> tuple[int, int]:
        return (self.bo, self.bi)

    @property
    def slab_shape(self) -> tuple[int, int, int, int]:
        return (self.pc, self.bi, self.pr, self.bo)

    @property
    def padded(self) -> tuple[int, int]:
        return (self.pr * self.bo, self.pc * self.bi)

    def tile_view(self, slab: Tensor) -> Tensor:
        return slab.permute(2, 0, 3, 1)  # (pc, bi, pr, bo) -> (pr, pc, bo, bi): tile (r, c) holds block (bo, bi)

    def fill(self, slab: Tensor, weight: Tensor) -> None:
        out_p, in_p = self.padded
        w = F.pad(weight, (0, in_p - self.in_features, 0, out_p - self.out_features))  # (out_p, in_p), zeros at edges
        slab.view(in_p, out_p).copy_(w.t())

    def locate(self, o: int, i: int) -> tuple[int, int, int, int]:
        """Which tile holds W[o, i], and where in its block: (row, col, row in block, col in block)."""
        return (o // self.bo, i // self.bi, o % self.bo, i % self.bi)


def matrix_layout(out_features: int, in_features: int, rows: int, cols: int) -> MatrixLayout:
    pr, bo = split(out_features, rows)
    pc, bi = split(in_features, cols)
    return MatrixLayout(out_features, in_features, pr, pc, bo, bi)


@dataclass(frozen=True)
class VectorLayout:
    """A vector of n elements along the root column: vr tiles of vb elements. Slab: (vr, vb)."""

    n: int
    vr: int
    vb: int

    @property
    def tile_shape(self) -> tuple[int]:
        return (self.vb,)

    @property
    def slab_shape(self) -> tuple[int, int]:
        return (self.vr, self.vb)

    def tile_view(self, slab: Tensor) -> Tensor:
        return slab.unsqueeze(1)  # (vr, 1, vb)

    def fill(self, slab: Tensor, vector: Tensor) -> None:
        slab.view(-1).copy_(F.pad(vector, (0, self.vr * self.vb - self.n)))


def vector_layout(n: int, rows: int) -> VectorLayout:
    vr, vb = split(n, rows)
    return VectorLayout(n, vr, vb)


@dataclass(frozen=True)
class KVLayout:
    """One session's keys and values for every layer.

    Rows: position p lives on tile row p % rows, in slot p // rows (round-robin, so every row holds within one
    position of every other at any length). Columns: kv head h owns columns h*ch .. (h+1)*ch - 1, each holding f
    of its head_dim features (the last column's zero-padded). Slab: (layers, 2, kv_heads * ch, slots, rows, f), so
    that the live slots of a layer are one contiguous (columns, slots * rows, f) block.
    """

    layers: int
    kv_heads: int
    head_dim: int
    rows: int
    ch: int  # columns per kv head
    f: int  # features per tile
    slots: int  # positions per tile row

    @property
    def cols(self) -> int:
        return self.kv_heads * self.ch

    @property
    def tile_shape(self) -> tuple[int, int, int, int]:
        return (self.layers, 2, self.slots, self.f)

    @property
    def slab_shape(self) -> tuple[int, ...]:
        return (self.layers, 2, self.cols, self.slots, self.rows, self.f)

    @property
    def max_tokens(self) -> int:
        return self.slots * self.rows

    def tile_view(self, slab: Tensor) -> Tensor:
        return slab.permute(4, 2, 0, 1, 3, 5)  # -> (rows, cols, layers, 2, slots, f)

    def locate(self, position: int) -> tuple[int, int]:
        """(tile row, slot) of a position."""
        return (position % self.rows, position // self.rows)

    def live_slots(self, length: int) -> int:
        return -(-length // self.rows)


def kv_layout(layers: int, kv_heads: int, head_dim: int, max_tokens: int, rows: int, cols: int) -> KVLayout:
    if kv_heads > cols:
        raise ValueError(f"a grid {cols} tiles wide cannot give each of {kv_heads} kv heads its own column")
    f = -(-head_dim // (cols // kv_heads))  # features per tile, so that kv_heads * ch <= cols
    ch = -(-head_dim // f)
    kv_rows = min(rows, max_tokens)
    return KVLayout(layers, kv_heads, head_dim, kv_rows, ch, f, -(-max_tokens // kv_rows))


@dataclass(frozen=True)
class ScratchLayout:
    """Per-tile working space for one decode token's activations: `elems` per tile on every tile of the grid."""

    rows: int
    cols: int
    elems: int

    @property
    def tile_shape(self) -> tuple[int]:
        return (self.elems,)

    @property
    def slab_shape(self) -> tuple[int, int, int]:
        return (self.rows, self.cols, self.elems)

    def tile_view(self, slab: Tensor) -> Tensor:
        return slab


Layout = MatrixLayout | VectorLayout | KVLayout | ScratchLayout


def layout_for(role: str, shape: tuple[int, ...], rows: int, cols: int) -> MatrixLayout | VectorLayout:
    """The layout of a weight by its role: 2-D ('linear', 'embedding', 'table') in blocks, 1-D on the root column."""
    if role in ("linear", "embedding", "table"):
        assert len(shape) == 2, f"a {role} weight is 2-D, got shape {shape}"
        return matrix_layout(shape[0], shape[1], rows, cols)
    if role in ("norm", "bias"):
        assert len(shape) == 1, f"a {role} weight is 1-D, got shape {shape}"
        return vector_layout(shape[0], rows)
    raise ValueError(f"unknown weight role {role!r}")


def place(
    grid: SramGrid,
    name: str,
    tensor: Tensor,
    role: str,
    *,
    dtype: torch.dtype,
    spill_ok: bool,
    limit: int | None = None,
) -> Allocation | None:
    """Allocate `tensor` on `grid` in its role's layout and copy its bytes in (on meta: shapes only).

    Returns None if it fits nowhere and may not spill; the caller decides how to report that.
    """
    layout = layout_for(role, tuple(tensor.shape), grid.spec.rows, grid.spec.cols)
    if isinstance(layout, MatrixLayout):
        shape, origin = (layout.pr, layout.pc), None
    else:
        shape, origin = (layout.vr, 1), (0, root(grid.spec.cols))  # on the root column, where reductions end
    payload = tensor.numel() * torch.empty((), dtype=dtype).element_size()
    alloc = grid.allocate(
        name,
        "weight",
        shape,
        layout.tile_shape,
        dtype,
        payload,
        layout=layout,
        origin=origin,
        spill_ok=spill_ok,
        limit=limit,
    )
    if alloc is None:
        return None
    alloc.slab = torch.empty(layout.slab_shape, dtype=dtype, device=grid.device)
    if grid.device.type != "meta":
        layout.fill(alloc.slab, tensor.detach().to(dtype))
    return alloc


def padded_bytes(role: str, shape: tuple[int, ...], rows: int, cols: int, elem: int) -> int:
    """Bytes the tensor takes on a rows x cols grid, padding included (for 'needs N tiles' messages)."""
    layout = layout_for(role, shape, rows, cols)
    return math.prod(layout.slab_shape) * elem


def describe(alloc: Allocation) -> str:
    """One line saying how a tensor is laid out over its tiles."""
    lay = alloc.layout
    if alloc.rect is None:
        return f"{alloc.name}: off-wafer, {alloc.payload_bytes:,} B"
    where = f"tiles ({alloc.rect.row0},{alloc.rect.col0})+{alloc.rect.rows}x{alloc.rect.cols} @ {alloc.offset}"
    if isinstance(lay, MatrixLayout):
        blocks = f"{lay.pr}x{lay.pc} blocks of {lay.bo}x{lay.bi}"
        return f"{alloc.name}: ({lay.out_features}, {lay.in_features}) as {blocks}, {where}"
    if isinstance(lay, VectorLayout):
        return f"{alloc.name}: ({lay.n},) as {lay.vr} chunks of {lay.vb} on the root column, {where}"
    if isinstance(lay, KVLayout):
        return (
            f"{alloc.name}: {lay.layers} layers x {lay.max_tokens} positions, {lay.rows} rows x {lay.slots} slots, "
            f"{lay.kv_heads} heads x {lay.ch} cols x {lay.f} features, {where}"
        )
    return f"{alloc.name}: {where}"
