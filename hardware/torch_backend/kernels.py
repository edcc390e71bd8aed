"""The torch backend's math, as free functions on plain tensors: what each Device op computes, and how fast.

Each function here was chosen by measuring on the 2-core development machines (docs/benchmarks.md); the reference
math it must equal is written in its docstring and checked in tests/hardware/test_torch_backend.py. Decode runs one
token at a time, so most tensors are tiny and what costs is the number of torch calls (3-40 µs each from Python), not
arithmetic: fewer, larger calls win.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor


@dataclass(eq=False)
class Int8Linear:
    """A linear weight quantised to int8, symmetric, one scale per output row: W ≈ q * scale[:, None].

    q: (out, in) int8; scale: (out,) in the activation dtype. Weight-only: activations stay bfloat16/float16 and the
    product accumulates in float32 inside `_weight_int8pack_mm`, so a decode step reads a quarter of float32's bytes.
    """

    q: Tensor
    scale: Tensor
    q_mm: Tensor  # q as `_weight_int8pack_mm` takes it: columns zero-padded to a multiple of INT8_MM_K_MULTIPLE

    def nbytes(self) -> int:
        return self.q_mm.numel() * self.q_mm.element_size() + self.scale.numel() * self.scale.element_size()

    def dequantize(self) -> Tensor:
        """(out, in) in float32: the weight this stands for."""
        return self.q.float() * self.scale.float()[:, None]


# torch 2.13's CPU `_weight_int8pack_mm` reads past the row (garbage or a crash) unless the input width is a multiple
# of 32; real models' widths are, and narrower test shapes get zero columns (tests/hardware/test_torch_backend.py).
INT8_MM_K_MULTIPLE = 32


def quantize_int8(w: Tensor, act_dtype: torch.dtype) -> Int8Linear:
    """w: (out, in) float -> per-row symmetric int8 (round to nearest; an all-zero row gets scale 1)."""
    w = w.float()
    amax = w.abs().amax(dim=1)  # (out,)
    scale = torch.where(amax > 0, amax / 127.0, torch.ones_like(amax)).to(act_dtype)  # rounded as it will be used
    q = torch.clamp(torch.round(w / scale.float()[:, None]), -127, 127).to(torch.int8).contiguous()
    pad = -q.shape[1] % INT8_MM_K_MULTIPLE
    q_mm = F.pad(q, (0, pad)).contiguous() if pad and q.device.type == "cpu" else q
    return Int8Linear(q=q, scale=scale, q_mm=q_mm)


def int8_linear(x: Tensor, w: Int8Linear, bias: Tensor | None) -> Tensor:
    """x: (T, in) -> (T, out) = x @ (q * scale).T + bias, in x's dtype."""
    if x.device.type == "cpu":
        if w.q_mm is not w.q:
            x = F.pad(x, (0, w.q_mm.shape[1] - x.shape[1]))
        y = torch.ops.aten._weight_int8pack_mm(x, w.q_mm, w.scale)  # (T, out)
    else:  # cuda: dequantise on the fly; correct everywhere, fast where a fused kernel exists
        y = F.linear(x, w.q.to(x.dtype)) * w.scale
    return y if bias is None else y + bias


@dataclass(eq=False)
class PackedLinear:
    """A bfloat16 linear weight reordered once into oneDNN's blocked layout for one-row inputs.

    PyTorch's bfloat16 matrix-vector paths on these CPUs stream 2-5 GB/s when the input width is small (896 for
    Qwen2.5-0.5B), because each call re-blocks the weight or reduces short rows one by one; oneDNN's kernel on a
    weight packed at load reads it at 9-14 GB/s, close to a plain read of the same bytes (docs/benchmarks.md).
    `packed` is an opaque mkldnn tensor of shape (out, in).
    """

    packed: Tensor
    out_features: int
    in_features: int

    def nbytes(self) -> int:
        return self.out_features * self.in_features * self.packed.element_size()


def can_pack(device: torch.device, dtype: torch.dtype) -> bool:
    return device.type == "cpu" and dtype == torch.bfloat16 and _onednn_packs_bf16()


@functools.cache
def _onednn_packs_bf16() -> bool:
    """Whether oneDNN packs bfloat16 weights on this CPU: it needs AVX512 (BW, VL, DQ) or AVX-NE-CONVERT, and says
    so with a RuntimeError elsewhere (AVX2-only CPUs: most AMD Zen and Intel client parts), where weights stay as
    given."""
    if not torch.backends.mkldnn.is_available():
        return False
    try:
        torch.ops.mkldnn._reorder_linear_weight(torch.zeros(16, 16, dtype=torch.bfloat16), 1)
    except RuntimeError:
        return False
    return True


def pack_linear(w: Tensor) -> PackedLinear:
    """w: (out, in) bfloat16 -> PackedLinear."""
    packed = torch.ops.mkldnn._reorder_linear_weight(w.contiguous(), 1)  # blocked for batch size 1
    return PackedLinear(packed=packed, out_features=w.shape[0], in_features=w.shape[1])


def packed_linear(x: Tensor, w: PackedLinear, bias: Tensor | None) -> Tensor:
    """x: (T, in) -> (T, out) = x @ W.T + bias."""
    return torch.ops.mkldnn._linear_pointwise(x.contiguous(), w.packed, bias, "none", [], "")


def rope_tables(cos: Tensor, sin: Tensor, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    """(positions, D/2) cos and sin -> (positions, 1, D) tables for the one-multiply-add form of `rotary`.

    With x = [x1, x2] (halves), rotated = [x1*cos - x2*sin, x2*cos + x1*sin] = x * [cos, cos] + [x2, x1] * [-sin, sin].
    """
    c = torch.cat((cos, cos), dim=-1).unsqueeze(1)  # (P, 1, D)
    s = torch.cat((-sin, sin), dim=-1).unsqueeze(1)  # (P, 1, D)
    return c.to(dtype).contiguous(), s.to(dtype).contiguous()


def rotary(x: Tensor, c: Tensor, s: Tensor) -> Tensor:
    """x: (T, H, D), c and s: (T, 1, D) from `rope_tables` -> x rotated, half-split (NeoX / Hugging Face) layout."""
    T, H, D = x.shape
    swapped = x.reshape(T, H, 2, D // 2).flip(2).view(T, H, D)  # [x2, x1]
    return torch.addcmul(x * c, swapped, s)


def norm_weight(weight: Tensor) -> Tensor:
    """(dim,) RMSNorm weight -> (2 * dim,) [weight, weight], the form `rms_norm` takes."""
    return torch.cat((weight, weight)).contiguous()


def rms_norm(x: Tensor, doubled_weight: Tensor, eps: float) -> Tensor:
    """x / sqrt(mean(x^2) + eps) * weight over the last dim. x: (T, dim); doubled_weight from `norm_weight`.

    Computed as layer_norm([x, -x])[:, :dim]: the mean of [x, -x] is zero, so its variance is mean(x^2) and layer
    norm's one fused kernel yields RMSNorm, where F.rms_norm runs about six kernels on CPU (6 µs against 19 µs for
    one token; equal to within float rounding, see the tests).
    """
    n = x.shape[-1]
    both = torch.cat((x, -x), dim=-1)  # (T, 2 * dim)
    return torch.layer_norm(both, (2 * n,), doubled_weight, None, eps)[..., :n]  # F.layer_norm adds ~0.6 µs of checks


def attend_one(keys: Tensor, values: Tensor, q: Tensor) -> Tensor:
    """Attention of one new token. keys, values: (KVH, L, D) live prefix of the cache; q: (1, H, D) -> (1, H * D).

    The G = H / KVH query heads that share a key/value head become G query rows of that head, so one batched
    attention call with no mask covers grouped-query attention (the token sees every cached position).
    """
    _, H, D = q.shape
    KVH = keys.shape[0]
    qg = q.reshape(1, KVH, H // KVH, D)  # head h uses kv head h // G, as in Hugging Face's repeat_kv
    out = F.scaled_dot_product_attention(qg, keys.unsqueeze(0), values.unsqueeze(0))  # (1, KVH, G, D)
    return out.reshape(1, H * D)


def attend_many(keys: Tensor, values: Tensor, q: Tensor, start: int) -> Tensor:
    """Causal attention of T new tokens at positions start..start+T-1 over keys, values: (KVH, start+T, D).

    q: (T, H, D) -> (T, H * D). Grouped heads are expanded to match q (prefill is compute-bound, not launch-bound).
    """
    T, H, D = q.shape
    KVH, end, _ = keys.shape
    qh = q.transpose(0, 1).unsqueeze(0)  # (1, H, T, D)
    k = keys.repeat_interleave(H // KVH, dim=0).unsqueeze(0)  # (1, H, end, D)
    v = values.repeat_interleave(H // KVH, dim=0).unsqueeze(0)
    if start == 0:
        out = F.scaled_dot_product_attention(qh, k, v, is_causal=True)
    else:
        # query i sits at position start + i and sees keys 0..start + i
        rows = torch.arange(start, end, device=q.device).unsqueeze(1)  # (T, 1)
        mask = torch.arange(end, device=q.device).unsqueeze(0) <= rows  # (T, end)
        out = F.scaled_dot_product_attention(qh, k, v, attn_mask=mask)
    return out[0].transpose(0, 1).reshape(T, H * D)  # (T, H * D)
