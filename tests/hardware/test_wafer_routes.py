"""Routing colours: a program over the routers' limit is refused, and the plan that merges patterns fits and is
charged as the longer spans it runs on."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from waferline.hardware.wafer import WaferDevice, WaferRoutingError
from waferline.hardware.wafer.collectives import move, tree
from waferline.hardware.wafer.routes import colours, fit_routes
from waferline.hardware.wafer.spec import WSE3
from waferline.hardware.wafer.system import logits_out, stage_transfer, tokens_in


def test_fit_routes_merges_the_closest_spans_of_a_kind_until_the_colours_fit():
    routes = {("reduce", 100): 2, ("reduce", 110): 2, ("reduce", 400): 2, ("move", 50): 1, ("move", 60): 1}
    assert colours(routes) == 8
    assert fit_routes(routes, 8) == ()
    assert fit_routes(routes, 7) == (("reduce", 100, 110),)  # 110/100 is the smallest ratio
    merges = fit_routes(routes, 5)
    assert ("move", 50, 60) in merges and ("reduce", 100, 110) in merges
    merged = dict(routes)
    for kind, small, _ in merges:
        merged.pop((kind, small))
    assert colours(merged) <= 5
    chained = fit_routes(routes, 3)  # reduce 100 -> 110, then 110 -> 400 carries 100 along
    assert ("reduce", 100, 400) in chained and ("reduce", 110, 400) in chained


def test_fit_routes_refuses_what_no_merging_fits():
    with pytest.raises(WaferRoutingError, match="routing colours"):
        fit_routes({("reduce", 10): 2, ("broadcast", 10): 2, ("move", 5): 1}, 4)


def test_a_merged_pattern_costs_its_longer_span():
    spec = dataclasses.replace(WSE3, route_merge=(("reduce", 100, 400), ("move", 51, 61)))
    assert tree(spec, "reduce", 100, 4, 8, 2) == tree(WSE3, "reduce", 400, 4, 8, 2)
    assert tree(spec, "broadcast", 100, 4, 8, 2) == tree(WSE3, "broadcast", 100, 4, 8, 2)  # another kind
    assert move(spec, 50, 3, 8, 2) == move(WSE3, 60, 3, 8, 2)


def test_a_device_over_the_colour_limit_is_refused_with_its_patterns():
    spec = dataclasses.replace(WSE3, name="few-colours", rows=16, cols=16, routes_per_tile=3)
    device = WaferDevice(spec=spec, analytic=True)
    device.charge("linear", _cost(spec))  # 2 + 2 colours: two trees of two levels
    with pytest.raises(WaferRoutingError, match="few-colours"):
        device.check_routes()


def _cost(spec):
    from waferline.hardware.wafer.cost import phase, tally

    return tally(
        spec, torch.float32, [phase("p", tree(spec, "reduce", 16, 1, 4, 4), tree(spec, "broadcast", 9, 1, 4, 4))]
    )


def test_system_io_terms_are_bytes_over_the_system_io_plus_one_hop():
    e, clock, bw, hop = 2, WSE3.clock_hz, WSE3.system_io_bytes_per_s, WSE3.system_link_latency_s
    assert bw == 12 * 100e9 / 8  # 12 x 100 GbE
    ids = tokens_in(WSE3, torch.float16, 3).counts
    assert ids["cycles.host_io"] == math.ceil((3 * 4 / bw + hop) * clock) and ids["host_io_bytes"] == 12
    out = logits_out(WSE3, torch.float16, 1, 128256).counts
    assert out["cycles.host_io"] == math.ceil((128256 * e / bw + hop) * clock)
    assert out["cycles.fabric"] > 0  # the logits first cross half the wafer to its edge
    hop_cost = stage_transfer(WSE3, torch.float16, 1, 8192).counts
    assert hop_cost["inter_wafer_transfers"] == 1 and hop_cost["inter_wafer_bytes"] == 8192 * e
    assert hop_cost["cycles"] == hop_cost["cycles.fabric"] + hop_cost["cycles.inter_wafer"]
