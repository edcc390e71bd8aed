"""The per-token operations other than attention, each twice: on the real numbers tile by tile, and as phases.

Numbers: every operation reads its weights from the tiles that hold them (the allocation's slab) and computes all
tiles at once with batched tensor ops; the partial sums of a GEMV are materialised per tile and reduced with the
two-level tree of collectives.py, in the order the mesh would add them.

Phases (cost.py): what each tile computes, reads and writes, and which collectives follow. Activations between
operations live in the vector layout of placement.py (split along the root column); a GEMV first routes its input
chunks to their tile columns and broadcasts them down each column, and ends with a tree reduction along each row back
to the root column. The cost functions take shapes only and are cached, so a decode step looks each one up.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import Tensor

from waferline.hardware.wafer.collectives import Collective, move, reach, tree, tree_sum
from waferline.hardware.wafer.cost import Cost, Phase, phase, tally
from waferline.hardware.wafer.placement import MatrixLayout, VectorLayout, vector_layout
from waferline.hardware.wafer.spec import WaferSpec
from waferline.hardware.wafer.tiles import Allocation

# Lane-operations per element for the non-MAC work. No per-instruction figures are published for the wafer's cores,
# so these count one SIMD lane-op per arithmetic step (docs/hardware.md, "assumed"): silu(g) = g / (1 + exp(-g)) is
# exp, add, divide (3), times up (1).
SWIGLU_OPS = 4
EXP_OPS = 1


def elem_size(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def mac_phase(name: str, macs_tile: int, macs: int, e: int, *collectives: Collective | None, **extra: int) -> Phase:
    """A phase of multiply-accumulates: each MAC reads its operand and its accumulator and writes the accumulator
    (the core's FMAC with two memory reads and one write per cycle)."""
    return phase(
        name,
        *collectives,
        macs=macs,
        macs_tile=macs_tile,
        read_bytes=2 * macs * e + extra.get("read_bytes", 0),
        read_bytes_tile=2 * macs_tile * e + extra.get("read_bytes_tile", 0),
        write_bytes=macs * e,
        write_bytes_tile=macs_tile * e,
        off_wafer_bytes=extra.get("off_wafer_bytes", 0),
    )


def elementwise_phase(name: str, tokens: int, lay: VectorLayout, ops: int, operands: int, e: int) -> Phase:
    """`ops` lane-ops per element on `operands` inputs, over a vector split along the root column."""
    return phase(
        name,
        macs=ops * tokens * lay.n,
        macs_tile=ops * tokens * lay.vb,
        read_bytes=operands * tokens * lay.n * e,
        read_bytes_tile=operands * tokens * lay.vb * e,
        write_bytes=tokens * lay.n * e,
        write_bytes_tile=tokens * lay.vb * e,
    )


# -- linear ----------------------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=4096)
def linear_cost(spec: WaferSpec, dtype: torch.dtype, lay: MatrixLayout, tokens: int, bias: bool, spilled: bool) -> Cost:
    e, t = elem_size(dtype), tokens
    chunk = t * lay.bi  # input elements one tile column needs
    distribute = phase(
        "distribute",
        move(spec, reach(lay.pc), lay.pc, chunk, e),  # root column -> each tile column, along the rows
        tree(spec, "broadcast", lay.pr, lay.pc, chunk, e),  # down each column
        write_bytes=t * lay.in_features * lay.pr * e,
        write_bytes_tile=chunk * e,
    )
    gemv = mac_phase(
        "gemv",
        t * lay.bo * lay.bi,
        t * lay.out_features * lay.in_features,
        e,
        tree(spec, "reduce", lay.pc, lay.pr, t * lay.bo, e),  # partial sums along each row to the root column
        read_bytes=chunk * e * lay.pr * lay.pc,
        read_bytes_tile=chunk * e,
        off_wafer_bytes=lay.out_features * lay.in_features * e if spilled else 0,
    )
    phases = [distribute, gemv]
    if bias:
        phases.append(elementwise_phase("bias", t, vector_layout(lay.out_features, spec.rows), 1, 2, e))
    return tally(spec, dtype, phases)


def linear(weight: Allocation, x: Tensor, bias: Allocation | None) -> Tensor:
    """x (T, in) -> (T, out): per-tile partial products of every block, then the tree reduction along each row."""
    lay = weight.layout
    assert isinstance(lay, MatrixLayout), f"{weight.name} is not a matrix"
    assert weight.slab is not None, f"{weight.name} holds no bytes"
    T = x.shape[0]
    out_p, in_p = lay.padded
    if in_p != lay.in_features:
        x = F.pad(x, (0, in_p - lay.in_features))  # zeros against the padded edge blocks
    xc = x.view(T, lay.pc, lay.bi).transpose(0, 1)  # (pc, T, bi): tile column c's chunk of every token
    slab = weight.slab.view(lay.pc, lay.bi, out_p)  # (pc, bi, pr * bo): tile column c's blocks, transposed
    partial = torch.bmm(xc.contiguous(), slab)  # (pc, T, pr * bo): tile (r, c)'s partial sums at [c, :, r*bo:]
    y = tree_sum(partial, 0)  # (T, pr * bo), reduced along each row of tiles
    if out_p != lay.out_features:
        y = y[:, : lay.out_features]
    if bias is not None:
        y = y + vector(bias)
    return y


def vector(alloc: Allocation) -> Tensor:
    """The 1-D weight held along the root column, (n,)."""
    lay = alloc.layout
    assert isinstance(lay, VectorLayout) and alloc.slab is not None, f"{alloc.name} is not a placed vector"
    return alloc.slab.view(-1)[: lay.n]


def table_rows(alloc: Allocation, rows: Tensor) -> Tensor:
    """Rows of a (n, width) matrix placed in blocks, gathered from the tiles holding them: (len(rows), width)."""
    lay = alloc.layout
    assert isinstance(lay, MatrixLayout) and alloc.slab is not None, f"{alloc.name} is not a placed matrix"
    out_p, in_p = lay.padded
    flat = alloc.slab.view(in_p, out_p)  # the padded matrix, transposed: row o of W is column o here
    return flat.index_select(1, rows)[: lay.in_features].t()  # (T, width)


# -- embedding and rotary tables -------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=4096)
def gather_cost(
    spec: WaferSpec, dtype: torch.dtype, lay: MatrixLayout, tokens: int, tables: int, spilled: bool
) -> Cost:
    """Fetch `tokens` rows of `tables` tables held in blocks and bring them to the root column."""
    e, t = elem_size(dtype), tokens
    chunk = tables * t * lay.bi
    fetch = phase(
        "gather",
        move(spec, reach(lay.pc) + (lay.pr - 1), lay.pc, chunk, e),  # from the rows' tiles to the root column
        read_bytes=tables * t * lay.in_features * e,
        read_bytes_tile=chunk * e,
        write_bytes=tables * t * lay.in_features * e,
        write_bytes_tile=chunk * e,
        off_wafer_bytes=tables * t * lay.in_features * e if spilled else 0,
    )
    return tally(spec, dtype, [fetch])


def embed(table: Allocation, tokens: Tensor) -> Tensor:
    return table_rows(table, tokens)  # (T, dim)


@functools.lru_cache(maxsize=4096)
def rotary_cost(
    spec: WaferSpec, dtype: torch.dtype, table: MatrixLayout, tokens: int, width: int, spilled: bool, fetch: bool
) -> Cost:
    """Rotate `width` elements per token. With `fetch`, first bring this step's cos and sin rows to the root column
    and spread them down it; every later rotation at the same positions (q and k of every layer) reuses them."""
    e, t = elem_size(dtype), tokens
    lay = vector_layout(width, spec.rows)
    rotate = tally(spec, dtype, [elementwise_phase("rotate", t, lay, 2, 3, e)])  # two FMACs per element
    if not fetch:
        return rotate
    spread = phase("spread", tree(spec, "broadcast", lay.vr, 1, 2 * t * table.in_features, e))
    return gather_cost(spec, dtype, table, tokens, 2, spilled) + tally(spec, dtype, [spread]) + rotate


def rotary(x: Tensor, cos: Allocation, sin: Allocation, start: int) -> Tensor:
    T = x.shape[0]
    half = x.shape[-1] // 2
    rows = torch.arange(start, start + T, device=x.device)
    c = table_rows(cos, rows).unsqueeze(1)  # (T, 1, D/2)
    s = table_rows(sin, rows).unsqueeze(1)
    x1, x2 = x[..., :half], x[..., half:]  # (T, H, D/2) each
    return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)


# -- vector operations on the root column ----------------------------------------------------------------------------
@functools.lru_cache(maxsize=4096)
def rms_norm_cost(spec: WaferSpec, dtype: torch.dtype, n: int, tokens: int) -> Cost:
    e, t = elem_size(dtype), tokens
    lay = vector_layout(n, spec.rows)
    sumsq = mac_phase(
        "sumsq",
        t * lay.vb,
        t * n,
        e,
        tree(spec, "reduce", lay.vr, 1, t, e),  # the sum of squares to the root ...
        tree(spec, "broadcast", lay.vr, 1, t, e),  # ... and 1/rms back to every tile of the column
    )
    scale = elementwise_phase("scale", t, lay, 2, 2, e)  # x * (1/rms) * w
    return tally(spec, dtype, [sumsq, scale])


def rms_norm(x: Tensor, weight: Allocation, eps: float) -> Tensor:
    lay = weight.layout
    assert isinstance(lay, VectorLayout), f"{weight.name} is not a vector"
    T, n = x.shape
    padded = x if lay.vr * lay.vb == n else F.pad(x, (0, lay.vr * lay.vb - n))
    xs = padded.view(T, lay.vr, lay.vb)  # (T, tiles, chunk) along the root column
    sumsq = tree_sum((xs * xs).sum(-1), 1)  # (T,): per-tile sums, then the tree along the column
    inv = torch.rsqrt(sumsq / n + eps).unsqueeze(1)  # (T, 1)
    return x * inv * vector(weight)


@functools.lru_cache(maxsize=4096)
def elementwise_cost(spec: WaferSpec, dtype: torch.dtype, n: int, tokens: int, ops: int) -> Cost:
    lay = vector_layout(n, spec.rows)
    return tally(spec, dtype, [elementwise_phase("elementwise", tokens, lay, ops, 2, elem_size(dtype))])
