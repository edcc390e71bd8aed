"""Device ops as plain torch calls on cpu or cuda.

Layout choices (see ../shared/MACHINE-NOTES.md): linear weights are stored pre-transposed, (in, out), because
`x @ W_t` beats `F.linear(x, W)` several times over for wide outputs on these CPUs; the KV cache is stored
(kv_heads, max_tokens, head_dim) per layer so that the live prefix is a view that scaled_dot_product_attention
takes without a copy.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from waferline.hardware.device import KVRef, WeightRef


class TorchDevice:
    def __init__(self, *, device: str = "cpu", dtype: torch.dtype = torch.float32) -> None:
        self.name = device
        self.torch_device = torch.device(device)
        self.dtype = dtype
        self._counts: dict[str, float] = {}
        self.reset_counters()

    # -- placement ---------------------------------------------------------------------------------------------------
    def place(self, name: str, weight: Tensor, *, role: str = "linear") -> WeightRef:
        w = weight.detach().to(device=self.torch_device, dtype=self.dtype)
        if role == "linear":
            assert w.dim() == 2, f"{name}: a linear weight is (out, in), got {tuple(w.shape)}"
            payload = w.t().contiguous()  # (in, out)
        else:
            payload = w.contiguous()
        self._counts["weight_bytes"] += payload.numel() * payload.element_size()
        return WeightRef(name=name, shape=tuple(weight.shape), dtype=self.dtype, payload=payload)

    # -- KV ----------------------------------------------------------------------------------------------------------
    def kv_open(self, layers: int, kv_heads: int, head_dim: int, max_tokens: int) -> KVRef:
        # (layers, 2 = key/value, kv_heads, max_tokens, head_dim)
        cache = torch.zeros(layers, 2, kv_heads, max_tokens, head_dim, device=self.torch_device, dtype=self.dtype)
        return KVRef(layers=layers, kv_heads=kv_heads, head_dim=head_dim, max_tokens=max_tokens, payload=cache)

    def kv_truncate(self, kv: KVRef, length: int) -> None:
        assert 0 <= length <= kv.length, f"truncate to {length} but the cache holds {kv.length}"
        kv.length = length  # positions past `length` are overwritten before they are read again

    def kv_advance(self, kv: KVRef, length: int) -> None:
        assert kv.length <= length <= kv.max_tokens, f"advance to {length} outside [{kv.length}, {kv.max_tokens}]"
        kv.length = length

    def kv_close(self, kv: KVRef) -> None:
        kv.payload = None
        kv.length = 0

    # -- per-step operations -----------------------------------------------------------------------------------------
    def embed(self, table: WeightRef, tokens: Tensor) -> Tensor:
        return F.embedding(tokens.to(self.torch_device), table.payload)  # (T, dim)

    def rms_norm(self, x: Tensor, weight: WeightRef, eps: float) -> Tensor:
        return F.rms_norm(x, (x.shape[-1],), weight.payload, eps)

    def linear(self, x: Tensor, weight: WeightRef, bias: WeightRef | None = None) -> Tensor:
        if bias is None:
            return x @ weight.payload  # (T, in) @ (in, out) -> (T, out)
        return torch.addmm(bias.payload, x, weight.payload)

    def rotary(self, x: Tensor, cos: WeightRef, sin: WeightRef, start: int) -> Tensor:
        T = x.shape[0]
        half = x.shape[-1] // 2
        x1, x2 = x[..., :half], x[..., half:]  # (T, H, D/2) each
        c = cos.payload[start : start + T].unsqueeze(1)  # (T, 1, D/2)
        s = sin.payload[start : start + T].unsqueeze(1)
        return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)

    def attend(self, kv: KVRef, layer: int, q: Tensor, k: Tensor, v: Tensor, start: int) -> Tensor:
        T, H, D = q.shape
        end = start + T
        assert end <= kv.max_tokens, f"position {end} past the cache's {kv.max_tokens} tokens"
        cache = kv.payload[layer]  # (2, kv_heads, max_tokens, D)
        cache[0, :, start:end] = k.transpose(0, 1)
        cache[1, :, start:end] = v.transpose(0, 1)
        keys, values = cache[0, :, :end], cache[1, :, :end]  # (kv_heads, end, D)
        qh = q.transpose(0, 1)  # (H, T, D)
        mask = None
        if T > 1:
            # query i sits at position start + i and sees keys 0..start + i
            rows = torch.arange(start, end, device=q.device).unsqueeze(1)
            mask = torch.arange(end, device=q.device).unsqueeze(0) <= rows  # (T, end)
        out = F.scaled_dot_product_attention(
            qh.unsqueeze(0), keys.unsqueeze(0), values.unsqueeze(0), attn_mask=mask, enable_gqa=H != kv.kv_heads
        )  # (1, H, T, D)
        return out[0].transpose(0, 1).reshape(T, H * D)

    def swiglu(self, gate: Tensor, up: Tensor) -> Tensor:
        return F.silu(gate) * up

    def add(self, x: Tensor, y: Tensor) -> Tensor:
        return x + y

    # -- accounting --------------------------------------------------------------------------------------------------
    def counters(self) -> dict[str, float]:
        return dict(self._counts)

    def reset_counters(self) -> None:
        self._counts = {"weight_bytes": self._counts.get("weight_bytes", 0.0) if self._counts else 0.0}
