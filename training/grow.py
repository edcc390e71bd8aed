"""Grow a trained model into a larger shape that computes the same function (a warm start for a bigger model).

Training a larger model from random weights on these CPUs never caught up with the shipped one inside a session
(docs/model-card.md). Growing it instead starts the larger model at the smaller one's loss: every new weight either
reads a signal that is zero or writes into a place nothing reads yet, so the first step already predicts what the
shipped model predicts, and training only adds.

- **Width** (residual dim d -> D): the new residual dimensions start at zero. Whatever writes into them (embedding
  columns, o_proj and down_proj rows) starts at zero; whatever reads them (q/k/v, gate/up columns) starts random,
  which keeps the function (it multiplies zeros) and lets gradients reach the zero side at once. RMSNorm divides by
  the root mean square over all D dimensions, so the norm weights are scaled by sqrt(d / D) to keep the output.
- **Heads** (more query heads and kv heads, same head_dim and the same query heads per kv head): the new heads
  come after the old ones, random, with zero o_proj columns.
- **MLP** (intermediate size up): new gate/up rows random, new down_proj columns zero.
- **Depth** (more layers): the old layers keep their order, spread evenly; each new layer is random with zero
  o_proj and down_proj, so it starts as the identity on the residual stream.

`eps` adds noise of that size to the zero sides, for a start that is not exactly the old function (0: exact).
"""

from __future__ import annotations

import math
from dataclasses import replace

import torch
from torch import Tensor

from waferline.engine.model import ModelArgs

SHAPE_FIELDS = ("dim", "n_layers", "n_heads", "n_kv_heads", "intermediate_size")
SAME_FIELDS = ("model_type", "vocab_size", "head_dim", "qkv_bias", "tie_embeddings", "norm_eps", "rope_theta")


class GrowthError(ValueError):
    """The source shape cannot be grown into the destination shape."""


def args_differ(a: ModelArgs, b: ModelArgs) -> bool:
    """Whether two shapes have different weights (max_seq_len only sizes the RoPE tables, so it does not count)."""
    return replace(a, max_seq_len=0) != replace(b, max_seq_len=0)


def check_growable(src: ModelArgs, dst: ModelArgs) -> None:
    """Raise GrowthError unless every weight of `src` fits, unchanged in meaning, into `dst`."""
    for name in SAME_FIELDS:
        if getattr(src, name) != getattr(dst, name):
            raise GrowthError(f"cannot grow: {name} is {getattr(src, name)!r} here, {getattr(dst, name)!r} there")
    if src.rope_scaling != dst.rope_scaling:
        raise GrowthError("cannot grow: the RoPE scaling differs")
    if src.qk_norm:
        raise GrowthError(f"cannot grow {src.model_type} models (per-head q/k norms are not handled)")
    for name in SHAPE_FIELDS:
        if getattr(dst, name) < getattr(src, name):
            raise GrowthError(f"cannot grow: {name} {getattr(src, name)} -> {getattr(dst, name)} shrinks")
    if src.n_heads // src.n_kv_heads != dst.n_heads // dst.n_kv_heads:
        raise GrowthError(
            f"cannot grow: {src.n_heads // src.n_kv_heads} query heads per kv head here, "
            f"{dst.n_heads // dst.n_kv_heads} there (the old heads would see other keys)"
        )


def layer_positions(n_src: int, n_dst: int) -> list[int]:
    """Where each old layer goes among the new ones: evenly spread, order kept (4 -> 8: 0, 2, 4, 6)."""
    return [i * n_dst // n_src for i in range(n_src)]


class _Init:
    def __init__(self, std: float, eps: float, seed: int) -> None:
        self.std, self.eps = std, eps
        self.gen = torch.Generator().manual_seed(seed)

    def random(self, *shape: int) -> Tensor:
        return torch.randn(*shape, generator=self.gen) * self.std

    def zeros(self, *shape: int) -> Tensor:
        if self.eps == 0:
            return torch.zeros(*shape)
        return torch.randn(*shape, generator=self.gen) * self.eps


def _place(big: Tensor, small: Tensor) -> Tensor:
    """`big` with `small` written into its top-left corner."""
    big[tuple(slice(0, n) for n in small.shape)] = small
    return big


def grow_state_dict(
    src: ModelArgs, sd: dict[str, Tensor], dst: ModelArgs, *, eps: float = 0.0, std: float = 0.02, seed: int = 0
) -> dict[str, Tensor]:
    """The weights of a `dst` model (Hugging Face names) that compute what `sd`, a `src` model, computes."""
    check_growable(src, dst)
    init = _Init(std, eps, seed)
    d, D, h = src.dim, dst.dim, src.head_dim
    norm_scale = math.sqrt(d / D)
    out: dict[str, Tensor] = {}

    def norm(w: Tensor) -> Tensor:
        return torch.cat([w.float() * norm_scale, torch.full((D - d,), norm_scale)])

    def reads(w: Tensor, rows: int) -> Tensor:  # (rows, D): old block top-left, everything new random
        return _place(init.random(rows, D), w.float())

    def writes(w: Tensor, cols: int) -> Tensor:  # (D, cols): old block top-left, every other entry (near) zero
        return _place(init.zeros(D, cols), w.float())

    embed = sd["model.embed_tokens.weight"].float()
    out["model.embed_tokens.weight"] = torch.cat([embed, init.zeros(embed.shape[0], D - d)], dim=1)
    out["model.norm.weight"] = norm(sd["model.norm.weight"])
    if not dst.tie_embeddings:
        head = sd["lm_head.weight"].float()
        out["lm_head.weight"] = torch.cat([head, init.random(head.shape[0], D - d)], dim=1)
    q_rows, kv_rows, f = dst.n_heads * h, dst.n_kv_heads * h, dst.intermediate_size
    old_at = dict(zip(layer_positions(src.n_layers, dst.n_layers), range(src.n_layers), strict=True))
    for j in range(dst.n_layers):
        p = f"model.layers.{j}."
        if j not in old_at:  # a new layer: random reads, zero writes, unit-mean norms
            out[p + "input_layernorm.weight"] = torch.ones(D)
            out[p + "post_attention_layernorm.weight"] = torch.ones(D)
            out[p + "self_attn.q_proj.weight"] = init.random(q_rows, D)
            out[p + "self_attn.k_proj.weight"] = init.random(kv_rows, D)
            out[p + "self_attn.v_proj.weight"] = init.random(kv_rows, D)
            if dst.qkv_bias:
                for name, n in (("q", q_rows), ("k", kv_rows), ("v", kv_rows)):
                    out[p + f"self_attn.{name}_proj.bias"] = torch.zeros(n)
            out[p + "self_attn.o_proj.weight"] = init.zeros(D, q_rows)
            out[p + "mlp.gate_proj.weight"] = init.random(f, D)
            out[p + "mlp.up_proj.weight"] = init.random(f, D)
            out[p + "mlp.down_proj.weight"] = init.zeros(D, f)
            continue
        s = f"model.layers.{old_at[j]}."
        out[p + "input_layernorm.weight"] = norm(sd[s + "input_layernorm.weight"])
        out[p + "post_attention_layernorm.weight"] = norm(sd[s + "post_attention_layernorm.weight"])
        for name, rows in (("q", q_rows), ("k", kv_rows), ("v", kv_rows)):
            out[p + f"self_attn.{name}_proj.weight"] = reads(sd[s + f"self_attn.{name}_proj.weight"], rows)
            if dst.qkv_bias:
                old = sd[s + f"self_attn.{name}_proj.bias"].float()
                out[p + f"self_attn.{name}_proj.bias"] = torch.cat([old, torch.zeros(rows - old.shape[0])])
        out[p + "self_attn.o_proj.weight"] = writes(sd[s + "self_attn.o_proj.weight"], q_rows)
        out[p + "mlp.gate_proj.weight"] = reads(sd[s + "mlp.gate_proj.weight"], f)
        out[p + "mlp.up_proj.weight"] = reads(sd[s + "mlp.up_proj.weight"], f)
        out[p + "mlp.down_proj.weight"] = writes(sd[s + "mlp.down_proj.weight"], f)
    return out
