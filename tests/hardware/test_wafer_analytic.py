"""Analytic mode (shapes only) against numeric mode (real numbers): the same counters, and full wafers fast."""

from __future__ import annotations

import pytest
import torch

from waferline.engine.hf import from_hf, init_random, iter_meta
from waferline.engine.model import ModelArgs, Transformer
from waferline.hardware import Device, open_device
from waferline.hardware.wafer import WaferDevice, WaferOutOfMemory


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Many tiny ops: on a shared 2-core machine, one thread avoids OpenMP waits that dominate them."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def meta_weights(args: ModelArgs):
    return iter_meta(args)


def run(device: WaferDevice, args: ModelArgs, weights, prompt: int, steps: int) -> list[dict[str, float]]:
    """Counters of a prefill and of each decode step after it."""
    model = Transformer(args, device)
    model.load(from_hf(args, weights))
    kv = model.open_cache(prompt + steps)
    out = []
    device.reset_counters()
    model.forward(torch.arange(prompt) % args.vocab_size, kv, 0)
    out.append(device.counters())
    for i in range(steps):
        device.reset_counters()
        model.forward(torch.tensor([i]), kv, kv.length)
        out.append(device.counters())
    return out


@pytest.mark.parametrize(
    ("spec", "preset"),
    [("mini-16x16", None), ("mini-7x11", None), ("mini-32x32", "tiny")],
)
def test_analytic_counters_equal_numeric_counters(spec, preset):
    args = (
        ModelArgs.from_name(preset)
        if preset
        else ModelArgs(
            vocab_size=512, dim=64, n_layers=2, n_heads=4, n_kv_heads=2, intermediate_size=160, qkv_bias=True
        )
    )
    numeric = run(WaferDevice(spec=spec), args, init_random(args).items(), prompt=21, steps=3)
    analytic = run(WaferDevice(spec=spec, analytic=True), args, meta_weights(args), prompt=21, steps=3)
    assert numeric == analytic
    assert numeric[-1]["tokens"] == 1 and numeric[-1]["cycles"] > 0


def test_registry_builds_a_wafer_device_with_options():
    device = open_device("wafer", dtype=torch.float16, spec="wse-2", analytic=True)
    assert isinstance(device, WaferDevice) and device.spec.name == "wse-2" and device.dtype == torch.float16
    assert isinstance(device, Device)  # every method of the seam


def project(preset: str, spec: str, dtype: torch.dtype, context: int) -> WaferDevice:
    args = ModelArgs.from_name(preset)
    device = WaferDevice(spec=spec, dtype=dtype, analytic=True)
    model = Transformer(args, device)
    model.load(from_hf(args, meta_weights(args)))
    kv = model.open_cache(context + 1)
    model.forward(torch.zeros(context, dtype=torch.long), kv, 0)
    device.reset_counters()
    model.forward(torch.zeros(1, dtype=torch.long), kv, context)
    return device


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_an_8b_model_on_a_full_wse3_is_projected_from_shapes(dtype):
    """No weights exist and nothing is computed (how fast: docs/benchmarks.md)."""
    device = project("llama-3.1-8b", "wse-3", dtype, 4096)
    report = device.report()
    counts = device.counters()
    assert counts["tiles_used"] == device.spec.tiles  # every tile holds a share of every matrix
    assert 16e9 < counts["weight_bytes"] < 17e9  # 8.03B parameters x 2 bytes
    assert counts["max_tile_bytes"] <= device.spec.sram_bytes_per_tile
    assert report.breakdown["fabric"] > report.breakdown["compute"], "decode on a wafer waits on the mesh"
    assert 100 < report.tok_s < 100_000


def test_a_70b_model_does_not_fit_one_wse3_unless_it_spills():
    args = ModelArgs(
        vocab_size=128256,
        dim=8192,
        n_layers=80,
        n_heads=64,
        n_kv_heads=8,
        intermediate_size=28672,
        max_seq_len=1024,
        rope_theta=500000.0,
    )
    device = WaferDevice(spec="wse-3", dtype=torch.float16, analytic=True)
    model = Transformer(args, device)
    model.load(from_hf(args, meta_weights(args)))
    with pytest.raises(WaferOutOfMemory, match="tiles"):
        model.open_cache(1024)
    spilled = WaferDevice(spec="wse-3", dtype=torch.float16, analytic=True, spill=True)
    model = Transformer(args, spilled)
    model.load(from_hf(args, meta_weights(args)))
    kv = model.open_cache(1024)
    model.forward(torch.zeros(1, dtype=torch.long), kv, 0)
    report = spilled.report()
    assert report.breakdown["off_wafer"] > report.breakdown["fabric"], "streaming 90+ GB per token dominates"
