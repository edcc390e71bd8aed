"""A trainable twin of the engine's decoder, with Hugging Face parameter names.

The engine's `Transformer` runs one sequence through a hardware Device for decode; training needs batches,
autograd and fused attention instead. This module computes the same function (tests/training checks logits against
the engine on the same weights) and its `state_dict()` keys are exactly the Hugging Face names, so a trained model
is saved as a checkpoint without renaming.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from waferline.engine.model import ModelArgs, rope_tables


class Attention(nn.Module):
    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        h, d = args.head_dim, args.dim
        self.n_heads, self.n_kv_heads, self.head_dim = args.n_heads, args.n_kv_heads, h
        self.q_proj = nn.Linear(d, args.n_heads * h, bias=args.qkv_bias)
        self.k_proj = nn.Linear(d, args.n_kv_heads * h, bias=args.qkv_bias)
        self.v_proj = nn.Linear(d, args.n_kv_heads * h, bias=args.qkv_bias)
        self.o_proj = nn.Linear(args.n_heads * h, d, bias=False)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        B, T, _ = x.shape
        H, KVH, D = self.n_heads, self.n_kv_heads, self.head_dim
        q = self.q_proj(x).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
        k = self.k_proj(x).view(B, T, KVH, D).transpose(1, 2)  # (B, KVH, T, D)
        v = self.v_proj(x).view(B, T, KVH, D).transpose(1, 2)  # (B, KVH, T, D)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        if KVH != H:  # grouped-query attention: each kv head serves H // KVH query heads
            k = k.repeat_interleave(H // KVH, dim=1)  # (B, H, T, D)
            v = v.repeat_interleave(H // KVH, dim=1)  # (B, H, T, D)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, D)
        return self.o_proj(y.transpose(1, 2).reshape(B, T, H * D))


def apply_rotary(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Half-split (NeoX / Hugging Face) rotary embedding. x: (B, H, T, D); cos, sin: (T, D // 2)."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).to(x.dtype)


class MLP(nn.Module):
    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(args.dim, args.intermediate_size, bias=False)
        self.up_proj = nn.Linear(args.dim, args.intermediate_size, bias=False)
        self.down_proj = nn.Linear(args.intermediate_size, args.dim, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.input_layernorm = nn.RMSNorm(args.dim, eps=args.norm_eps)
        self.self_attn = Attention(args)
        self.post_attention_layernorm = nn.RMSNorm(args.dim, eps=args.norm_eps)
        self.mlp = MLP(args)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class Decoder(nn.Module):
    """The stack under `model.` in Hugging Face naming."""

    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(args.vocab_size, args.dim)
        self.layers = nn.ModuleList(Block(args) for _ in range(args.n_layers))
        self.norm = nn.RMSNorm(args.dim, eps=args.norm_eps)


class TrainableLM(nn.Module):
    """Llama/Qwen2 causal LM for training; `forward(tokens (B, T)) -> logits (B, T, vocab)`."""

    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.args = args
        self.model = Decoder(args)
        self.lm_head: nn.Linear | None = None
        if not args.tie_embeddings:
            self.lm_head = nn.Linear(args.dim, args.vocab_size, bias=False)
        cos, sin = rope_tables(args, args.max_seq_len)
        self.rope_cos: Tensor
        self.rope_sin: Tensor
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.reset_parameters()

    def reset_parameters(self, std: float = 0.02) -> None:
        """GPT-2 style init: normal(0, 0.02), output projections scaled down by depth, zero biases, unit norms."""
        for name, p in self.named_parameters():
            if name.endswith("norm.weight"):
                nn.init.ones_(p)
            elif name.endswith(".bias"):
                nn.init.zeros_(p)
            elif name.endswith(("o_proj.weight", "down_proj.weight")):
                nn.init.normal_(p, std=std / (2 * self.args.n_layers) ** 0.5)
            else:
                nn.init.normal_(p, std=std)

    def forward(self, tokens: Tensor) -> Tensor:
        T = tokens.shape[1]
        assert self.args.max_seq_len >= T, f"{T} tokens exceed max_seq_len {self.args.max_seq_len}"
        cos, sin = self.rope_cos[:T], self.rope_sin[:T]  # (T, head_dim // 2)
        x = self.model.embed_tokens(tokens)  # (B, T, dim)
        for layer in self.model.layers:
            x = layer(x, cos, sin)
        x = self.model.norm(x)
        head = self.model.embed_tokens.weight if self.lm_head is None else self.lm_head.weight
        return F.linear(x, head)  # (B, T, vocab)

    def loss(self, tokens: Tensor, targets: Tensor, ignore_index: int = -100) -> Tensor:
        """Mean cross-entropy over positions whose target is not `ignore_index`. tokens, targets: (B, T)."""
        logits = self.forward(tokens)
        return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=ignore_index)

    def hf_state_dict(self) -> dict[str, Tensor]:
        """Weights under Hugging Face names (tied head omitted), contiguous float32 copies for saving."""
        return {k: v.detach().float().contiguous().clone() for k, v in self.state_dict().items()}
