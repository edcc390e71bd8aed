"""Several wafers as pipeline stages: the same numbers as one wafer, and transfer and occupancy counters that
match a hand count."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from waferline.engine.hf import from_hf, init_random, iter_meta
from waferline.engine.model import ModelArgs, Transformer, weight_shapes
from waferline.hardware import Device
from waferline.hardware.wafer import MultiWaferDevice, WaferDevice, get_spec
from waferline.hardware.wafer.multi import stage_bounds
from waferline.hardware.wafer.system import TOKEN_ID_BYTES

pytestmark = pytest.mark.usefixtures("single_thread")

ARGS = ModelArgs(vocab_size=512, dim=64, n_layers=4, n_heads=4, n_kv_heads=2, intermediate_size=160, qkv_bias=True)


def decode(device, args: ModelArgs, weights, prompt: int, steps: int):
    """Greedy tokens, the last logits, and the counters of the decode steps (prefill excluded)."""
    model = Transformer(args, device)
    model.load(from_hf(args, weights))
    kv = model.open_cache(prompt + steps)
    logits = model.forward(torch.arange(prompt) % args.vocab_size, kv, 0)
    device.reset_counters()
    tokens = []
    for _ in range(steps):
        tokens.append(0 if logits.is_meta else int(logits[-1].argmax()))
        logits = model.forward(torch.tensor(tokens[-1:]), kv, kv.length)
    return tokens, logits, device.counters()


def test_stages_are_contiguous_and_balanced():
    assert stage_bounds(4, 2) == [(0, 2), (2, 4)]
    assert stage_bounds(80, 3) == [(0, 26), (26, 53), (53, 80)]
    bounds = stage_bounds(126, 26)
    sizes = [hi - lo for lo, hi in bounds]
    assert bounds[0][0] == 0 and bounds[-1][1] == 126 and all(a[1] == b[0] for a, b in itertools.pairwise(bounds))
    assert max(sizes) - min(sizes) == 1
    with pytest.raises(AssertionError):
        stage_bounds(2, 3)


@pytest.mark.parametrize(("args", "spec"), [(ARGS, "mini-8x8"), (ModelArgs.from_name("tiny"), "mini-32x32")])
def test_a_model_split_over_two_mini_wafers_gives_the_tokens_and_logits_of_one(args, spec):
    weights = init_random(args)
    one = decode(WaferDevice(spec=spec), args, weights.items(), prompt=9, steps=4)
    two = decode(MultiWaferDevice(wafers=2, n_layers=args.n_layers, spec=spec), args, weights.items(), 9, 4)
    assert two[0] == one[0]
    torch.testing.assert_close(two[1], one[1], rtol=0, atol=0)  # each layer computed on the same grid, same order


def test_transfer_and_occupancy_counters_match_a_hand_count():
    spec = get_spec("mini-8x8")
    wafers, steps, e = 2, 3, 4  # float32
    device = MultiWaferDevice(wafers=wafers, n_layers=ARGS.n_layers, spec=spec)
    one = WaferDevice(spec=spec)
    weights = init_random(ARGS)
    decode(one, ARGS, weights.items(), prompt=5, steps=steps)
    _, _, c = decode(device, ARGS, weights.items(), prompt=5, steps=steps)
    # one crossing per decode step of one token: the residual stream, dim elements
    assert c["inter_wafer_transfers"] == (wafers - 1) * steps
    assert c["inter_wafer_bytes"] == (wafers - 1) * steps * ARGS.dim * e
    link = math.ceil((ARGS.dim * e / spec.system_io_bytes_per_s + spec.system_link_latency_s) * spec.clock_hz)
    assert c["cycles.inter_wafer"] == (wafers - 1) * steps * link
    # the host sends one token id per step and receives its logits, whatever the number of wafers
    assert c["host_io_bytes"] == steps * (TOKEN_ID_BYTES + ARGS.vocab_size * e)
    # weights: each wafer holds its layers' tensors and the rotary tables, the first the embedding, the last the
    # final norm and the (tied or own) LM head
    shapes = weight_shapes(ARGS)
    rope = 2 * ARGS.max_seq_len * (ARGS.head_dim // 2) * e

    def held(stage: int) -> int:
        lo, hi = device.bounds[stage]
        names = [n for n in shapes if n.startswith("layers.") and lo <= int(n.split(".")[1]) < hi]
        names += ["embedding"] if stage == 0 else []
        names += ["norm", "lm_head"] if stage == wafers - 1 else []
        head = (ARGS.vocab_size, ARGS.dim)
        return rope + sum(math.prod(shapes.get(n, head)) * e for n in names)

    stats = device.wafer_stats()
    assert [s["weight_bytes"] for s in stats] == [held(0), held(1)]
    assert [s["layers"] for s in stats] == [2, 2]
    for s, dev in zip(stats, device.stages, strict=True):
        assert s["occupancy"] == dev.grid.bytes_used / spec.sram_bytes and 0 < s["occupancy"] <= 1
    # the pipeline's time is its stages' time, and the stages together do one wafer's work plus the crossings
    assert c["cycles"] == pytest.approx(sum(s["seconds_per_token"] for s in stats) * steps * spec.clock_hz)
    assert c["macs"] == one.counters()["macs"]


def test_a_pipeline_is_a_device_and_reports_like_one():
    device = MultiWaferDevice(wafers=2, n_layers=ARGS.n_layers, spec="mini-8x8", analytic=True)
    assert isinstance(device, Device)
    _, _, c = decode(device, ARGS, iter_meta(ARGS), prompt=3, steps=1)
    report = device.report()
    assert report.tok_s > 0 and report.breakdown["inter_wafer"] > 0
    assert c["tiles"] == 2 * 64 and c["wafers"] == 2
