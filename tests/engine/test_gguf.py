"""GGUF in and out: a model directory exported as GGUF loads back with the same shape, tokenizer and tokens, for
each weight type and both architectures; and every way a GGUF file can be wrong gets a clear error."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest
import torch
from gguf_rewrite import finish, rewrite_gguf  # tests/support
from random_weights import scaled_state

from waferline.engine.checkpoint import DEFAULT_MODEL_DIR, CheckpointError, LoadedModel, load_model
from waferline.engine.checkpoint_save import save_checkpoint
from waferline.engine.generate import generate
from waferline.engine.gguf.names import from_gguf_rows, to_gguf_rows
from waferline.engine.gguf.write import export_gguf
from waferline.engine.kvcache import Session
from waferline.engine.model import ModelArgs

CODE = 'def scale(values, factor):\n    """Multiply each value by factor."""\n    return [v * factor for v in values]\n'


def logits(lm: LoadedModel, text: str = CODE) -> torch.Tensor:
    ids = torch.tensor(lm.tokenizer.encode(text))
    return lm.model.forward(ids, lm.model.open_cache(), 0, last_only=False).float()


def greedy(lm: LoadedModel, n: int = 24) -> list[int]:
    assert lm.fim is not None
    ids = lm.fim.build('def scale(values, factor):\n    """Multiply each value by factor."""\n    return ', "\n")
    return list(generate(Session(lm.model), ids, max_new_tokens=n, stop_token_ids=lm.special.stop_ids).tokens)


@pytest.fixture(scope="module")
def shipped() -> LoadedModel:
    return load_model(DEFAULT_MODEL_DIR)


@pytest.mark.parametrize("kind", ["f32", "f16", "q8_0"])
def test_the_shipped_model_round_trips(kind: str, shipped: LoadedModel, tmp_path: Path) -> None:
    out = export_gguf(DEFAULT_MODEL_DIR, tmp_path / f"m-{kind}.gguf", kind)
    lm = load_model(out)
    assert lm.args == shipped.args
    assert lm.special == shipped.special
    assert lm.fim is not None and shipped.fim is not None and lm.fim.family == shipped.fim.family == "waferline"
    text = CODE + "<|fim_prefix|> é 😀 \r\n\t x"
    assert lm.tokenizer.encode(text) == shipped.tokenizer.encode(text)
    assert lm.tokenizer.decode(shipped.tokenizer.encode(text)) == text
    a, b = logits(lm), logits(shipped)
    relative_error = float((a - b).abs().max() / b.abs().max())
    assert relative_error < {"f32": 1e-6, "f16": 1e-2, "q8_0": 3e-2}[kind]
    assert greedy(lm) == greedy(shipped)


def test_a_directory_holding_one_gguf_file_loads(tmp_path: Path) -> None:
    export_gguf(DEFAULT_MODEL_DIR, tmp_path / "only.gguf", "f16")
    assert load_model(tmp_path).name == "only"


@pytest.mark.parametrize("model_type", ["llama", "qwen2", "qwen3"])
def test_every_architecture_round_trips(model_type: str, tmp_path: Path) -> None:
    src = random_model(tmp_path / f"{model_type}-src", model_type)
    out = export_gguf(src, tmp_path / f"{model_type}.gguf", "f32")
    reader = gguf.GGUFReader(out)
    assert reader.fields["general.architecture"].contents() == model_type
    a, b = load_model(src), load_model(out)
    assert b.args == a.args
    assert torch.allclose(logits(a), logits(b), atol=1e-5, rtol=0)


def test_llama_rows_are_interleaved_per_head_and_back() -> None:
    args = ModelArgs(model_type="llama", dim=8, n_heads=2, n_kv_heads=1, intermediate_size=16, vocab_size=32)
    q = torch.arange(8.0).reshape(8, 1)  # two heads of four rows: [0 1 | 2 3], [4 5 | 6 7]
    moved = to_gguf_rows(args, "model.layers.0.self_attn.q_proj.weight", q)
    assert moved.flatten().tolist() == [0, 2, 1, 3, 4, 6, 5, 7]
    assert torch.equal(from_gguf_rows(args, "model.layers.0.self_attn.q_proj.weight", moved), q)
    qwen = ModelArgs(model_type="qwen2", dim=8, n_heads=2, n_kv_heads=1, intermediate_size=16, vocab_size=32)
    assert torch.equal(to_gguf_rows(qwen, "model.layers.0.self_attn.q_proj.weight", q), q)


def test_a_q4_0_file_is_dequantised(tmp_path: Path) -> None:
    """Block formats waferline does not write are read through the gguf package's dequantisers (Q4_0 here)."""
    src = random_model(tmp_path / "q4-src", "qwen2")
    f32 = export_gguf(src, tmp_path / "f32.gguf", "f32")
    q4 = rewrite_gguf(f32, tmp_path / "q4.gguf", gguf.GGMLQuantizationType.Q4_0)
    a, b = load_model(src), load_model(q4)
    assert b.args == a.args
    la, lb = logits(a), logits(b)
    assert not torch.equal(la, lb) and torch.nn.functional.cosine_similarity(la.flatten(), lb.flatten(), dim=0) > 0.9


# -- bad files ---------------------------------------------------------------------------------------------------------
def test_garbage_and_truncated_files_are_refused(tmp_path: Path) -> None:
    bad = tmp_path / "garbage.gguf"
    bad.write_bytes(b"not a gguf file at all")
    with pytest.raises(CheckpointError, match="not a readable GGUF file"):
        load_model(bad)
    whole = export_gguf(DEFAULT_MODEL_DIR, tmp_path / "whole.gguf", "f32").read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(CheckpointError, match=r"cut\.gguf"):
        load_model(cut)


def test_an_architecture_waferline_does_not_run_is_named(tmp_path: Path) -> None:
    path = tmp_path / "gemma.gguf"
    w = gguf.GGUFWriter(path, "gemma")
    w.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    finish(w)
    with pytest.raises(CheckpointError, match="architecture 'gemma' is not supported"):
        load_model(path)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("tokenizer.ggml.model", "llama", "byte-level BPE"),
        ("tokenizer.ggml.pre", "made-up", "pre-tokenizer 'made-up' is not known"),
    ],
)
def test_tokenizers_waferline_cannot_rebuild_are_refused(key: str, value: str, message: str, tmp_path: Path) -> None:
    f32 = export_gguf(DEFAULT_MODEL_DIR, tmp_path / "f32.gguf", "f32")
    changed = rewrite_gguf(f32, tmp_path / "changed.gguf", None, {key: value})
    with pytest.raises(CheckpointError, match=message):
        load_model(changed)


def test_export_refuses_to_overwrite_and_leaves_no_partial_file(tmp_path: Path) -> None:
    out = export_gguf(DEFAULT_MODEL_DIR, tmp_path / "m.gguf", "q8_0")
    with pytest.raises(CheckpointError, match="already exists"):
        export_gguf(DEFAULT_MODEL_DIR, out, "q8_0")
    with pytest.raises(CheckpointError, match="unknown GGUF weight type"):
        export_gguf(DEFAULT_MODEL_DIR, tmp_path / "n.gguf", "q3")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.gguf"]


# -- helpers -----------------------------------------------------------------------------------------------------------
def random_model(path: Path, model_type: str) -> Path:
    """A small random model with the shipped tokenizer (its pre-tokenizer is one llama.cpp knows: qwen2)."""
    args = ModelArgs(
        model_type=model_type, vocab_size=8192, dim=64, n_layers=2, n_heads=4, n_kv_heads=2, intermediate_size=128,
        max_seq_len=256, qkv_bias=model_type == "qwen2", tie_embeddings=model_type == "qwen2", norm_eps=1e-6,
    )  # fmt: skip
    state = scaled_state(args, seed=1)
    tokenizer = (DEFAULT_MODEL_DIR / "tokenizer.json").read_text(encoding="utf-8")
    return save_checkpoint(path, args, state, tokenizer_json=tokenizer, fim_template="waferline")
