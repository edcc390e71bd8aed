"""Device ops as plain torch calls on cpu or cuda: the reference implementation of the seam and the fast path.

Layout choices (measured; see docs/benchmarks-decode.md):
- float32 linear weights are stored pre-transposed, (in, out), because `x @ W_t` beats `F.linear(x, W)` several
  times over for wide outputs on these CPUs; bfloat16 weights on CPU are packed once for oneDNN's kernel, 2-5x
  faster than PyTorch's bfloat16 matrix-vector paths; float16 (and cuda) weights stay (out, in) for F.linear.
- `weights="int8"`: weight-only int8 with one scale per output row, multiplied by `_weight_int8pack_mm` with
  bfloat16 activations: a quarter of float32's bytes per token, which is what decoding a small model costs.
- The KV cache is (layers, 2, kv_heads, max_tokens, head_dim) so that a layer's live prefix is a view that
  scaled_dot_product_attention takes without a copy.
- One-token attention folds the query heads that share a KV head into query rows: one call, no mask.
"""

from __future__ import annotations

import os
import weakref
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from waferline.hardware.blocks import BlockWeight, Weight, x8_kinds
from waferline.hardware.device import DecoderPlan, FusedStep, KVRef, Placement, WeightRef
from waferline.hardware.torch_backend import fused, fused_library, hugepages, kernels
from waferline.hardware.torch_backend.kernels import Int8Linear, PackedLinear

WEIGHT_FORMATS = ("float", "int8")
# Models up to this many placed weight bytes decode through the fused C step on the CPU (fused.py): measured from the
# 4.9M-parameter shipped model up to the Qwen2.5-Coder-1.5B shape in int8 (2.0 GB placed, embedding included), where
# it reads weights at close to the machine's read speed and torch's per-op path at about half. Past it: untested, so
# the per-op path, and the log says so.
FUSE_MAX_WEIGHT_BYTES = 4 << 30


@dataclass(eq=False)
class KVCache:
    """One session's cache: `data` (layers, 2 = key/value, kv_heads, max_tokens, head_dim), allocated once.

    `keys[i]` and `values[i]` are views (kv_heads, max_tokens, head_dim) of layer i, made once here because
    indexing costs microseconds per call and a decode step would repeat it for every layer.
    """

    data: Tensor
    keys: list[Tensor]
    values: list[Tensor]

    @classmethod
    def allocate(
        cls, layers: int, kv_heads: int, head_dim: int, max_tokens: int, device: torch.device, dtype: torch.dtype
    ) -> KVCache:
        shape = (layers, 2, kv_heads, max_tokens, head_dim)
        if device.type == "cpu":  # on 2 MB pages, as the weights: a long context's attention reads it all
            data = hugepages.empty(shape, dtype, zero=True)
        else:
            data = torch.zeros(shape, device=device, dtype=dtype)
        return cls(data=data, keys=[data[i, 0] for i in range(layers)], values=[data[i, 1] for i in range(layers)])


class TorchDevice:
    def __init__(self, *, device: str = "cpu", dtype: torch.dtype = torch.float32, weights: str = "float") -> None:
        if weights not in WEIGHT_FORMATS:
            raise ValueError(f"unknown weight format {weights!r}; choose {' or '.join(WEIGHT_FORMATS)}")
        if weights == "int8" and dtype not in (torch.bfloat16, torch.float16):
            raise ValueError(f"int8 weights compute with bfloat16 or float16 activations, not {dtype}")
        self.name = device
        self.torch_device = torch.device(device)
        self.dtype = dtype
        self.weights = weights
        self.exact_rows: bool | None = None  # it depends on the dtype and torch's kernels: the engine probes
        # float32 (in, out) pre-transposed; bfloat16 on CPU packed for oneDNN; other 16-bit (out, in) as given
        self._transposed = dtype == torch.float32
        self._pack = weights == "float" and kernels.can_pack(self.torch_device, dtype)
        self._rope: dict[tuple[int, int], tuple[Tensor, Tensor]] = {}  # (id(cos), id(sin)) -> (P, 1, D) tables
        self._counts: dict[str, float] = {"weight_bytes": 0.0}
        self._blocks: bool | None = None  # keeps_blocks(), decided once
        self._x8: tuple[str, ...] | None = None  # _interleaves(), decided once
        # the embedding as given (a weak reference: the file's rows are not kept alive) and as placed
        self._table: tuple[weakref.ref[BlockWeight], BlockWeight] | None = None
        self._arena = hugepages.Arena()  # the block weights the fused step streams, on 2 MB pages

    # -- placement ---------------------------------------------------------------------------------------------------
    def keeps_blocks(self) -> bool:
        """Whether GGUF block weights stay as the file stores them (the fused C step reads them, fused_blocks.c): on
        the CPU with the fused step built, unless WAFERLINE_GGUF_BLOCKS=0 (then they are dequantised on load)."""
        if self._blocks is None:
            self._blocks = (
                self.torch_device.type == "cpu"
                and os.environ.get("WAFERLINE_GGUF_BLOCKS", "1").strip().lower() not in ("0", "false", "no", "off")
                and not fused_library.disabled_by_env()
                and fused_library.library() is not None
            )
        return self._blocks

    def _interleaves(self) -> tuple[str, ...]:
        """The block formats whose matrices are placed 8 rows interleaved (the fused step's faster products:
        Q4_0 / Q4_1 / Q5_0 with AVX2, Q8_0 with AVX512-VNNI; BlockWeight.interleaved), none where
        WAFERLINE_GGUF_X8=0; decided once, as keeps_blocks."""
        if self._x8 is None:
            lib = fused_library.library()
            off = os.environ.get("WAFERLINE_GGUF_X8", "1").strip().lower() in ("0", "false", "no", "off")
            self._x8 = () if lib is None or off else x8_kinds(int(lib.waferline_blocks_x8()))
        return self._x8

    def _placed_blocks(self, weight: BlockWeight, role: str) -> BlockWeight:
        """A block weight as the fused step reads it. Matrices of the formats _interleaves() names are interleaved.
        An embedding of such a format is too where its rows are whole groups of 8 (the step and `embed` read a row
        from its group), so that a tied head placed next from the same weight shares its bytes: one copy."""
        kinds = self._interleaves()
        if role == "embedding":
            if len(weight.segments) == 1 and weight.kind in kinds and weight.shape[0] % 8 == 0:
                self._table = (weakref.ref(weight), self._streamed(weight, kinds))
                return self._table[1]
            return weight  # a step reads one row of it: where it lies matters little
        if self._table is not None and self._table[0]() is weight:  # a tied head: the table's bytes
            return self._table[1]
        return self._streamed(weight, kinds)

    def _streamed(self, weight: BlockWeight, kinds: tuple[str, ...]) -> BlockWeight:
        """A block weight every step reads whole: interleaved (the `kinds`), its bytes on 2 MB pages (hugepages.py),
        written there as they are moved (one copy), or copied there where nothing moves."""
        moved = weight.interleaved(kinds, place=self._arena.take) if kinds else weight
        if moved is not weight:
            return moved  # on the arena's pages, or (the arena off or refused) where numpy put them
        data = self._arena.copy(weight.data)
        return weight if data is weight.data else BlockWeight(data, weight.shape, weight.segments)

    def place(self, name: str, weight: Weight, *, role: str = "linear") -> WeightRef:
        if isinstance(weight, BlockWeight):
            if role in ("linear", "embedding") and self.keeps_blocks():
                self._counts["weight_bytes"] += 0 if role == "linear" and name == "lm_head" else weight.nbytes
                placed = self._placed_blocks(weight, role)
                return WeightRef(name=name, shape=weight.shape, dtype=self.dtype, payload=placed)
            weight = weight.dequantize()
        w = weight.detach().to(device=self.torch_device)
        payload: Tensor | Int8Linear | PackedLinear
        if role == "linear":
            assert w.dim() == 2, f"{name}: a linear weight is (out, in), got {tuple(w.shape)}"
            if self.weights == "int8":
                payload = kernels.quantize_int8(w, self.dtype)
            elif self._pack:
                payload = kernels.pack_linear(w.to(self.dtype))
            else:
                w = w.to(self.dtype)
                payload = w.t().contiguous() if self._transposed else w.contiguous()
        elif role == "table":
            payload = w.float().contiguous()  # rope tables stay float32; `rotary` derives its own per dtype
        elif role == "norm":
            payload = kernels.norm_weight(w.to(self.dtype))  # (2 * dim,), see kernels.rms_norm
        else:
            payload = w.to(self.dtype).contiguous()
        nbytes = payload.numel() * payload.element_size() if isinstance(payload, Tensor) else payload.nbytes()
        self._counts["weight_bytes"] += nbytes
        return WeightRef(name=name, shape=tuple(weight.shape), dtype=self.dtype, payload=payload)

    # -- KV ----------------------------------------------------------------------------------------------------------
    def kv_open(self, layers: int, kv_heads: int, head_dim: int, max_tokens: int) -> KVRef:
        cache = KVCache.allocate(layers, kv_heads, head_dim, max_tokens, self.torch_device, self.dtype)
        return KVRef(
            layers=layers, kv_heads=kv_heads, head_dim=head_dim, max_tokens=max_tokens, dtype=self.dtype, payload=cache
        )

    def kv_truncate(self, kv: KVRef, length: int) -> None:
        assert kv.payload is not None, "this KV cache was closed"
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
        if isinstance(table.payload, BlockWeight):  # GGUF blocks: only the rows asked for, dequantised
            return table.payload.dequantize(tokens.cpu()).to(self.dtype)
        return F.embedding(tokens.to(self.torch_device), table.payload)  # (T, dim)

    def rms_norm(self, x: Tensor, weight: WeightRef, eps: float) -> Tensor:
        return kernels.rms_norm(x, weight.payload, eps)

    def linear(self, x: Tensor, weight: WeightRef, bias: WeightRef | None = None) -> Tensor:
        w = weight.payload
        b = None if bias is None else bias.payload
        if isinstance(w, BlockWeight):  # GGUF blocks off the fused step (a prompt past it): dequantised for the call
            return F.linear(x, w.dequantize().to(x.dtype), None if b is None else b.to(x.dtype))
        if isinstance(w, PackedLinear):
            return kernels.packed_linear(x, w, b)
        if isinstance(w, Int8Linear):
            return kernels.int8_linear(x, w, b)
        if self._transposed:  # (T, in) @ (in, out) -> (T, out)
            return x @ w if b is None else torch.addmm(b, x, w)
        return F.linear(x, w, b)

    def rotary(self, x: Tensor, cos: WeightRef, sin: WeightRef, start: int) -> Tensor:
        key = (id(cos), id(sin))
        tables = self._rope.get(key)
        if tables is None:
            tables = self._rope[key] = kernels.rope_tables(cos.payload, sin.payload, self.dtype)
        end = start + x.shape[0]
        return kernels.rotary(x, tables[0][start:end], tables[1][start:end])

    def attend(self, kv: KVRef, layer: int, q: Tensor, k: Tensor, v: Tensor, start: int) -> Tensor:
        T = q.shape[0]
        end = start + T
        assert kv.payload is not None, "this KV cache was closed"
        assert end <= kv.max_tokens, f"position {end} past the cache's {kv.max_tokens} tokens"
        keys, values = kv.payload.keys[layer], kv.payload.values[layer]  # (kv_heads, max_tokens, D) each
        keys[:, start:end] = k.transpose(0, 1)
        values[:, start:end] = v.transpose(0, 1)
        keys, values = keys[:, :end], values[:, :end]  # the live prefix, views
        if T == 1:
            return kernels.attend_one(keys, values, q)
        return kernels.attend_many(keys, values, q, start)

    def swiglu(self, gate: Tensor, up: Tensor) -> Tensor:
        return F.silu(gate) * up

    def add(self, x: Tensor, y: Tensor) -> Tensor:
        return x + y

    # -- a whole step ----------------------------------------------------------------------------------------------
    def fuse_decoder(self, plan: DecoderPlan) -> FusedStep | None:
        """The fused C step for this model, or None with one log line that says why decode stays per-op."""
        placed = self._counts["weight_bytes"]
        if self.torch_device.type != "cpu":
            return None  # the fused step is a CPU kernel; on cuda the per-op path is the only one, nothing to report
        if placed > FUSE_MAX_WEIGHT_BYTES:
            limit = FUSE_MAX_WEIGHT_BYTES / 1e9
            reason = f"{placed / 1e9:.1f} GB of placed weights, over the {limit:.1f} GB it is measured up to"
        else:
            step = fused.build(plan, weights=self.weights, dtype=self.dtype)
            if not isinstance(step, str):
                return step
            reason = step
        fused_library.log.info("decode through per-op torch calls, not the fused C step: %s", reason)
        return None

    # -- accounting --------------------------------------------------------------------------------------------------
    def placement(self) -> Placement:
        weights = "int8" if self.weights == "int8" else str(self.dtype).removeprefix("torch.")
        return Placement(weights=weights, dtype=self.dtype, weight_bytes=int(self._counts["weight_bytes"]))

    def counters(self) -> dict[str, float]:
        return dict(self._counts)

    def reset_counters(self) -> None:
        self._counts = {"weight_bytes": self._counts["weight_bytes"]}  # placed bytes survive; they are not per-run
