"""Writing a Hugging Face model directory that both waferline and `transformers.AutoModelForCausalLM` load,
atomically: config.json, safetensors weights (engine/weights.py), generation_config.json and, given a tokenizer,
tokenizer.json and tokenizer_config.json. engine/checkpoint.py reads such directories.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from waferline.engine.checkpoint import parse_dtype
from waferline.engine.hf import hf_config
from waferline.engine.model import ATTENTION_BIAS_TYPES, ModelArgs
from waferline.engine.tokenizer import Tokenizer
from waferline.engine.weights import CheckpointError, checked_state_dict, write_json, write_weights


def save_checkpoint(
    directory: str | Path,
    args: ModelArgs,
    state_dict: Mapping[str, Tensor],
    *,
    tokenizer_json: str | None = None,
    tokenizer_config: Mapping[str, Any] | None = None,
    generation_config: Mapping[str, Any] | None = None,
    fim_template: str | None = None,
    dtype: str | torch.dtype | None = None,
    max_shard_bytes: int | None = None,
    overwrite: bool = False,
) -> Path:
    """Write a Hugging Face model directory that waferline and transformers both load.

    state_dict uses Hugging Face names (as `init_random` returns). Without a tokenizer the directory holds weights
    only (transformers loads it; waferline asks for tokenizer.json). With one, EOS is <|endoftext|> when the
    tokenizer has it. `fim_template` is recorded in tokenizer_config.json ("waferline" for the project's own models).
    `max_shard_bytes` splits the weights into model-0000i-of-0000n.safetensors files with an index. The directory
    appears complete or not at all: everything is written to a temporary sibling that is renamed into place.
    """
    directory = Path(directory)
    if directory.exists() and not overwrite and (not directory.is_dir() or any(directory.iterdir())):
        raise CheckpointError(f"{directory} already exists and is not empty (pass overwrite=True to replace it)")
    if args.model_type in ATTENTION_BIAS_TYPES and args.qkv_bias:
        raise CheckpointError(
            f"a {args.model_type} config cannot express q/k/v biases without an o_proj bias; use qwen2"
        )
    tensors = checked_state_dict(args, state_dict, None if dtype is None else parse_dtype(dtype))
    saved_dtype = next(iter(tensors.values())).dtype

    cfg = {**hf_config(args), "torch_dtype": str(saved_dtype).removeprefix("torch."), "use_cache": True}
    tokenizer = Tokenizer.from_str(tokenizer_json) if tokenizer_json is not None else None
    gen: dict[str, Any] = {}
    tok_cfg: dict[str, Any] = {}
    if tokenizer is not None:
        if tokenizer.vocab_size > args.vocab_size:
            raise CheckpointError(f"the tokenizer has {tokenizer.vocab_size} tokens, more than vocab_size")
        eos = tokenizer.token_to_id("<|endoftext|>")
        if eos is not None:
            # <|file_sep|> starts another file: a generation of this one ends there too
            stops = [i for i in (eos, tokenizer.token_to_id("<|file_sep|>")) if i is not None]
            cfg["eos_token_id"] = eos
            gen["eos_token_id"] = stops if len(stops) > 1 else eos
        tok_cfg = {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "eos_token": "<|endoftext|>" if eos is not None else None,
            "bos_token": None,
            "add_bos_token": False,
            "add_eos_token": False,
            "model_max_length": args.max_seq_len,
            "clean_up_tokenization_spaces": False,
        }
        if fim_template is not None:
            tok_cfg["fim_template"] = fim_template
        if tokenizer.token_to_id("<|fim_pad|>") is not None:
            tok_cfg["pad_token"] = "<|fim_pad|>"
    gen.update(generation_config or {})
    tok_cfg.update(tokenizer_config or {})

    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", suffix=".partial", dir=directory.parent))
    try:
        os.chmod(tmp, 0o755)
        write_weights(tmp, tensors, max_shard_bytes)
        write_json(tmp / "config.json", cfg)
        write_json(tmp / "generation_config.json", gen)
        if tokenizer_json is not None:
            (tmp / "tokenizer.json").write_text(tokenizer_json, encoding="utf-8")
            write_json(tmp / "tokenizer_config.json", tok_cfg)
        if directory.exists():
            old = directory.with_name(f".{directory.name}.{os.getpid()}.old")
            directory.rename(old)
            tmp.rename(directory)
            if old.is_dir():
                shutil.rmtree(old)
            else:
                old.unlink()
        else:
            tmp.rename(directory)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return directory
