"""Reductions and broadcasts along lines of tiles: the numbers they produce and the cycles they cost.

A line of `span` tiles (a row or a column) reduces to the tile in its middle (the root), so that the farthest
value travels half the line. Each arm (the tiles on one side, plus the root) reduces with a two-level tree, as
WaferLLM's MeshGEMV does: tiles form groups of K neighbours; each group chains its partial sums to its leader (K-1
one-hop steps), then the leaders chain theirs to the root (G-1 steps of K hops). Against a plain chain this cuts
the steps from n-1 to about 2*sqrt(n) and needs only two routing colours per tile (one per level; the two arms
are mirror images on disjoint routers and share them), which is what the wafer's few colours per router allow.
Broadcasts run the same tree the other way. `root(span)` is the middle tile's index. A spec may force the number of
first-level groups (`tree_groups`, for sweeps) and may run a pattern on a longer one (`route_merge`, when the
patterns would need more routing colours than a router has: routes.py); both change the cost, never the numbers.

Latency of one collective on the critical path, in cycles, after the performance model that predicts CS-2
reductions within 4% (Luczynski et al., HPDC 2024, [LUCZ] in docs/wafer-validation.md):
    hops * hop_cycles + levels * wavelets + depth * (2 * ramp_cycles + 1)
where hops is the farthest distance a value travels; each level adds the time to stream the message's wavelets (one
32-bit wavelet per link per cycle) through a pipeline that is already full; and each of the `depth` dependent steps
on the critical path (a core taking a value off its router, combining it, putting the result back: T_R cycles down
the ramp, one to add, T_R up) costs 2 T_R + 1 cycles. A reduction's depth is its tree's sequential steps; a broadcast
is relayed by one core per level (the routers multicast along each line); a move has one sender and one receiver.
A spec may add a flat excess over the hops (collective_overhead, 0 in the presets) for sweeps.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch
from torch import Tensor

from waferline.hardware.wafer.spec import WaferSpec


@functools.lru_cache(maxsize=4096)
def tree_group(span: int) -> int:
    """Group size K of the two-level tree over `span` tiles: fewest steps (K-1) + (ceil(span/K)-1); ties go to a
    K that divides span (even groups), then to the smaller K."""
    if span <= 2:
        return max(span, 1)
    best = min(range(1, span + 1), key=lambda k: ((k - 1) + (-(-span // k) - 1), span % k != 0, k))
    return best


def root(span: int) -> int:
    """Index of the root tile of a line of `span` tiles: the middle one."""
    return (span - 1) // 2


def arms(span: int) -> tuple[int, int]:
    """Tiles on each side of the root, the longer arm (after the root) first."""
    return span - 1 - root(span), root(span)


def reach(span: int) -> int:
    """Hops from the root of a line of `span` tiles to its farthest tile."""
    return arms(span)[0]


# -- the numbers ---------------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=1024)
def _groups(span: int) -> tuple[Tensor, int]:
    """Which first-level group each tile of a line belongs to: the root alone is group 0; each arm, counted from
    the root outwards, in groups of K = tree_group(arm + 1). Returns (group id per tile, number of groups)."""
    r = root(span)
    ids = [0] * span
    n = 1
    for direction, length in ((1, span - 1 - r), (-1, r)):
        k = tree_group(length + 1)
        for step in range(1, length + 1):
            ids[r + direction * step] = n + (step - 1) // k
        n += -(-length // k)
    return torch.tensor(ids), n


def tree_sum(t: Tensor, dim: int) -> Tensor:
    """Sum `t` over `dim` as the mesh does: every group of each arm sums into its leader (first level), then the
    leaders' sums into the root (second level)."""
    span = t.shape[dim]
    if span <= 2:
        return t.sum(dim)
    ids, n = _groups(span)
    shape = list(t.shape)
    shape[dim] = n
    if ids.device != t.device:
        ids = ids.to(t.device)
    leaders = t.new_zeros(shape).index_add_(dim, ids, t)  # (..., groups, ...): level 1
    return leaders.sum(dim)  # level 2


def tree_softmax_merge(m: Tensor, den: Tensor, o: Tensor, dim: int) -> tuple[Tensor, Tensor]:
    """Combine per-tile softmax partials across `dim` over the same tree as tree_sum -> (den, o), max folded in.

    m: each tile's running max, den: its sum of exp(score - m), o: its exp-weighted values (one more, trailing dim).
    Level 1: each group's leader takes the group's max and adds its members' den and o rescaled by exp(m - max);
    level 2: the root does the same over the leaders. Empty partials carry a very negative finite m and den = o = 0,
    so they merge as zero weight.
    """
    span = m.shape[dim]
    if span > 2:
        ids, n = _groups(span)
        if ids.device != m.device:
            ids = ids.to(m.device)
        shape = list(m.shape)
        shape[dim] = n
        top = m.new_full(shape, torch.finfo(m.dtype).min).scatter_reduce_(
            dim, ids.view([-1 if d == dim else 1 for d in range(m.dim())]).expand_as(m), m, "amax"
        )  # (..., groups, ...): each group's max
        scale = torch.exp(m - top.index_select(dim, ids))  # every partial rescaled to its group's max
        den = den.new_zeros(shape).index_add_(dim, ids, den * scale)
        o = o.new_zeros([*shape, o.shape[-1]]).index_add_(dim, ids, o * scale.unsqueeze(-1))
        m = top
    top = m.amax(dim, keepdim=True)  # level 2: the root over the leaders
    scale = torch.exp(m - top)
    return (den * scale).sum(dim), (o * scale.unsqueeze(-1)).sum(dim)


# -- the cost ------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Collective:
    """One collective: `lines` parallel lines of `span` tiles, each moving a message of `elems` elements."""

    kind: str  # "reduce", "broadcast" (two-level trees) or "move" (point to point along a route)
    span: int
    lines: int
    elems: int
    hops: int  # farthest distance on the critical path
    steps: int  # sequential send-receive steps on the critical path
    levels: int
    wavelets: int  # per message
    wavelet_hops: int  # traffic: wavelets x links crossed, all lines together
    cycles: int  # latency on the critical path

    @property
    def pattern(self) -> tuple[str, int]:
        """What the routers must be configured for (one colour per level per distinct pattern)."""
        return (self.kind, self.span)


def _wavelets(spec: WaferSpec, elems: int, elem_bytes: int) -> int:
    return -(-elems * elem_bytes * 8 // spec.link_bits)


def _latency(spec: WaferSpec, hops: int, levels: int, wavelets: int, depth: int) -> int:
    distance = math.ceil(hops * spec.hop_cycles * (1 + spec.collective_overhead))
    return distance + levels * wavelets + depth * (2 * spec.ramp_cycles + 1)


def _arm(n: int, groups: int = 0) -> tuple[int, int, int, int]:
    """A two-level tree over an arm of n tiles plus the root: (hops, steps, levels, links crossed by all messages).
    groups > 0 forces that many first-level groups (a sweep's variable); 0 takes the fewest steps."""
    if n == 0:
        return 0, 0, 0, 0
    k = -(-(n + 1) // min(groups, n + 1)) if groups > 0 else tree_group(n + 1)
    groups = -(-(n + 1) // k)
    hops = n  # every value flows towards the root (each group's leader is its tile nearest the root): the arm's length
    steps = (k - 1) + (groups - 1)
    links = (n + 1 - groups) + (groups - 1) * k  # each member one hop to its leader, each leader k hops on
    return hops, steps, 1 if groups == 1 else 2, links


def tree(spec: WaferSpec, kind: str, span: int, lines: int, elems: int, elem_bytes: int) -> Collective | None:
    """A two-level tree reduce or broadcast over `span` tiles to or from the middle one, in `lines` parallel lines
    (None when span is 1: nothing moves)."""
    assert kind in ("reduce", "broadcast"), kind
    if span <= 1 or lines == 0 or elems == 0:
        return None
    span = spec.route_span(kind, span)  # a merged pattern: the line runs on a longer configured one
    long_arm, short_arm = arms(span)
    hops, steps, levels, links = _arm(long_arm, spec.tree_groups)
    links += _arm(short_arm, spec.tree_groups)[3]
    w = _wavelets(spec, elems, elem_bytes)
    depth = steps if kind == "reduce" else levels  # every reduction step waits on a core; a broadcast only relays
    cycles = _latency(spec, hops, levels, w, depth)
    return Collective(kind, span, lines, elems, hops, steps, levels, w, links * w * lines, cycles)


def move(spec: WaferSpec, hops: int, lines: int, elems: int, elem_bytes: int) -> Collective | None:
    """Point-to-point messages of `elems` along routes of at most `hops` links, `lines` of them at once."""
    if hops <= 0 or lines == 0 or elems == 0:
        return None
    hops = spec.route_span("move", hops + 1) - 1
    w = _wavelets(spec, elems, elem_bytes)
    cycles = _latency(spec, hops, 1, w, 1)
    return Collective("move", hops + 1, lines, elems, hops, 1, 1, w, w * hops * lines, cycles)
