"""Attention over a KV cache spread across the mesh, with per-tile partial softmax statistics.

Layout (placement.KVLayout): position p on tile row p % rows, slot p // rows; kv head h's head_dim features split
over its `ch` columns, f per tile. One query step:
  1. write the new keys/values into the tiles that own their positions;
  2. route q to the kv heads' columns and broadcast it down all rows;
  3. each tile takes partial dot products of q with its keys' features; a tree along each head's columns sums them;
  4. each row keeps its own softmax statistics over its slots (max m, sum l) and broadcasts the probabilities back
     along the head's columns;
  5. each tile weights its values' features by them (its partial output o);
  6. a two-level tree down each column merges (m, l, o) across rows, rescaling by exp(m_row - m_group) as it goes,
     and the root divides o by l and sends the head's output back to the root column.
Rows whose slots are all in the future carry m = most negative float, l = o = 0: they merge as zero weight.
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F
from torch import Tensor

from waferline.hardware.wafer.collectives import move, reach, tree, tree_softmax_merge, tree_sum
from waferline.hardware.wafer.cost import Cost, phase, tally
from waferline.hardware.wafer.ops import EXP_OPS, elem_size, mac_phase
from waferline.hardware.wafer.placement import KVLayout
from waferline.hardware.wafer.spec import WaferSpec
from waferline.hardware.wafer.tiles import Allocation


def kv_tensors(alloc: Allocation, layer: int) -> tuple[Tensor, Tensor]:
    """This layer's keys and values as stored: each (cols, slots, rows, f)."""
    assert alloc.slab is not None, f"{alloc.name} holds no bytes"
    return alloc.slab[layer, 0], alloc.slab[layer, 1]


def write(lay: KVLayout, keys: Tensor, values: Tensor, k: Tensor, v: Tensor, start: int) -> None:
    """Store k, v (T, kv_heads, head_dim) for positions start.. into the tiles that own them."""
    T = k.shape[0]
    pad = lay.ch * lay.f - lay.head_dim

    def by_tile(x: Tensor) -> Tensor:  # (T, KVH, D) -> (T, cols, f)
        return F.pad(x, (0, pad)).reshape(T, lay.cols, lay.f)

    kt, vt = by_tile(k), by_tile(v)
    pos = torch.arange(start, start + T, device=keys.device)
    rows, slots = pos % lay.rows, pos // lay.rows
    # keys[c, slot, row, :] for every position at once (advanced indexing writes each position's own slot)
    keys[:, slots, rows] = kt.transpose(0, 1).to(keys.dtype)
    values[:, slots, rows] = vt.transpose(0, 1).to(values.dtype)


def attend(lay: KVLayout, keys: Tensor, values: Tensor, q: Tensor, start: int) -> Tensor:
    """q (T, H, D) at positions start.. attends causally over positions 0..start+T-1 -> (T, H * D)."""
    T, H, D = q.shape
    KVH, ch, f = lay.kv_heads, lay.ch, lay.f
    G = H // KVH
    end = start + T
    S = lay.live_slots(end)  # slots holding any position < end
    R = lay.rows
    # 2. q by tile column: (cols, f, T * G), the features of this column's kv head for each query head of its group
    qc = F.pad(q.view(T, KVH, G, D), (0, ch * f - D)).view(T, KVH, G, ch, f)
    qc = qc.permute(1, 3, 4, 0, 2).reshape(KVH * ch, f, T * G)
    # 3. partial scores per tile: (cols, S * R, T * G), then the tree along each head's columns
    k_live = keys[:, :S].reshape(lay.cols, S * R, f)
    partial = torch.bmm(k_live, qc).view(KVH, ch, S, R, T, G)
    scores = tree_sum(partial, 1) * (1.0 / math.sqrt(D))  # (KVH, S, R, T, G)
    # causal mask: slot s of row r is position s * R + r; query t sits at start + t
    pos = (torch.arange(S, device=q.device).unsqueeze(1) * R + torch.arange(R, device=q.device)).view(S, R, 1)
    visible = pos <= torch.arange(start, end, device=q.device).view(1, 1, T)  # (S, R, T)
    visible = visible.view(1, S, R, T, 1)
    neg = torch.finfo(scores.dtype).min
    scores = scores.masked_fill(~visible, neg)
    # 4. each row's own statistics over its slots
    m = scores.amax(1)  # (KVH, R, T, G)
    p = torch.exp(scores - m.unsqueeze(1)) * visible  # (KVH, S, R, T, G); rows with nothing visible give 0
    den = p.sum(1)  # (KVH, R, T, G): each row's softmax denominator
    # 5. partial outputs: tile (r, c) weights its values' features -> (KVH, ch, R, T, G, f)
    v_live = values[:, :S].view(KVH, ch, S, R, f)
    o = torch.einsum("hsrtg,hjsrf->hjrtgf", p, v_live)
    # 6. merge across rows down each column (statistics repeat over a head's columns, as each column has a copy)
    m_c = m.unsqueeze(1).expand(KVH, ch, R, T, G)
    den_c = den.unsqueeze(1).expand(KVH, ch, R, T, G)
    den_out, o_out = tree_softmax_merge(m_c, den_c, o, dim=2)  # (KVH, ch, T, G), (KVH, ch, T, G, f)
    out = o_out / den_out.unsqueeze(-1)  # (KVH, ch, T, G, f)
    out = out.permute(2, 0, 3, 1, 4).reshape(T, KVH, G, ch * f)[..., :D]  # (T, KVH, G, D): head = kvh * G + g
    return out.reshape(T, H * D)


@functools.lru_cache(maxsize=16384)
def attend_cost(spec: WaferSpec, dtype: torch.dtype, lay: KVLayout, heads: int, tokens: int, slots: int) -> Cost:
    """Phases of one attention call for `tokens` queries over `slots` live slots per tile row (lay.live_slots of
    the length after writing: the cost changes once every `rows` positions, so it is cached by slots)."""
    e, t = elem_size(dtype), tokens
    R, C, f = lay.rows, lay.cols, lay.f
    G = heads // lay.kv_heads
    S = slots
    per_row = -(-t // R)  # new positions landing on the busiest row
    write = phase(
        "kv_write",
        move(spec, reach(C) + (R - 1), C, 2 * t * f, e),  # from the root column to the owning rows
        write_bytes=2 * t * lay.kv_heads * lay.head_dim * e,
        write_bytes_tile=2 * per_row * f * e,
    )
    q_spread = phase(
        "q_spread",
        move(spec, reach(C), C, t * G * f, e),  # q's features to their head's columns ...
        tree(spec, "broadcast", R, C, t * G * f, e),  # ... and down every row
        write_bytes=t * G * f * e * R * C,
        write_bytes_tile=t * G * f * e,
    )
    qk = t * S * G * f  # MACs on one tile
    scores = mac_phase("scores", qk, qk * R * C, e, tree(spec, "reduce", lay.ch, R * lay.kv_heads, t * S * G, e))
    softmax_ops = t * S * G * (3 + EXP_OPS)  # max, subtract, exp, sum on each head's root tile of each row
    softmax = phase(
        "softmax",
        tree(spec, "broadcast", lay.ch, R * lay.kv_heads, t * S * G, e),  # probabilities back along the columns
        macs=softmax_ops * R * lay.kv_heads,
        macs_tile=softmax_ops,
        read_bytes=2 * t * S * G * e * R * lay.kv_heads,
        read_bytes_tile=2 * t * S * G * e,
        write_bytes=t * S * G * e * R * lay.kv_heads,
        write_bytes_tile=t * S * G * e,
    )
    pv = mac_phase("pv", qk, qk * R * C, e, tree(spec, "reduce", R, C, t * G * (f + 2), e))
    finish = phase(
        "finish",
        move(spec, reach(C) + reach(R), C, t * G * f, e),  # the head outputs back to the root column
        macs=t * heads * lay.head_dim,
        macs_tile=t * G * f,
        read_bytes=t * G * (f + 1) * e * C,
        read_bytes_tile=t * G * (f + 1) * e,
        write_bytes=t * G * f * e * C,
        write_bytes_tile=t * G * f * e,
    )
    return tally(spec, dtype, [write, q_spread, scores, softmax, pv, finish])
