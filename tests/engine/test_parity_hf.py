"""Golden parity: waferline and Hugging Face transformers load the same checkpoint and compute the same function.

Each case is a tiny random checkpoint written by `save_checkpoint` and loaded twice: by `load_model` (cpu backend,
float32) and by `transformers.AutoModelForCausalLM.from_pretrained`. The logits of a whole prompt must match, and 64
greedy tokens must be identical: waferline decodes them one at a time with its KV cache, transformers recomputes the
full sequence for every token, so the test also checks cached decode against recomputation.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from waferline.engine.checkpoint import LoadedModel, load_model
from waferline.engine.tokenizer import Tokenizer

transformers = pytest.importorskip("transformers")

WriteCheckpoint = Callable[..., Path]
PROMPT = "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n"
NEW_TOKENS = 64

LLAMA3_SCALING = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 32,  # short, so that the scaling bends frequencies this prompt uses
}

CASES: dict[str, dict[str, Any]] = {
    "llama-gqa-untied": dict(model_type="llama", n_heads=4, n_kv_heads=2, tie_embeddings=False, rope_theta=10000.0),
    "llama-mha-tied-llama3-rope": dict(
        model_type="llama", n_heads=4, n_kv_heads=4, tie_embeddings=True, rope_theta=500000.0,
        rope_scaling=LLAMA3_SCALING,
    ),
    "llama-linear-rope-deepseek-coder": dict(
        model_type="llama", n_heads=4, n_kv_heads=4, rope_theta=100000.0,
        rope_scaling={"type": "linear", "factor": 4.0},
    ),
    "llama-wide-head-dim": dict(model_type="llama", n_heads=4, n_kv_heads=1, head_dim=32, rope_theta=10000.0),
    "qwen2-gqa-bias-tied": dict(model_type="qwen2", n_heads=4, n_kv_heads=2, tie_embeddings=True, rope_theta=1e6),
    "qwen2-mqa-bias-untied": dict(model_type="qwen2", n_heads=4, n_kv_heads=1, tie_embeddings=False, rope_theta=1e4),
    "qwen3-gqa-untied": dict(model_type="qwen3", n_heads=4, n_kv_heads=2, tie_embeddings=False, rope_theta=1e6),
    "qwen3-mqa-tied-wide-head-dim": dict(
        model_type="qwen3", n_heads=4, n_kv_heads=1, head_dim=32, tie_embeddings=True, rope_theta=1e6,
    ),
}  # fmt: skip
ARCHITECTURES = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM"}


def greedy_waferline(lm: LoadedModel, prompt: list[int], n: int) -> list[int]:
    """Prefill the prompt, then decode one token at a time through the KV cache."""
    kv = lm.model.open_cache()
    logits = lm.model.forward(torch.tensor(prompt), kv, 0)
    out: list[int] = []
    for _ in range(n):
        token = int(logits[-1].argmax())
        out.append(token)
        logits = lm.model.forward(torch.tensor([token]), kv, kv.length)
    return out


@torch.no_grad()
def greedy_hf(model: Any, prompt: list[int], n: int) -> list[int]:
    """Recompute the whole sequence for every token: no cache on this side."""
    ids = list(prompt)
    for _ in range(n):
        ids.append(int(model(torch.tensor([ids])).logits[0, -1].argmax()))
    return ids[len(prompt) :]


def load_both(path: Path) -> tuple[LoadedModel, Any]:
    ours = load_model(path, backend="cpu", dtype="float32")
    theirs = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    return ours, theirs.eval()


@pytest.mark.parametrize("case", sorted(CASES))
def test_logits_and_greedy_tokens_match_transformers(write_checkpoint: WriteCheckpoint, case: str) -> None:
    ours, theirs = load_both(write_checkpoint(case, seed=zlib.crc32(case.encode()), **CASES[case]))
    assert type(theirs).__name__ == ARCHITECTURES[ours.args.model_type]
    prompt = ours.tokenizer.encode(PROMPT)
    assert len(prompt) > LLAMA3_SCALING["original_max_position_embeddings"]

    with torch.no_grad():
        expected = theirs(torch.tensor([prompt])).logits[0]
    got = ours.model.forward(torch.tensor(prompt), ours.model.open_cache(), 0, last_only=False)
    torch.testing.assert_close(got, expected, atol=2e-4, rtol=1e-4)

    tokens = greedy_waferline(ours, prompt, NEW_TOKENS)
    assert tokens == greedy_hf(theirs, prompt, NEW_TOKENS)
    assert len(set(tokens)) > 3, "a degenerate sequence would make greedy parity a weak test"


@pytest.mark.parametrize("scaling", [LLAMA3_SCALING, {"type": "linear", "factor": 4.0}])
def test_rope_scaling_is_exercised(write_checkpoint: WriteCheckpoint, scaling: dict[str, Any]) -> None:
    # guard against a scaled case passing because the scaling changes nothing for this prompt
    scaled = load_model(write_checkpoint("scaled", model_type="llama", rope_scaling=scaling))
    plain = load_model(write_checkpoint("plain", model_type="llama"))
    prompt = torch.tensor(scaled.tokenizer.encode(PROMPT))
    a = scaled.model.forward(prompt, scaled.model.open_cache(), 0, last_only=False)
    b = plain.model.forward(prompt, plain.model.open_cache(), 0, last_only=False)
    assert not torch.allclose(a[-1], b[-1], atol=1e-3)


@pytest.mark.parametrize("model_type", ["llama", "qwen2", "qwen3"])
def test_loads_what_transformers_saves(tmp_path: Path, bpe_tokenizer: Tokenizer, model_type: str) -> None:
    # save_pretrained writes today's config format (rope_parameters, dtype, layer_types), not ours
    shape = dict(
        vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=256, initializer_range=0.1,
    )  # fmt: skip
    if model_type == "llama":
        config = transformers.LlamaConfig(**shape, rope_theta=500000.0, rope_scaling=LLAMA3_SCALING)
    elif model_type == "qwen2":
        config = transformers.Qwen2Config(**shape, tie_word_embeddings=True, rope_theta=1e6)
    else:  # head_dim wider than hidden_size / heads, as Qwen3's are (128 with 5,120 / 64 in the 32B)
        config = transformers.Qwen3Config(**shape, head_dim=32, tie_word_embeddings=False, rope_theta=1e6)
    torch.manual_seed(0)
    theirs = transformers.AutoModelForCausalLM.from_config(config).eval()
    for name, t in theirs.named_parameters():  # transformers sets norms to 1: make Qwen3's per-head ones tell apart
        if name.endswith(("q_norm.weight", "k_norm.weight")):
            torch.nn.init.uniform_(t, 0.5, 1.5)
    theirs.save_pretrained(tmp_path)
    (tmp_path / "tokenizer.json").write_text(bpe_tokenizer.to_str())

    ours = load_model(tmp_path)
    assert ours.args.rope_scaling == (LLAMA3_SCALING | {"rope_theta": 500000.0} if model_type == "llama" else None)
    prompt = ours.tokenizer.encode(PROMPT)
    with torch.no_grad():
        expected = theirs(torch.tensor([prompt])).logits[0]
    got = ours.model.forward(torch.tensor(prompt), ours.model.open_cache(), 0, last_only=False)
    torch.testing.assert_close(got, expected, atol=2e-4, rtol=1e-4)
    assert greedy_waferline(ours, prompt, NEW_TOKENS) == greedy_hf(theirs, prompt, NEW_TOKENS)
