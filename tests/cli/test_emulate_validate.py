"""`waferline emulate --validate`: predictions beside the published single-stream figures, computed as documented."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from waferline.cli.emulate_plan import plan, resolve
from waferline.cli.emulate_validate import PAIRS, TARGET, Pair, layer_cycles, predict
from waferline.cli.main import main
from waferline.hardware.wafer import get_spec

pytestmark = pytest.mark.usefixtures("single_thread")


def cycles(margs, spec, layers: int) -> float:
    shaped = dataclasses.replace(margs, n_layers=layers)
    return plan(shaped, spec, torch.float16, 64, wafers=1, spill=False).device.report().cycles_per_token


def test_one_layers_cycles_are_what_each_further_layer_adds():
    """WaferLLM times one layer and multiplies by the layers: the difference of two projections is that layer's
    cost alone (embedding, head and I/O cancel), the same whichever two depths are compared."""
    margs, spec = resolve("tiny").args, get_spec("mini-32x32")
    one = layer_cycles(margs, spec, torch.float16, 64)
    assert one == pytest.approx(cycles(margs, spec, 3) - cycles(margs, spec, 2))
    assert 0 < one < cycles(margs, spec, 1)  # a one-layer token costs its layer plus the embedding, head and I/O


def test_a_layer_pair_converts_cycles_at_the_wafers_clock_and_a_decode_pair_projects_the_token():
    spec = get_spec("mini-32x32")
    layer = predict(Pair("tiny", "mini-32x32", 5000, "TEST", "layer", 64))
    margs = resolve("tiny").args
    per_layer = layer_cycles(margs, spec, torch.float16, 64)
    assert layer["predicted_tok_s"] == pytest.approx(spec.clock_hz / (per_layer * margs.n_layers))
    decode = predict(Pair("tiny", "mini-32x32", 5000, "TEST", "decode", 64))
    assert decode["predicted_tok_s"] == pytest.approx(plan(margs, spec, torch.float16, 64, wafers=None,
                                                           spill=False).device.report().tok_s)  # fmt: skip
    for r in (layer, decode):
        assert r["error"] == pytest.approx(r["predicted_tok_s"] / 5000 - 1)
        assert r["within_target"] == (abs(r["error"]) <= TARGET)


def test_the_waferllm_pairs_time_the_shapes_its_artifact_times():
    """Decode/WSE-2/model_config/{llama8B,qwen72B}_4k_1_720.json: one head as wide as the model, a 4,320 cache; and
    the WSE-3 weak-scaling runs' shapes, whose published figure is cycles a layer."""
    shapes = {p.model: resolve(p.model).args for p in PAIRS if p.kind == "layer"}
    assert {m: (a.dim, a.n_heads, a.head_dim, a.intermediate_size, a.n_layers) for m, a in shapes.items()} == {
        "waferllm-llama3-8b": (4320, 1, 4320, 14400, 32),
        "waferllm-qwen2-72b": (8640, 1, 8640, 30240, 80),
        "waferllm-weak-240": (2160, 1, 2160, 7200, 32),  # Decode/WSE-3/model_config/llama8B_weak_1_240.json
        "waferllm-weak-360": (3240, 1, 3240, 10800, 32),
    }
    assert {p.model: p.context + 1 for p in PAIRS if p.kind == "layer"} == {
        "waferllm-llama3-8b": 4320, "waferllm-qwen2-72b": 4320, "waferllm-weak-240": 2160, "waferllm-weak-360": 3240,
    }  # fmt: skip
    weak = {p.model: p.published_tok_s * 32 for p in PAIRS if "weak" in p.model}  # cycles a layer, at 1.1 GHz
    assert weak == pytest.approx({"waferllm-weak-240": 1.1e9 / 19546.034, "waferllm-weak-360": 1.1e9 / 22029.114})
    assert {get_spec(p.wafer).clock_hz for p in PAIRS if p.kind == "layer"} == {1.1e9}  # WaferLLM's conversion


@pytest.mark.slow  # every published pair projected: ~12 s
def test_validate_lists_every_pair(capsys):
    assert main(["emulate", "--validate", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["model"], r["published_tok_s"]) for r in rows] == [(p.model, p.published_tok_s) for p in PAIRS]
    assert all(r["predicted_tok_s"] > 0 and r["error"] == pytest.approx(r["predicted_tok_s"] /
               r["published_tok_s"] - 1) for r in rows)  # fmt: skip


@pytest.mark.parametrize("k", [1, 2, 4, 8])
@pytest.mark.parametrize("rate", [0.0, 0.3, 0.73, 0.99])
def test_the_implied_acceptance_yields_the_tokens_it_was_solved_for(k, rate):
    from waferline.cli.emulate_speculate import expected_tokens
    from waferline.cli.emulate_validate import solve_acceptance

    solved = solve_acceptance(k, expected_tokens(k, rate))
    assert solved == pytest.approx(rate, abs=1e-9)


def test_no_acceptance_yields_more_than_every_drafted_token_and_the_targets_own():
    from waferline.cli.emulate_validate import solve_acceptance

    assert solve_acceptance(4, 5.0) == pytest.approx(1.0)
    assert solve_acceptance(4, 5.01) is None
    assert solve_acceptance(4, 0.8) == 0.0  # one token a step needs no drafted token accepted


def test_an_under_predicted_figure_is_read_as_tokens_per_verification_step():
    """A published figure above the one-token prediction: the tokens a k-token verification step would have to
    yield are the figure times that step's modeled time; a figure within the target asks nothing of speculation."""
    from waferline.cli.emulate_speculate import speculate
    from waferline.cli.emulate_validate import DRAFT_LENGTHS

    margs, spec = resolve("tiny").args, get_spec("mini-32x32")
    planned = plan(margs, spec, torch.float16, 64, wafers=None, spill=False)
    one = planned.device.report().tok_s
    row = predict(Pair("tiny", "mini-32x32", 3 * one, "TEST", "decode", 64))
    assert row["error"] == pytest.approx(-2 / 3)
    implied = row["implied_acceptance"]
    assert list(implied) == [str(k) for k in DRAFT_LENGTHS]
    for k in DRAFT_LENGTHS:
        verify_s = speculate(planned, margs, torch.float16, 64, k, 0.0)["verify_s"]
        assert implied[str(k)]["tokens_per_step"] == pytest.approx(3 * one * verify_s)
    assert "implied_acceptance" not in predict(Pair("tiny", "mini-32x32", one, "TEST", "decode", 64))
