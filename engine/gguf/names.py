"""What GGUF reading and writing share: tensor names, architectures, the pre-tokenizers exported, the Q/K layout.

GGUF names a tensor `blk.{i}.attn_q.weight` where Hugging Face names it `model.layers.{i}.self_attn.q_proj.weight`.
llama.cpp runs a "llama" architecture's rotary embedding on interleaved pairs of each head's dimensions, where
Hugging Face checkpoints rotate the two halves of each head, so llama.cpp's converter reorders the rows of the q
and k projections (and `to_gguf_rows`/`from_gguf_rows` here do the same and its inverse). A "qwen2" or "qwen3" file
keeps the Hugging Face order: llama.cpp rotates halves for those architectures.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch import Tensor

from waferline.engine.model import ModelArgs, rope_frequencies
from waferline.hardware.blocks import BlockWeight, Weight

# model_type (config.json) <-> general.architecture (GGUF)
ARCHITECTURES = {"llama": "llama", "qwen2": "qwen2", "qwen3": "qwen3"}

_TOP = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
}
_LAYER = {
    "input_layernorm.weight": "attn_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.q_norm.weight": "attn_q_norm.weight",  # Qwen3's per-head norms
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}
_LAYER_BACK = {v: k for k, v in _LAYER.items()}
_TOP_BACK = {v: k for k, v in _TOP.items()}
ROPE_FREQS = "rope_freqs.weight"  # llama.cpp's precomputed Llama 3 frequency factors (a 1-D tensor)

# The name the exporter writes as tokenizer.ggml.pre for a tokenizer.json whose pre-tokenizer is one Split by this
# expression (as Hugging Face spells it) then ByteLevel; what a reader does with a name is in pretokenizers.py.
EXPORT_PRE_TOKENIZERS = {
    "qwen2": (
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
        r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
    ),
    "llama-bpe": (
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
        r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
    ),
    "gpt-2": r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+",
}


def gguf_name(hf_name: str) -> str:
    """The GGUF name of a Hugging Face tensor name (KeyError for one GGUF has no name for)."""
    if hf_name in _TOP:
        return _TOP[hf_name]
    parts = hf_name.split(".", 3)  # model, layers, i, leaf
    if len(parts) == 4 and parts[:2] == ["model", "layers"] and parts[3] in _LAYER:
        return f"blk.{parts[2]}.{_LAYER[parts[3]]}"
    raise KeyError(hf_name)


def hf_name(gguf_tensor: str) -> str | None:
    """The Hugging Face name of a GGUF tensor name; None for one the decoder has no use for."""
    if gguf_tensor in _TOP_BACK:
        return _TOP_BACK[gguf_tensor]
    parts = gguf_tensor.split(".", 2)  # blk, i, leaf
    if len(parts) == 3 and parts[0] == "blk" and parts[1].isdigit() and parts[2] in _LAYER_BACK:
        return f"model.layers.{parts[1]}.{_LAYER_BACK[parts[2]]}"
    return None


def _heads_of(args: ModelArgs, hf: str) -> int | None:
    """How many heads a q or k projection (weight or bias) holds; None for any other tensor."""
    if ".self_attn.q_proj." in hf:
        return args.n_heads
    if ".self_attn.k_proj." in hf:
        return args.n_kv_heads
    return None


def to_gguf_rows(args: ModelArgs, hf: str, t: Tensor) -> Tensor:
    """A Hugging Face tensor's rows in the order a GGUF file of `args`' architecture holds them."""
    heads = _heads_of(args, hf)
    if args.model_type != "llama" or heads is None:
        return t
    # per head: rows [first half | second half] -> pairs (h0, h_half), (h1, h_half+1), ...
    return t.reshape(heads, 2, t.shape[0] // heads // 2, *t.shape[1:]).transpose(1, 2).reshape(t.shape)


def from_gguf_rows(args: ModelArgs, hf: str, t: Weight) -> Weight:
    """The inverse of `to_gguf_rows`: a GGUF tensor's rows back in Hugging Face order (a matrix in GGUF blocks: its
    rows' bytes moved, whole rows being whole blocks)."""
    heads = _heads_of(args, hf)
    if args.model_type != "llama" or heads is None:
        return t
    if isinstance(t, BlockWeight):
        # the rows' bytes moved by numpy, as BlockWeight's are at load (hardware/blocks.py)
        return t.with_rows(torch.from_numpy(_unpermute(t.rows().numpy(), heads)))
    return _unpermute(t, heads)


def _unpermute(t: Any, heads: int) -> Any:
    """A tensor's or a numpy array's rows from llama.cpp's rotary order back to Hugging Face's."""
    return t.reshape(heads, t.shape[0] // heads // 2, 2, *t.shape[1:]).swapaxes(1, 2).reshape(t.shape)


def llama3_freq_factors(args: ModelArgs) -> Tensor:
    """The per-frequency divisors Llama 3's rope scaling applies, as llama.cpp stores them in `rope_freqs.weight`."""
    unscaled = dataclasses.replace(args, rope_scaling=None)
    return (rope_frequencies(unscaled) / rope_frequencies(args)).float()
