"""`waferline bench`: the JSON it promises, and the same weights rebuilt in transformers for --compare-hf."""

from __future__ import annotations

import pytest
import torch

from waferline.engine.tokenizer import byte_fallback_tokenizer

pytestmark = pytest.mark.usefixtures("single_thread")  # the command sets torch's threads; put them back after

PROMPT = byte_fallback_tokenizer(512).encode("def add(a, b):\n    return")  # 18 ids


def test_bench_json_is_one_object_with_the_promised_fields(capsys: pytest.CaptureFixture[str]) -> None:
    import gc
    import json

    from waferline.cli.main import main
    from waferline.engine import heap

    argv = ["bench", "--model", "tiny", "--prompt-tokens", "8", "--new-tokens", "4"]  # no --dtype: the server's
    heap.release()
    assert main([*argv, "--repeats", "1", "--json"]) == 0
    frozen = gc.get_freeze_count()
    heap.release()
    assert frozen > 0, "the bench froze the loaded model's objects, as the server does (engine/heap.py)"
    report = json.loads(capsys.readouterr().out)
    for key in ("model", "params", "dtype", "backend", "prompt_tokens", "new_tokens", "prefill_tok_s", "decode_tok_s"):
        assert key in report
    assert report["dtype"] == "int8" and report["new_tokens"] == 4 and report["threads"] == 1
    assert report["decode_tok_s"] > 0 and report["ms_per_token"] > 0 and report["roofline_tok_s"] > 0
    assert report["weight_bytes_per_token"] < report["params"] * 1.1  # int8: about a byte per weight read
    from waferline.hardware.torch_backend import fused_library

    assert report["decode_path"] == ("fused" if fused_library.library() is not None else "per-op")
    assert report["read_probe"] == ("c" if fused_library.library() is not None else "torch")
    # int8 weights: no block products, so the prefetch is not measured (a block model's first step chooses it)
    assert report["prefetch"] is (True if report["decode_path"] == "fused" else None)
    assert report["x8_narrow"] is None  # no block products: no width to report
    assert report["step_tok_s"] > 0
    # what the process holds on 2 MB pages (the KV caches the bench made, at least where the system gives them)
    assert report["huge_pages_mb"] is None or report["huge_pages_mb"] >= 0
    assert report["step_roofline_fraction"] == pytest.approx(report["step_tok_s"] / report["roofline_tok_s"])
    # the roofline's working set is the model's own weights: what a step reads, less one embedding row, plus the
    # int8 scales as placed (float32 in the torch backend's bfloat16 device: 2 bytes a row, as counted)
    assert abs(report["read_bytes"] - report["weight_bytes_per_token"]) < 0.01 * report["weight_bytes_per_token"]


@pytest.mark.slow  # imports transformers (several seconds)
def test_bench_builds_the_same_weights_in_transformers() -> None:
    from waferline.benchmarks.decode import hf_model
    from waferline.engine.checkpoint import load_model

    loaded = load_model("tiny")
    hf = hf_model(loaded, torch.float32)
    ids = torch.tensor([PROMPT])
    with torch.inference_mode():
        theirs = hf(ids).logits[0]
        ours = loaded.model.forward(ids[0], loaded.model.open_cache(64), 0, last_only=False)
    torch.testing.assert_close(ours, theirs, atol=1e-4, rtol=1e-4)


def test_bench_k_curve_and_speculate_report_json(capsys: pytest.CaptureFixture[str]) -> None:
    """--k-curve times k = 1..16 from --prompt-tokens cached positions; --speculate decodes the copy-heavy prompts both
    ways (a preset: the caller's draft is the model's own text, so every drafted token holds) and reports tokens per
    step and drafts per source."""
    import json

    from waferline.cli.main import main

    argv = ["bench", "--model", "tiny", "--dtype", "int8", "--new-tokens", "6", "--repeats", "1"]
    assert main([*argv, "--k-curve", "--speculate", "--prompt-tokens", "40", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["k_curve_position"] == 40
    assert [row["k"] for row in report["k_curve"]] == list(range(1, 17))
    assert all(row["k_step_ms"] > 0 and row["cost"] > 0 for row in report["k_curve"])
    spec = report["speculate"]
    assert spec["draft"].startswith("caller") and len(spec["prompts"]) == 4
    assert spec["tokens_per_step"] > 1 and spec["sources"]["caller"]["accepted"] > 0
    assert spec["accepted_tokens"] == spec["sources"]["caller"]["accepted"] <= spec["drafted_tokens"]
    assert spec["tokens_per_step"] == pytest.approx((spec["steps"] + spec["accepted_tokens"]) / spec["steps"])


def test_bench_k_curve_past_the_context_is_refused_with_a_message(capsys: pytest.CaptureFixture[str]) -> None:
    """A k-curve from --prompt-tokens steps 16 more tokens: past the model's context it says so instead of failing
    inside the cache."""
    from waferline.cli.main import main

    argv = ["bench", "--model", "tiny", "--k-curve", "--prompt-tokens", "2035", "--repeats", "1"]
    assert main(argv) == 2  # the decode run's --new-tokens (128 by default) is not what stops it
    assert "--k-curve steps up to 16 tokens past --prompt-tokens 2035" in capsys.readouterr().err
