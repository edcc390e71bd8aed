"""Collectives and the cost model: the numbers the mesh produces, and the cycles it charges for them."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from waferline.hardware.wafer.collectives import arms, move, reach, tree, tree_group, tree_softmax_merge, tree_sum
from waferline.hardware.wafer.cost import Phase, report, tally
from waferline.hardware.wafer.spec import WSE2, WSE3


@settings(deadline=None)
@given(span=st.integers(1, 300))
def test_tree_sum_is_the_sum(span):
    t = torch.randn(3, span, 2, dtype=torch.float64)
    torch.testing.assert_close(tree_sum(t, 1), t.sum(1))


@settings(deadline=None)
@given(span=st.integers(1, 60), slots=st.integers(1, 4), empty=st.integers(0, 59))
def test_merged_softmax_statistics_equal_one_softmax(span, slots, empty):
    """Each row holds `slots` scores per head; some rows hold none that are visible. Every row keeps its own
    (max, sum, weighted values); merging them down the column gives the softmax over everything."""
    scores = torch.randn(span, slots, 5, dtype=torch.float64)  # (rows, slots, heads)
    values = torch.randn(span, slots, 3, dtype=torch.float64)  # (rows, slots, features)
    seen = torch.ones(span, slots, 1, dtype=torch.bool)
    seen[: min(empty, span - 1)] = False  # whole rows with nothing visible
    masked = scores.masked_fill(~seen, torch.finfo(scores.dtype).min)
    m = masked.amax(1)  # (rows, heads)
    p = torch.exp(masked - m.unsqueeze(1)) * seen
    den = p.sum(1)
    o = torch.einsum("rsh,rsf->rhf", p, values)
    den_out, o_out = tree_softmax_merge(m, den, o, dim=0)
    w = torch.softmax(scores.masked_fill(~seen, -math.inf).flatten(0, 1), 0)  # (rows * slots, heads)
    torch.testing.assert_close(o_out / den_out.unsqueeze(-1), torch.einsum("nh,nf->hf", w, values.flatten(0, 1)))


@settings(deadline=None)
@given(span=st.integers(2, 2000))
def test_a_tree_reaches_half_the_line_in_about_2_sqrt_steps(span):
    col = tree(WSE3, "reduce", span, lines=1, elems=1, elem_bytes=2)
    assert col is not None
    assert col.hops == reach(span) == arms(span)[0] >= (span - 1) / 2
    k = tree_group(reach(span) + 1)
    assert col.steps <= 2 * math.isqrt(span) + 2 and k >= 1
    assert col.levels in (1, 2)
    # the fastest a value can cross half the line, the message streamed once per level, and 2 T_R + 1 cycles for
    # every sequential step a core takes (T_R = 2 cycles down or up a core's ramp [LUCZ])
    assert WSE3.ramp_cycles == 2 and WSE3.collective_overhead == 0
    assert col.cycles == col.hops + col.levels * col.wavelets + col.steps * (2 * 2 + 1)


def test_a_broadcast_is_relayed_by_one_core_per_level_and_a_move_by_none():
    """The routers multicast along a line: a broadcast waits on a core only where a level hands over; a move's
    sender and receiver are its only cores."""
    down = tree(WSE3, "broadcast", 500, lines=1, elems=6, elem_bytes=2)
    up = tree(WSE3, "reduce", 500, lines=1, elems=6, elem_bytes=2)
    assert down is not None and up is not None and down.steps == up.steps > down.levels == 2
    assert down.cycles == down.hops + 2 * down.wavelets + 2 * 5
    assert up.cycles - down.cycles == (up.steps - 2) * 5  # the reduction's extra core steps, 5 cycles each
    hop = move(WSE3, 100, lines=3, elems=6, elem_bytes=2)
    assert hop is not None and hop.cycles == 100 + hop.wavelets + 5


def test_a_tree_over_one_tile_moves_nothing():
    assert tree(WSE3, "broadcast", 1, lines=4, elems=8, elem_bytes=2) is None


def test_a_phase_costs_its_slower_local_bound_plus_its_collectives():
    col = tree(WSE2, "reduce", 100, lines=10, elems=4, elem_bytes=2)
    assert col is not None
    p = Phase("gemv", macs=1000, macs_tile=400, read_bytes_tile=2000, write_bytes_tile=100, collectives=(col,))
    fp16 = tally(WSE2, torch.float16, [p]).counts
    assert fp16["cycles.compute"] == 0 and fp16["cycles.sram"] == 2000 / 16  # 125 > 400 / 4 = 100 MAC cycles
    assert fp16["cycles.fabric"] == col.cycles
    fp32 = tally(WSE2, torch.float32, [p]).counts
    assert fp32["cycles.compute"] == 400 and fp32["cycles.sram"] == 0  # one fp32 MAC per cycle
    assert fp32["cycles"] == 400 + col.cycles


def test_report_turns_cycles_into_seconds_at_the_clock():
    counts = {"cycles": 1.1e6, "cycles.compute": 1e5, "cycles.sram": 0.0, "cycles.fabric": 1e6, "tokens": 2.0}
    r = report(WSE2, counts)
    assert r.seconds_per_token == pytest.approx(0.5e-3)
    assert r.tok_s == pytest.approx(2000)
    assert r.breakdown["fabric"] == pytest.approx(1e6 / 2 / 1.1e9)
