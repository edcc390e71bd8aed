"""The Hugging Face layout of a Llama/Qwen2/Qwen3 checkpoint, mapped to and from the engine's model (engine/model.py).

config.json's fields to `ModelArgs` and back; the tensor names and shapes a checkpoint of a config holds; those
tensors turned into the ones the model places (`from_hf`: renamed, with q/k/v and gate/up fused per layer); and
seeded random weights in Hugging Face naming, for presets, benchmarks and tests. The model itself knows none of
this, as gpt-fast's model.py knows nothing of the checkpoints its conversion script reads.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import torch
from torch import Tensor

from waferline.engine.model import ATTENTION_BIAS_TYPES, MODEL_TYPES, ModelArgs
from waferline.hardware.blocks import BlockWeight, Weight, dense

# model_type -> config's architectures
ARCHITECTURES = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM"}
assert set(ARCHITECTURES) == set(MODEL_TYPES), "every model type the decoder runs has its Hugging Face class"


# -- config.json ---------------------------------------------------------------------------------------------------
def args_from_hf_config(cfg: Mapping[str, Any]) -> ModelArgs:
    """ModelArgs from config.json's fields (checkpoint.args_from_config refuses what the decoder does not run)."""
    model_type = cfg.get("model_type")
    if model_type not in ARCHITECTURES:
        raise ValueError(
            f"unsupported architecture: model_type {model_type!r} (architectures {cfg.get('architectures')}); "
            f"waferline runs {', '.join(MODEL_TYPES)}"
        )
    rope = cfg.get("rope_parameters") or {}  # transformers >= 5 writes rope_theta and any scaling here
    try:
        n_heads = int(cfg["num_attention_heads"])
        return ModelArgs(
            model_type=model_type,
            vocab_size=int(cfg["vocab_size"]),
            dim=int(cfg["hidden_size"]),
            n_layers=int(cfg["num_hidden_layers"]),
            n_heads=n_heads,
            n_kv_heads=int(cfg.get("num_key_value_heads") or n_heads),
            intermediate_size=int(cfg["intermediate_size"]),
            max_seq_len=int(cfg.get("max_position_embeddings", 2048)),
            rope_theta=float(cfg.get("rope_theta") or rope.get("rope_theta", 10000.0)),
            rope_scaling=cfg.get("rope_scaling") or (rope if rope.get("rope_type", "default") != "default" else None),
            norm_eps=float(cfg.get("rms_norm_eps", 1e-6)),
            qkv_bias=bool(cfg.get("attention_bias", model_type == "qwen2")),
            tie_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            head_dim=int(cfg.get("head_dim") or 0),
        )
    except KeyError as e:
        raise ValueError(f"config.json lacks the field {e.args[0]!r}") from None


def hf_config(args: ModelArgs) -> dict[str, Any]:
    """config.json's fields for `args` (transformers' names)."""
    cfg: dict[str, Any] = {
        "architectures": [ARCHITECTURES[args.model_type]],
        "model_type": args.model_type,
        "vocab_size": args.vocab_size,
        "hidden_size": args.dim,
        "num_hidden_layers": args.n_layers,
        "num_attention_heads": args.n_heads,
        "num_key_value_heads": args.n_kv_heads,
        "intermediate_size": args.intermediate_size,
        "max_position_embeddings": args.max_seq_len,
        "rope_theta": args.rope_theta,
        "rope_scaling": args.rope_scaling,
        "rms_norm_eps": args.norm_eps,
        "tie_word_embeddings": args.tie_embeddings,
        "hidden_act": "silu",
        "head_dim": args.head_dim,
    }
    if args.model_type in ATTENTION_BIAS_TYPES:
        cfg["attention_bias"] = args.qkv_bias
    if args.model_type == "llama":
        cfg["mlp_bias"] = False
    return cfg


# -- tensor names and shapes ---------------------------------------------------------------------------------------
def hf_weight_names(args: ModelArgs) -> Iterator[str]:
    """Every tensor name a checkpoint of this shape holds, in Hugging Face naming."""
    yield "model.embed_tokens.weight"
    for i in range(args.n_layers):
        p = f"model.layers.{i}."
        yield from (p + "input_layernorm.weight", p + "post_attention_layernorm.weight")
        for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
            yield f"{p}self_attn.{proj}.weight"
        if args.qkv_bias:
            yield from (f"{p}self_attn.{proj}.bias" for proj in ("q_proj", "k_proj", "v_proj"))
        if args.qk_norm:
            yield from (p + "self_attn.q_norm.weight", p + "self_attn.k_norm.weight")
        for proj in ("gate_proj", "up_proj", "down_proj"):
            yield f"{p}mlp.{proj}.weight"
    yield "model.norm.weight"
    if not args.tie_embeddings:
        yield "lm_head.weight"


def hf_weight_shape(args: ModelArgs, name: str) -> tuple[int, ...]:
    """The shape the config implies for one Hugging Face tensor name."""
    d, h, inter = args.dim, args.head_dim, args.intermediate_size
    q, kv = args.n_heads * h, args.n_kv_heads * h
    leaf = name.rsplit(".", 2)[-2] if name.endswith((".weight", ".bias")) else name
    if name in ("model.embed_tokens.weight", "lm_head.weight"):
        return (args.vocab_size, d)
    if name.endswith(("self_attn.q_norm.weight", "self_attn.k_norm.weight")):
        return (h,)  # one head's width: each head is normalised on its own
    if name.endswith("norm.weight"):
        return (d,)
    out_in = {
        "q_proj": (q, d), "k_proj": (kv, d), "v_proj": (kv, d), "o_proj": (d, q),
        "gate_proj": (inter, d), "up_proj": (inter, d), "down_proj": (d, inter),
    }  # fmt: skip
    if leaf in out_in:
        return out_in[leaf][:1] if name.endswith(".bias") else out_in[leaf]
    raise KeyError(name)


def ignorable_tensor(args: ModelArgs, name: str) -> bool:
    """Tensors some checkpoints carry that the decoder does not need (a tied head stored anyway, rope buffers)."""
    return (name == "lm_head.weight" and args.tie_embeddings) or name.endswith("rotary_emb.inv_freq")


# -- Hugging Face tensors -> the model's ---------------------------------------------------------------------------
_LAYER_SIMPLE = {
    "input_layernorm.weight": "attn_norm",
    "post_attention_layernorm.weight": "mlp_norm",
    "self_attn.o_proj.weight": "o",
    "mlp.down_proj.weight": "down",
    "self_attn.q_norm.weight": "q_norm",
    "self_attn.k_norm.weight": "k_norm",
}
_LAYER_FUSED = {
    "qkv": [f"self_attn.{x}_proj.weight" for x in "qkv"],
    "qkv_bias": [f"self_attn.{x}_proj.bias" for x in "qkv"],
    "gate_up": ["mlp.gate_proj.weight", "mlp.up_proj.weight"],
}


def cat(parts: list[Weight]) -> Weight:
    """Rows of `parts` one after another: torch.cat, or for GGUF blocks (every part in blocks) their bytes'."""
    blocks = [p for p in parts if isinstance(p, BlockWeight)]
    if len(blocks) == len(parts):
        return BlockWeight.cat(blocks)
    return torch.cat([dense(p) for p in parts])


def from_hf(args: ModelArgs, tensors: Iterable[tuple[str, Weight]]) -> Iterator[tuple[str, Weight]]:
    """Checkpoint tensors (Hugging Face names, any order) as the tensors `Transformer.load` places, by its names.

    Tensors are consumed as they come, so a streamed checkpoint never needs to sit in memory twice: a layer's
    q, k, v (and gate, up) wait only until their siblings arrive, then go on concatenated. Names and shapes are
    checked against the config; ValueError for an unexpected, misshapen or missing tensor.
    """
    expected = set(hf_weight_names(args))
    seen: set[str] = set()
    pending: dict[int, dict[str, Weight]] = {}
    top = {"model.embed_tokens.weight": "embedding", "lm_head.weight": "lm_head", "model.norm.weight": "norm"}
    for name, t in tensors:
        if name not in expected:
            if ignorable_tensor(args, name):
                continue
            raise ValueError(f"unexpected tensor {name!r} for a {args.model_type} model of this config")
        want = hf_weight_shape(args, name)
        if tuple(t.shape) != want:
            raise ValueError(f"tensor {name!r} has shape {tuple(t.shape)}, but config.json implies {want}")
        seen.add(name)
        if name in top:
            yield top[name], t
            continue
        i = int(name.split(".")[2])
        parts = pending.setdefault(i, {})
        parts[name.split(".", 3)[3]] = t  # e.g. self_attn.q_proj.weight
        p = f"layers.{i}."
        for leaf, key in _LAYER_SIMPLE.items():
            if leaf in parts:
                yield p + key, parts.pop(leaf)
        for key, leaves in _LAYER_FUSED.items():
            if all(leaf in parts for leaf in leaves):
                yield p + key, cat([parts.pop(leaf) for leaf in leaves])
    missing = expected - seen
    if missing:
        raise ValueError(f"checkpoint lacks {len(missing)} tensors, for example {sorted(missing)[0]!r}")


# -- random weights ------------------------------------------------------------------------------------------------
def iter_random(args: ModelArgs, seed: int = 0, dtype: torch.dtype = torch.float32) -> Iterator[tuple[str, Tensor]]:
    """Random weights in Hugging Face naming (std 0.02, norms at 1), made one tensor at a time as they are consumed,
    so that `Transformer.load(from_hf(args, iter_random(args)))` never holds a large preset twice."""
    g = torch.Generator().manual_seed(seed)
    for name in hf_weight_names(args):
        shape = hf_weight_shape(args, name)
        t = torch.ones(shape) if name.endswith("norm.weight") else torch.randn(shape, generator=g) * 0.02
        yield name, t.to(dtype)


def iter_meta(args: ModelArgs) -> Iterator[tuple[str, Tensor]]:
    """Tensors of the right names and shapes that hold nothing (torch's "meta" device): what the wafer emulator's
    analytic mode places to count a model's cost without its numbers."""
    for name in hf_weight_names(args):
        yield name, torch.empty(hf_weight_shape(args, name), device="meta")


def init_random(args: ModelArgs, seed: int = 0, dtype: torch.dtype = torch.float32) -> dict[str, Tensor]:
    """Random weights in Hugging Face naming (std 0.02, norms at 1): for presets, benchmarks and tests."""
    return dict(iter_random(args, seed, dtype))
