"""Hugging Face model directories in and out: config.json, safetensors weights, tokenizer and special tokens.

`load_model` takes a directory (or a preset name, for random weights) and returns a ready `LoadedModel`. It checks
everything it can from the small files and the safetensors headers before it allocates a weight, then streams the
tensors one at a time from the memory-mapped files into `Transformer.load`, so the weights never sit in memory twice.
engine/loader.py is what the server and the tools call: it picks the weight format and places the weights once.
Pickle weights (*.bin, *.pt, *.pth) are refused: unpickling runs whatever code the file names.

A GGUF file (`--model FILE.gguf`) is handed to engine/gguf/read.py; `save_checkpoint` (engine/checkpoint_save.py)
writes directories.
Every problem a user can fix raises `CheckpointError` (a ValueError) naming the file or value. The safetensors side
(finding, checking, streaming and writing the weight files) lives in engine/weights.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError

from waferline.engine.fim import FimTemplate, fim_template
from waferline.engine.hf import args_from_hf_config, from_hf, iter_random
from waferline.engine.model import ATTENTION_BIAS_TYPES, MODEL_TYPES, PRESETS, ModelArgs, Transformer
from waferline.engine.tokenizer import SpecialTokens, Tokenizer, byte_fallback_tokenizer, check_prompt_fits
from waferline.engine.weights import (
    INDEX_FILE,
    PICKLE_SUFFIXES,
    SINGLE_FILE,
    CheckpointError,
    CheckpointNotFoundError,
    check_tensors,
    pickle_refusal,
    read_json,
    stream_tensors,
    weight_shards,
)
from waferline.hardware import Device, open_device

__all__ = [
    "DEFAULT_MODEL_DIR",
    "INDEX_FILE",
    "SINGLE_FILE",
    "CheckpointError",
    "CheckpointNotFoundError",
    "LoadedModel",
    "load_model",
    "resolve_model",
]

MODELS_DIR = Path(__file__).resolve().parent / "models"
DEFAULT_MODEL_DIR = MODELS_DIR / "waferline-mini"  # the model the repository ships (when it has been trained)

DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
_DTYPE_ALIASES = {"fp32": "float32", "f32": "float32", "bf16": "bfloat16", "fp16": "float16", "f16": "float16"}


@dataclass
class LoadedModel:
    """A model ready to run: its shape, its placed weights, its tokenizer and the ids generation needs."""

    name: str  # the preset name or the directory's name
    args: ModelArgs
    model: Transformer
    tokenizer: Tokenizer
    special: SpecialTokens
    fim: FimTemplate | None  # None when the tokenizer has no fill-in-the-middle tokens
    dtype: torch.dtype
    backend: str
    path: Path | None = None  # None for a preset (random weights)

    @property
    def context_tokens(self) -> int:
        return self.args.max_seq_len

    def check_prompt(self, prompt_tokens: int, new_tokens: int = 0) -> None:
        """Raise PromptTooLongError unless the prompt and the tokens asked for fit the context."""
        check_prompt_fits(prompt_tokens, self.context_tokens, new_tokens=new_tokens)


def parse_dtype(dtype: str | torch.dtype) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        if dtype not in DTYPES.values():
            raise CheckpointError(f"unsupported dtype {dtype}; choose float32, bfloat16 or float16")
        return dtype
    name = _DTYPE_ALIASES.get(dtype, dtype)
    if name not in DTYPES:
        raise CheckpointError(f"unsupported dtype {dtype!r}; choose float32, bfloat16 or float16")
    return DTYPES[name]


def resolve_model(name_or_path: str | Path | None) -> str | Path:
    """What a --model value names: a directory (as a Path) or a preset name (as a str).

    None means the shipped default model, or the `tiny` preset on a checkout that does not have it yet. A name of a
    shipped model (engine/models/NAME) also works. An existing path wins over a preset of the same name.
    """
    if name_or_path is None:
        return DEFAULT_MODEL_DIR if (DEFAULT_MODEL_DIR / "config.json").is_file() else "tiny"
    path = Path(name_or_path).expanduser()
    if path.exists():
        return path
    text = str(name_or_path)
    if text in PRESETS:
        return text
    if (MODELS_DIR / text / "config.json").is_file():
        return MODELS_DIR / text
    raise CheckpointNotFoundError(
        f"model {text!r} is neither a directory (no such path) nor a preset ({', '.join(PRESETS)})"
    )


def load_model(
    name_or_path: str | Path | None = None,
    *,
    backend: str = "cpu",
    dtype: str | torch.dtype = "float32",
    seed: int = 0,
    device: Device | None = None,
) -> LoadedModel:
    """Load a Hugging Face directory, or build a preset with random weights (seeded), onto `backend` computing in
    `dtype`, or onto `device` when given (opened for a weight format by engine/loader.py; `backend` and `dtype` are
    then its own)."""
    target = resolve_model(name_or_path)
    if device is None:
        device = open_device(backend, dtype=parse_dtype(dtype))
    if isinstance(target, str):
        return _load_preset(target, device, seed=seed)
    return _load_directory(target, device)


def _load_preset(name: str, device: Device, *, seed: int) -> LoadedModel:
    args = ModelArgs.from_name(name)
    tokenizer = preset_tokenizer(args.vocab_size)
    model = Transformer(args, device)
    model.load(from_hf(args, iter_random(args, seed=seed)))
    return LoadedModel(
        name=name,
        args=args,
        model=model,
        tokenizer=tokenizer,
        special=SpecialTokens.for_waferline(tokenizer),
        fim=FimTemplate.for_family("waferline", tokenizer),
        dtype=device.dtype,
        backend=device.name,
    )


def preset_tokenizer(vocab_size: int) -> Tokenizer:
    """The shipped model's tokenizer when it fits the vocabulary, else a byte-level one built in memory."""
    shipped = DEFAULT_MODEL_DIR / "tokenizer.json"
    if shipped.is_file():
        tokenizer = Tokenizer.from_file(shipped)
        if tokenizer.vocab_size <= vocab_size:
            return tokenizer
    return byte_fallback_tokenizer(vocab_size)


def _load_directory(path: Path, device: Device) -> LoadedModel:
    if (gguf := _gguf_file(path)) is not None:
        from waferline.engine.gguf.read import load_gguf  # here, not above: it imports this module

        return load_gguf(gguf, device)
    if path.is_file():
        if path.suffix in PICKLE_SUFFIXES:
            raise CheckpointError(pickle_refusal([path]))
        raise CheckpointError(
            f"{path} is a file; point --model at a model directory (the one with config.json) or a .gguf file"
        )
    cfg = read_json(path / "config.json")
    args = args_from_config(cfg, path / "config.json")
    tokenizer, tokenizer_config = load_tokenizer(path, args)
    special = special_tokens_from_files(path, tokenizer, args, cfg, tokenizer_config)
    shards = weight_shards(path)
    check_tensors(args, shards)
    model = Transformer(args, device)
    try:
        model.load(from_hf(args, stream_tensors(shards)))
    except SafetensorError as e:
        raise CheckpointError(f"cannot read the weights in {path}: {e}") from None
    return LoadedModel(
        name=path.resolve().name,
        args=args,
        model=model,
        tokenizer=tokenizer,
        special=special,
        fim=fim_template(tokenizer, tokenizer_config),
        dtype=device.dtype,
        backend=device.name,
        path=path,
    )


def _gguf_file(path: Path) -> Path | None:
    """The GGUF file `path` names: the file itself, or the only .gguf of a directory without config.json."""
    if path.suffix == ".gguf":
        return path
    if path.is_dir() and not (path / "config.json").exists():
        found = list(path.glob("*.gguf"))
        return found[0] if len(found) == 1 else None
    return None


# -- the small files ---------------------------------------------------------------------------------------------------
def args_from_config(cfg: Mapping[str, Any], path: Path | str = "config.json") -> ModelArgs:
    """ModelArgs from config.json, refusing what the decoder does not implement rather than running it wrong."""
    model_type = cfg.get("model_type")
    if model_type not in MODEL_TYPES:
        raise CheckpointError(
            f"{path}: unsupported architecture model_type={model_type!r} (architectures {cfg.get('architectures')}); "
            f"waferline runs {', '.join(MODEL_TYPES)} (Llama, CodeLlama, DeepSeek-Coder, Qwen2, "
            f"Qwen2.5-Coder, Qwen3)"
        )
    unsupported = {
        "hidden_act": (cfg.get("hidden_act", "silu") != "silu", "only silu (SwiGLU) is implemented"),
        "mlp_bias": (bool(cfg.get("mlp_bias")), "MLP biases are not implemented"),
        "attention_bias": (
            model_type in ATTENTION_BIAS_TYPES and bool(cfg.get("attention_bias")),
            f"a {model_type} with attention_bias also has an o_proj bias, which is not implemented",
        ),
        "use_sliding_window": (bool(cfg.get("use_sliding_window")), "sliding-window attention is not implemented"),
        "layer_types": (
            any(t != "full_attention" for t in cfg.get("layer_types") or []),
            "only full attention is implemented",
        ),
        "quantization_config": ("quantization_config" in cfg, "quantized checkpoints are not supported"),
    }
    for key, (bad, why) in unsupported.items():
        if bad:
            raise CheckpointError(f"{path}: {key}={cfg.get(key)!r} is not supported: {why}")
    cfg = dict(cfg)
    scaling = dict(cfg.get("rope_scaling") or cfg.get("rope_parameters") or {})  # rope_parameters: transformers 5
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind not in ("default", "linear", "llama3"):
        raise CheckpointError(
            f"{path}: rope scaling {kind!r} is not supported (waferline runs none, 'linear' and 'llama3')"
        )
    if kind == "llama3":
        scaling.setdefault("original_max_position_embeddings", cfg.get("max_position_embeddings", 8192))
        cfg["rope_scaling"] = scaling
    try:
        return args_from_hf_config(cfg)
    except (ValueError, AssertionError, TypeError) as e:
        raise CheckpointError(f"{path}: {e}") from None


def load_tokenizer(path: Path, args: ModelArgs) -> tuple[Tokenizer, dict[str, Any]]:
    """tokenizer.json (required) and tokenizer_config.json (optional) from a model directory."""
    file = path / "tokenizer.json"
    if not file.is_file():
        others = [n for n in ("tokenizer.model", "vocab.json", "merges.txt") if (path / n).is_file()]
        hint = (
            f"; it has {', '.join(others)}, which waferline does not read: write tokenizer.json with transformers "
            f"(AutoTokenizer.from_pretrained(dir).save_pretrained(dir))"
            if others
            else ""
        )
        raise CheckpointNotFoundError(f"{file} is missing: waferline needs the tokenizer in tokenizers' JSON{hint}")
    try:
        tokenizer = Tokenizer.from_file(file)
    except Exception as e:  # the tokenizers library raises a bare Exception for a malformed file
        raise CheckpointError(f"{file} is not a valid tokenizers JSON file: {e}") from None
    if tokenizer.vocab_size > args.vocab_size:
        raise CheckpointError(
            f"{file} has {tokenizer.vocab_size} tokens but config.json's vocab_size is {args.vocab_size}: "
            f"the tokenizer does not belong to these weights"
        )
    return tokenizer, read_json(path / "tokenizer_config.json", required=False)


def special_tokens_from_files(
    path: Path, tokenizer: Tokenizer, args: ModelArgs, cfg: Mapping[str, Any], tokenizer_config: Mapping[str, Any]
) -> SpecialTokens:
    """BOS, EOS and stop ids from generation_config.json, config.json and tokenizer_config.json's token strings.

    Every eos id any of them names stops generation (eos_token_id may be one id or a list); the first is `eos_id`.
    BOS comes from the first file that names it; `add_bos` from tokenizer_config.json's add_bos_token, or, without
    that flag, from whether the tokenizer's post-processor prepends BOS (Llama 3 does).
    """
    gen = read_json(path / "generation_config.json", required=False)
    sources = (("generation_config.json", gen), ("config.json", cfg))

    def ids(key: str) -> list[int]:
        out: list[int] = []
        for fname, d in sources:
            value = d.get(key)
            for v in value if isinstance(value, list) else [value]:
                if v is None:
                    continue
                if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < args.vocab_size:
                    raise CheckpointError(f"{path / fname}: {key}={v!r} is not a token id below {args.vocab_size}")
                out.append(v)
        return out

    def named(key: str) -> int | None:
        value = tokenizer_config.get(key)
        text = value.get("content") if isinstance(value, dict) else value
        if not text:
            return None
        i = tokenizer.token_to_id(str(text))
        if i is None:
            raise CheckpointError(f"{path / 'tokenizer_config.json'}: {key} {text!r} is not in tokenizer.json")
        return i

    stops = list(dict.fromkeys([*ids("eos_token_id"), *[i for i in [named("eos_token")] if i is not None]]))
    bos = next(iter(ids("bos_token_id")), None)
    if bos is None:
        bos = named("bos_token")
    if "add_bos_token" in tokenizer_config:
        add_bos = bool(tokenizer_config["add_bos_token"]) and bos is not None
    else:  # no flag: a tokenizer whose post-processor prepends BOS (Llama 3) wants it
        probe = tokenizer.encode("a", add_special_tokens=True)
        add_bos = bos is not None and bool(probe) and probe[0] == bos
    pad = next(iter(ids("pad_token_id")), None)
    return SpecialTokens(
        bos_id=bos,
        eos_id=stops[0] if stops else None,
        stop_ids=tuple(stops),
        pad_id=pad if pad is not None else named("pad_token"),
        add_bos=add_bos,
    )
