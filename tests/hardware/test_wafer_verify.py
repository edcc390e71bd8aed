"""Speculative verification on the emulated wafer: the k-token step (`Transformer.verify`, as `Session.verify` runs
it), computed tile by tile, gives the torch backend's logits at each of the k positions; it is one step that reads
every weight once; and what `waferline emulate --speculate` costs on shapes alone is that same step."""

from __future__ import annotations

import pytest
import torch

from waferline.engine.hf import from_hf, init_random, iter_meta
from waferline.engine.kvcache import Session
from waferline.engine.model import ModelArgs, Transformer
from waferline.hardware import open_device
from waferline.hardware.wafer import MultiWaferDevice, WaferDevice

pytestmark = pytest.mark.usefixtures("single_thread")

PROMPT = [1, 5, 9, 200, 33, 7, 7, 4000, 12, 96, 3]
TOL = {"rtol": 1e-4, "atol": 1e-4}  # as the emulator-vs-torch parity tests (test_wafer_parity.py)


@pytest.fixture(scope="module")
def tiny() -> tuple[ModelArgs, dict[str, torch.Tensor]]:
    """The tiny preset with weights 3x the default std (as the parity tests), so logits differ across tokens."""
    args = ModelArgs.from_name("tiny")
    state = {k: v if k.endswith("norm.weight") else v * 3.0 for k, v in init_random(args, seed=1).items()}
    return args, state


def loaded(args: ModelArgs, state: dict[str, torch.Tensor], device) -> Transformer:
    model = Transformer(args, device)
    model.load(from_hf(args, state.items()))
    return model


def draft(k: int) -> list[int]:
    return [(37 * i + 11) % 8192 for i in range(k)]


@pytest.fixture(scope="module")
def torch_rows(tiny) -> dict[int, torch.Tensor]:
    """The torch backend's verification rows for k = 1, 4, 16 after PROMPT (its fused k-token step)."""
    model = loaded(*tiny, open_device("cpu"))
    out = {}
    for k in (1, 4, 16):
        session = Session(model, "torch", max_tokens=64)
        session.forward(PROMPT)
        out[k] = session.verify(draft(k))
    return out


@pytest.mark.parametrize("k", [1, 4, 16])
def test_verifying_k_tokens_gives_the_torch_backends_logits_at_each_position(tiny, torch_rows, k):
    model = loaded(*tiny, WaferDevice(spec="mini-32x32"))
    session = Session(model, "wafer", max_tokens=64)
    session.forward(PROMPT)
    rows = session.verify(draft(k))
    assert rows.shape == (k, model.args.vocab_size) and session.kv.length == len(PROMPT) + k
    torch.testing.assert_close(rows, torch_rows[k], **TOL)
    assert k == 1 or rows.std(0).mean() > 0.1, "the k rows should differ from each other"


def test_a_rejected_tail_is_taken_back_and_decoding_continues_as_on_torch(tiny):
    """Verify 16, keep 5 (the rest rejected), then decode on: the tiles' cache holds exactly what was kept."""
    outs = []
    for device in (open_device("cpu"), WaferDevice(spec="mini-32x32")):
        session = Session(loaded(*tiny, device), "s", max_tokens=64)
        session.forward(PROMPT)
        session.verify(draft(16))
        session.truncate(len(PROMPT) + 5)
        outs.append(torch.cat([session.forward([int(t)]) for t in (17, 4001, 250)]))
    torch.testing.assert_close(outs[1], outs[0], **TOL)


def test_a_k_token_verification_is_one_step_reading_each_weight_once(tiny):
    args = tiny[0]
    device = WaferDevice(spec="mini-32x32")
    model = loaded(*tiny, device)
    per_step = {}
    for k in (1, 16):
        kv = model.open_cache(64)
        model.forward(torch.tensor(PROMPT), kv, 0)
        device.reset_counters()
        model.forward(draft(k), kv, len(PROMPT), last_only=False, like_steps=True)
        per_step[k] = device.counters()
        device.kv_close(kv)
    for k, c in per_step.items():
        assert c["tokens"] == k and c["steps"] == 1
        assert c["op.linear.calls"] == 4 * args.n_layers + 1  # qkv, o, gate_up, down per layer, and the head
        assert c["op.attend.calls"] == args.n_layers  # all k queries of a layer in one call
    one, many = per_step[1]["cycles"], per_step[16]["cycles"]
    assert one < many < 16 * one  # more work than one token, far less than sixteen one-token steps


def test_verification_over_two_wafers_gives_the_torch_backends_logits(tiny, torch_rows):
    args = tiny[0]
    device = MultiWaferDevice(wafers=2, n_layers=args.n_layers, spec="mini-32x32")
    session = Session(loaded(*tiny, device), "two", max_tokens=64)
    session.forward(PROMPT)
    device.reset_counters()
    rows = session.verify(draft(4))
    torch.testing.assert_close(rows, torch_rows[4], **TOL)
    assert device.counters()["inter_wafer_transfers"] == 1  # the 4 tokens' residual stream crosses once


def test_the_analytic_verification_costs_what_the_numeric_one_counts(tiny):
    """`emulate --speculate` costs the step on shapes alone: the same counters as the step on real numbers."""
    args, state = tiny
    counts = []
    for analytic in (False, True):
        device = WaferDevice(spec="mini-32x32", analytic=analytic)
        model = Transformer(args, device)
        model.load(from_hf(args, iter_meta(args) if analytic else state.items()))
        kv = model.open_cache(64)
        model.forward(torch.tensor(PROMPT), kv, 0)
        device.reset_counters()
        model.forward(draft(8), kv, len(PROMPT), last_only=False, like_steps=True)
        counts.append({k: v for k, v in device.counters().items() if k.startswith("cycles") or k.startswith("op.")})
    assert counts[1] == counts[0]
