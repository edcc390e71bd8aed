"""Placement properties: every weight byte lands on exactly one tile, no tile passes its capacity, and a model that
cannot fit says how many tiles it needed."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from waferline.engine.hf import from_hf, iter_meta
from waferline.engine.model import ModelArgs, Transformer
from waferline.hardware.wafer import WaferDevice, WaferOutOfMemory
from waferline.hardware.wafer.placement import MatrixLayout, VectorLayout, kv_layout
from waferline.hardware.wafer.spec import mini
from waferline.hardware.wafer.tiles import Allocation, tile_view

shapes = st.tuples(st.integers(1, 90), st.integers(1, 90))
grids = st.tuples(st.integers(1, 12), st.integers(1, 12))


def reassemble(device: WaferDevice, alloc: Allocation) -> tuple[torch.Tensor, torch.Tensor]:
    """Rebuild a placed tensor by reading every tile that holds part of it: (values, how many tiles wrote each)."""
    lay = alloc.layout
    assert alloc.rect is not None
    if isinstance(lay, MatrixLayout):
        out = torch.zeros(lay.out_features, lay.in_features, dtype=alloc.dtype)
        hits = torch.zeros(lay.out_features, lay.in_features, dtype=torch.int64)
    else:
        assert isinstance(lay, VectorLayout)
        out = torch.zeros(lay.n, dtype=alloc.dtype)
        hits = torch.zeros(lay.n, dtype=torch.int64)
    for r in range(alloc.rect.rows):
        for c in range(alloc.rect.cols):
            block = device.grid.tile(alloc.rect.row0 + r, alloc.rect.col0 + c).read(alloc)
            if isinstance(lay, MatrixLayout):
                o0, i0 = r * lay.bo, c * lay.bi
                o1, i1 = min(o0 + lay.bo, lay.out_features), min(i0 + lay.bi, lay.in_features)
                out[o0:o1, i0:i1] += block[: o1 - o0, : i1 - i0]
                hits[o0:o1, i0:i1] += 1
                assert not block[o1 - o0 :].any() and not block[:, i1 - i0 :].any(), "padding holds zeros"
            else:
                e0, e1 = r * lay.vb, min((r + 1) * lay.vb, lay.n)
                out[e0:e1] += block[: e1 - e0]
                hits[e0:e1] += 1
    return out, hits


@settings(max_examples=60, deadline=None)
@given(shape=shapes, grid=grids, role=st.sampled_from(["linear", "embedding", "table", "norm"]))
def test_every_weight_element_is_placed_exactly_once(shape, grid, role):
    device = WaferDevice(spec=mini(*grid))
    if role == "norm":
        shape = (shape[0],)
    weight = torch.arange(1, 1 + torch.Size(shape).numel(), dtype=torch.float32).reshape(shape)
    ref = device.place("w", weight, role=role)
    values, hits = reassemble(device, ref.payload)
    assert torch.equal(hits, torch.ones_like(hits)), "an element on no tile or on two"
    assert torch.equal(values, weight)


@settings(max_examples=40, deadline=None)
@given(matrices=st.lists(shapes, min_size=1, max_size=8), grid=grids)
def test_no_tile_exceeds_its_capacity_and_the_table_adds_up(matrices, grid):
    spec = mini(*grid)
    device = WaferDevice(spec=spec, dtype=torch.float32)
    refs = [device.place(f"m{i}", torch.ones(shape), role="linear") for i, shape in enumerate(matrices)]
    used = device.grid.used_map()
    assert int(used.max()) <= spec.sram_bytes_per_tile
    assert int(used.sum()) == device.grid.bytes_used
    placed = [a for a in device.grid.table if a.rect is not None]
    for a in placed:  # allocations sharing a tile never overlap in its bytes
        for b in placed:
            if a is not b and a.rect.intersects(b.rect):
                assert a.offset + a.bytes_per_tile <= b.offset or b.offset + b.bytes_per_tile <= a.offset
    if any(ref.payload is None for ref in refs):  # some matrix found no room: the device says so before running
        with pytest.raises(WaferOutOfMemory):
            device.check_fits()
    else:
        device.check_fits()
    for a in placed:
        assert tile_view(a).shape == (a.rect.rows, a.rect.cols, *a.tile_shape)


@settings(max_examples=25, deadline=None)
@given(dim=st.integers(16, 64).map(lambda d: d * 4), layers=st.integers(1, 6), side=st.integers(2, 6))
def test_a_model_that_cannot_fit_names_the_tiles_it_needed(dim, layers, side):
    args = ModelArgs(vocab_size=4096, dim=dim, n_layers=layers, n_heads=2, n_kv_heads=1, intermediate_size=4 * dim)
    device = WaferDevice(spec=mini(side, side), analytic=True)
    model = Transformer(args, device)
    model.load(from_hf(args, iter_meta(args)))
    needed = 2 * 4096 * dim * 4  # at least the embedding and the head, in float32
    assert needed > side * side * 48 * 1024, "the strategy makes models that cannot fit"
    with pytest.raises(WaferOutOfMemory, match=r"at least [\d,]+ tiles") as err:
        model.open_cache(16)
    tiles = int(str(err.value).split("at least ")[1].split(" tiles")[0].replace(",", ""))
    assert tiles * 48 * 1024 >= needed, "at least the bytes of the tensors that found no room"
    assert tiles > side * side


def test_spilling_instead_of_failing_counts_off_wafer_bytes():
    args = ModelArgs(vocab_size=4096, dim=64, n_layers=1, n_heads=2, n_kv_heads=1, intermediate_size=128)
    device = WaferDevice(spec=mini(4, 4), analytic=True, spill=True)
    model = Transformer(args, device)
    model.load(from_hf(args, iter_meta(args)))
    kv = model.open_cache(8)
    model.forward(torch.zeros(1, dtype=torch.long), kv, 0)
    counts = device.counters()
    assert counts["spilled_bytes"] > 0 and counts["off_wafer_bytes"] > 0 and counts["cycles.off_wafer"] > 0


@given(length=st.integers(1, 500), rows=st.integers(1, 40))
def test_kv_positions_fill_every_row_evenly(length, rows):
    lay = kv_layout(layers=2, kv_heads=2, head_dim=16, max_tokens=512, rows=rows, cols=8)
    counts = [0] * lay.rows
    for p in range(length):
        r, slot = lay.locate(p)
        assert slot < lay.slots
        counts[r] += 1
    assert max(counts) - min(counts) <= 1, "round-robin: no tile row fills before another"
    assert max(counts) == lay.live_slots(length)


def test_the_tile_memory_table_lists_every_allocation_with_its_bytes():
    device = WaferDevice(spec="mini-8x8")
    device.place("layers.0.qkv", torch.ones(24, 16), role="linear")
    device.place("layers.0.attn_norm", torch.ones(16), role="norm")
    device.kv_open(layers=1, kv_heads=2, head_dim=8, max_tokens=32)
    table = device.placement_table()
    for name in ("layers.0.qkv", "layers.0.attn_norm", "kv0", "scratch", "capacity 49,152 B/tile"):
        assert name in table
