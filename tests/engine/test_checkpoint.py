"""Loading and writing Hugging Face model directories, and every way a checkpoint can be wrong."""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import save_file

from waferline.engine import checkpoint as ckpt
from waferline.engine import weights
from waferline.engine.checkpoint import (
    INDEX_FILE,
    CheckpointError,
    CheckpointNotFoundError,
    LoadedModel,
    load_model,
    resolve_model,
)
from waferline.engine.checkpoint_save import save_checkpoint
from waferline.engine.model import ModelArgs, Transformer
from waferline.engine.tokenizer import PromptTooLongError, Tokenizer

WriteCheckpoint = Callable[..., Path]


def logits(lm: LoadedModel, text: str = "def add(a, b):\n    return a + b\n") -> torch.Tensor:
    ids = torch.tensor(lm.tokenizer.encode(text))
    return lm.model.forward(ids, lm.model.open_cache(), 0, last_only=False).float()


def edit_json(path: Path, **changes: Any) -> None:
    data = json.loads(path.read_text())
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    path.write_text(json.dumps(data))


# -- loading -----------------------------------------------------------------------------------------------------------
def test_loads_a_directory(tiny_model: LoadedModel, tiny_checkpoint: Path) -> None:
    lm = tiny_model
    assert lm.path == tiny_checkpoint and lm.name == "qwen2-tiny"
    assert (lm.args.model_type, lm.args.dim, lm.args.n_layers, lm.args.qkv_bias) == ("qwen2", 64, 2, True)
    assert lm.fim is not None and lm.fim.family == "waferline"
    eot, sep = lm.tokenizer.token_to_id("<|endoftext|>"), lm.tokenizer.token_to_id("<|file_sep|>")
    assert lm.special.eos_id == eot and lm.special.stop_ids == (eot, sep)
    assert lm.special.bos_id is None and not lm.special.add_bos
    assert torch.isfinite(logits(lm)).all()


def test_weights_stream_one_tensor_at_a_time(tiny_checkpoint: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []
    original = Transformer.load

    def spy(self: Transformer, tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        seen.append(tensors)
        original(self, tensors)

    monkeypatch.setattr(Transformer, "load", spy)
    load_model(tiny_checkpoint)
    assert isinstance(seen[0], Iterator), "weights must arrive as a stream, not a materialised dict or list"


def test_sharded_checkpoint_equals_single_file(write_checkpoint: WriteCheckpoint) -> None:
    single = load_model(write_checkpoint("single"))
    path = write_checkpoint("sharded", max_shard_bytes=40_000)
    index = json.loads((path / INDEX_FILE).read_text())
    shards = sorted(set(index["weight_map"].values()))
    assert len(shards) > 2 and not (path / "model.safetensors").exists()
    torch.testing.assert_close(logits(load_model(path)), logits(single))


@pytest.mark.parametrize("stored", ["bfloat16", "float16"])
def test_half_precision_checkpoints_load(write_checkpoint: WriteCheckpoint, stored: str) -> None:
    path = write_checkpoint(stored, dtype=stored)
    assert json.loads((path / "config.json").read_text())["torch_dtype"] == stored
    ref = logits(load_model(write_checkpoint("f32")))
    torch.testing.assert_close(logits(load_model(path)), ref, atol=0.1, rtol=0.05)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", torch.bfloat16, "bf16"])
def test_runs_in_half_precision(tiny_checkpoint: Path, tiny_model: LoadedModel, dtype: Any) -> None:
    lm = load_model(tiny_checkpoint, dtype=dtype)
    assert lm.dtype in (torch.bfloat16, torch.float16)
    torch.testing.assert_close(logits(lm), logits(tiny_model), atol=0.15, rtol=0.05)


def test_eos_token_id_may_be_a_list(write_checkpoint: WriteCheckpoint) -> None:
    path = write_checkpoint()
    edit_json(path / "generation_config.json", eos_token_id=[5, 0], bos_token_id=1)
    edit_json(path / "tokenizer_config.json", add_bos_token=True, eos_token="<|file_sep|>")
    lm = load_model(path)
    sep = lm.tokenizer.token_to_id("<|file_sep|>")
    assert lm.special.stop_ids == (5, 0, sep) and lm.special.eos_id == 5
    assert lm.special.bos_id == 1 and lm.special.add_bos


def test_config_written_by_transformers_5(write_checkpoint: WriteCheckpoint) -> None:
    # transformers >= 5 saves rope_theta (and any scaling) under rope_parameters
    path = write_checkpoint(model_type="llama", rope_theta=12345.0)
    edit_json(
        path / "config.json",
        rope_theta=None,
        rope_scaling=None,
        rope_parameters={"rope_type": "default", "rope_theta": 12345.0},
    )
    assert load_model(path).args.rope_theta == 12345.0


def test_preset_has_random_weights_and_a_tokenizer(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(ckpt, "DEFAULT_MODEL_DIR", tmp_path / "absent")
    lm = load_model("tiny")
    assert lm.path is None and lm.name == "tiny" and lm.args.vocab_size == 8192
    assert lm.tokenizer.vocab_size <= lm.args.vocab_size
    assert lm.fim is not None and lm.fim.family == "waferline"
    assert lm.special.eos_id == lm.tokenizer.token_to_id("<|endoftext|>")
    assert lm.tokenizer.decode(lm.tokenizer.encode("def f(): ✓")) == "def f(): ✓"
    assert torch.equal(logits(lm), logits(load_model("tiny"))), "a preset's weights are seeded"


def test_preset_uses_the_shipped_tokenizer_when_present(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, bpe_tokenizer: Tokenizer
) -> None:
    (tmp_path / "tokenizer.json").write_text(bpe_tokenizer.to_str())
    monkeypatch.setattr(ckpt, "DEFAULT_MODEL_DIR", tmp_path)
    assert load_model("tiny").tokenizer.vocab_size == bpe_tokenizer.vocab_size


def test_resolve_model(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tiny_checkpoint: Path) -> None:
    monkeypatch.setattr(ckpt, "DEFAULT_MODEL_DIR", tmp_path / "absent")
    assert resolve_model(None) == "tiny"
    monkeypatch.setattr(ckpt, "DEFAULT_MODEL_DIR", tiny_checkpoint)
    assert resolve_model(None) == tiny_checkpoint
    assert resolve_model("qwen2.5-coder-0.5b") == "qwen2.5-coder-0.5b"
    assert resolve_model(str(tiny_checkpoint)) == tiny_checkpoint
    monkeypatch.setattr(ckpt, "MODELS_DIR", tiny_checkpoint.parent)
    assert resolve_model(tiny_checkpoint.name) == tiny_checkpoint


def test_prompt_longer_than_the_context(tiny_model: LoadedModel) -> None:
    tiny_model.check_prompt(200, new_tokens=56)
    with pytest.raises(PromptTooLongError, match=r"300 prompt tokens exceed the model's context of 256"):
        tiny_model.check_prompt(300)


# -- writing -----------------------------------------------------------------------------------------------------------
def test_save_refuses_to_clobber(
    write_checkpoint: WriteCheckpoint, tiny_args: Callable[..., ModelArgs], random_state: Any
) -> None:
    path = write_checkpoint()
    args = tiny_args()
    with pytest.raises(CheckpointError, match=r"already exists"):
        save_checkpoint(path, args, random_state(args))
    save_checkpoint(path, args, random_state(args), overwrite=True)
    assert sorted(p.name for p in path.iterdir()) == ["config.json", "generation_config.json", "model.safetensors"]
    assert [p.name for p in path.parent.iterdir() if p.name.startswith(".")] == []


def test_failed_save_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_args: Callable[..., ModelArgs], random_state: Any
) -> None:
    def explode(*a: Any, **k: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(weights, "save_file", explode)
    args = tiny_args()
    with pytest.raises(OSError, match=r"disk full"):
        save_checkpoint(tmp_path / "m", args, random_state(args))
    assert list(tmp_path.iterdir()) == []


def test_save_checks_the_state_dict(tmp_path: Path, tiny_args: Callable[..., ModelArgs], random_state: Any) -> None:
    args = tiny_args()
    state = random_state(args)
    with pytest.raises(CheckpointError, match=r"lacks 1 tensors, e.g. 'model.norm.weight'"):
        save_checkpoint(tmp_path / "a", args, {k: v for k, v in state.items() if k != "model.norm.weight"})
    with pytest.raises(CheckpointError, match=r"'model.norm.weight' has shape \(3,\)"):
        save_checkpoint(tmp_path / "b", args, {**state, "model.norm.weight": torch.ones(3)})
    with pytest.raises(CheckpointError, match=r"does not use"):
        save_checkpoint(tmp_path / "c", args, {**state, "extra.weight": torch.ones(3)})
    assert list(tmp_path.iterdir()) == []


# -- bad input: each one error that names the file or value -----------------------------------------------------------
def test_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(CheckpointNotFoundError, match=r"neither a directory .* nor a preset"):
        load_model(tmp_path / "nope")
    with pytest.raises(FileNotFoundError):  # also an OSError and a ValueError: the CLI prints it as one line
        load_model(str(tmp_path / "nope"))
    assert issubclass(CheckpointError, ValueError) and issubclass(CheckpointNotFoundError, OSError)


def test_unknown_dtype(tiny_checkpoint: Path) -> None:
    with pytest.raises(CheckpointError, match=r"unsupported dtype 'int8'"):
        load_model(tiny_checkpoint, dtype="int8")


def test_missing_config(write_checkpoint: WriteCheckpoint) -> None:
    path = write_checkpoint()
    (path / "config.json").unlink()
    with pytest.raises(CheckpointNotFoundError, match=r"config.json is missing"):
        load_model(path)


def test_invalid_json(write_checkpoint: WriteCheckpoint) -> None:
    path = write_checkpoint()
    (path / "config.json").write_text('{"model_type": "qwen2",\n  oops}')
    with pytest.raises(CheckpointError, match=r"config.json is not valid JSON: .* line 2"):
        load_model(path)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"model_type": "gpt2"}, "unsupported architecture model_type='gpt2'"),
        ({"hidden_act": "gelu"}, "hidden_act='gelu' is not supported"),
        ({"use_sliding_window": True}, "sliding-window"),
        ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, "rope scaling 'yarn' is not supported"),
        ({"num_hidden_layers": None}, "lacks the field 'num_hidden_layers'"),
    ],
)
def test_unsupported_config(write_checkpoint: WriteCheckpoint, change: dict[str, Any], message: str) -> None:
    path = write_checkpoint()
    edit_json(path / "config.json", **change)
    with pytest.raises(CheckpointError, match=message) as e:
        load_model(path)
    assert "config.json" in str(e.value)


def test_missing_weights(write_checkpoint: WriteCheckpoint) -> None:
    path = write_checkpoint()
    (path / "model.safetensors").unlink()
    with pytest.raises(CheckpointNotFoundError, match=r"has no model.safetensors and no model.safetensors.index.json"):
        load_model(path)


def test_missing_shard(write_checkpoint: WriteCheckpoint) -> None:
    path = write_checkpoint(max_shard_bytes=40_000)
    shard = sorted(path.glob("model-*.safetensors"))[1]
    shard.unlink()
    with pytest.raises(CheckpointNotFoundError, match=f"{shard.name} is missing"):
        load_model(path)


@pytest.mark.parametrize("keep", [0, 7, 100, -200])
def test_truncated_safetensors(write_checkpoint: WriteCheckpoint, keep: int) -> None:
    path = write_checkpoint()
    file = path / "model.safetensors"
    data = file.read_bytes()
    file.write_bytes(data[:keep])
    with pytest.raises(CheckpointError, match=r"model.safetensors is not a readable safetensors file"):
        load_model(path)


def test_shapes_that_do_not_match_the_config(write_checkpoint: WriteCheckpoint) -> None:
    path = write_checkpoint(intermediate_size=96)
    edit_json(path / "config.json", intermediate_size=128)
    with pytest.raises(
        CheckpointError,
        match=r"model.safetensors: tensor 'model.layers.0.mlp.*' has shape \(.*96.*\), but config.json implies",
    ):
        load_model(path)


def test_missing_tensors(write_checkpoint: WriteCheckpoint) -> None:
    path = write_checkpoint(tie_embeddings=False)
    edit_json(path / "config.json", num_hidden_layers=3)
    with pytest.raises(CheckpointError, match=r"lacks \d+ tensors the config implies, e.g. 'model.layers.2"):
        load_model(path)


def test_untied_config_over_tied_weights(write_checkpoint: WriteCheckpoint) -> None:
    path = write_checkpoint(tie_embeddings=True)
    edit_json(path / "config.json", tie_word_embeddings=False)
    with pytest.raises(CheckpointError, match=r"'lm_head.weight'"):
        load_model(path)


def test_unexpected_and_non_float_tensors(
    tmp_path: Path, tiny_args: Callable[..., ModelArgs], random_state: Any, bpe_tokenizer: Tokenizer
) -> None:
    args = tiny_args()
    path = save_checkpoint(tmp_path / "m", args, random_state(args), tokenizer_json=bpe_tokenizer.to_str())
    state = random_state(args)
    save_file({**state, "model.vision_tower.weight": torch.ones(2)}, str(path / "model.safetensors"))
    with pytest.raises(CheckpointError, match=r"unexpected tensor 'model.vision_tower.weight'"):
        load_model(path)
    save_file({**state, "model.norm.weight": torch.ones(64, dtype=torch.int8)}, str(path / "model.safetensors"))
    with pytest.raises(CheckpointError, match=r"'model.norm.weight' is I8; .*quantized"):
        load_model(path)


def test_missing_tokenizer(write_checkpoint: WriteCheckpoint) -> None:
    path = write_checkpoint(with_tokenizer=False)
    with pytest.raises(CheckpointNotFoundError, match=r"tokenizer.json is missing"):
        load_model(path)
    (path / "tokenizer.model").write_bytes(b"sentencepiece")
    with pytest.raises(CheckpointNotFoundError, match=r"it has tokenizer.model, which waferline does not read"):
        load_model(path)


def test_tokenizer_larger_than_the_vocabulary(write_checkpoint: WriteCheckpoint) -> None:
    path = write_checkpoint()
    edit_json(path / "config.json", vocab_size=100)
    with pytest.raises(CheckpointError, match=r"tokenizer.json has 420 tokens but config.json's vocab_size is 100"):
        load_model(path)


def test_broken_tokenizer_and_special_tokens(write_checkpoint: WriteCheckpoint) -> None:
    path = write_checkpoint()
    (path / "tokenizer.json").write_text('{"version": "1.0"}')
    with pytest.raises(CheckpointError, match=r"tokenizer.json is not a valid tokenizers JSON file"):
        load_model(path)
    path = write_checkpoint("b")
    edit_json(path / "generation_config.json", eos_token_id=[0, 9999])
    with pytest.raises(CheckpointError, match=r"generation_config.json: eos_token_id=9999 is not a token id below 512"):
        load_model(path)
    path = write_checkpoint("c")
    edit_json(path / "tokenizer_config.json", eos_token={"content": "</s>"})
    with pytest.raises(CheckpointError, match=r"tokenizer_config.json: eos_token '</s>' is not in tokenizer.json"):
        load_model(path)


class Detonator:
    """Unpickling this object writes a file: proof that a loader ran code from the checkpoint."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.write_text, (self.marker, "pwned"))


@pytest.mark.parametrize("name", ["pytorch_model.bin", "model.pt", "consolidated.00.pth"])
def test_pickle_weights_are_refused_unopened(write_checkpoint: WriteCheckpoint, tmp_path: Path, name: str) -> None:
    path = write_checkpoint(with_tokenizer=True)
    (path / "model.safetensors").unlink()
    marker = tmp_path / "marker"
    (path / name).write_bytes(pickle.dumps(Detonator(marker)))
    with pytest.raises(CheckpointError, match=f"refusing to load .*{name}: pickle weights .* can run arbitrary code"):
        load_model(path)
    with pytest.raises(CheckpointError, match=r"pickle"):
        load_model(path / name)
    assert not marker.exists()


def test_pickle_next_to_safetensors_is_ignored(write_checkpoint: WriteCheckpoint, tmp_path: Path) -> None:
    path = write_checkpoint()
    marker = tmp_path / "marker"
    (path / "pytorch_model.bin").write_bytes(pickle.dumps(Detonator(marker)))
    load_model(path)
    assert not marker.exists()
