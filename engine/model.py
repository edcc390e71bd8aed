"""One transformer definition for the Llama family, Qwen2 and Qwen3, written against the hardware Device seam.

The model never asks which hardware it is on: it places its weights on a `Device` once and calls that device's
per-token operations. It knows its own tensors (`weight_shapes`), not a checkpoint's: engine/hf.py maps Hugging Face
configs and tensor names to these.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor

from waferline.hardware import Device, KVRef, WeightRef
from waferline.hardware.blocks import Weight
from waferline.hardware.device import DecoderPlan, FusedStep, LayerWeights, RowStats, torch_row_stats

MODEL_TYPES = ("llama", "qwen2", "qwen3")  # config.json's model_type of the families this decoder runs
# The families whose config.json `attention_bias` puts biases on q, k, v and o alike (Qwen2 has q/k/v biases alone,
# always): the decoder has no o bias, so these are run and written only without it.
ATTENTION_BIAS_TYPES = ("llama", "qwen3")


@dataclass(kw_only=True)
class ModelArgs:
    model_type: str = "llama"  # "llama", "qwen2" or "qwen3"
    vocab_size: int = 8192
    dim: int = 256  # hidden_size
    n_layers: int = 4
    n_heads: int = 8
    n_kv_heads: int = 4
    intermediate_size: int = 768
    max_seq_len: int = 2048  # max_position_embeddings
    rope_theta: float = 10000.0
    rope_scaling: dict[str, Any] | None = None  # Llama 3: {"rope_type": "llama3", "factor": ..., ...}
    norm_eps: float = 1e-5
    qkv_bias: bool = False  # Qwen2 has biases on q, k, v
    tie_embeddings: bool = False
    head_dim: int = field(default=0)  # derived from dim // n_heads unless the config sets it

    def __post_init__(self) -> None:
        if self.model_type not in MODEL_TYPES:
            raise ValueError(f"unsupported model_type {self.model_type!r}; waferline runs {', '.join(MODEL_TYPES)}")
        if self.head_dim == 0:
            assert self.dim % self.n_heads == 0, f"dim {self.dim} is not a multiple of n_heads {self.n_heads}"
            self.head_dim = self.dim // self.n_heads
        assert self.n_heads % self.n_kv_heads == 0, f"n_heads {self.n_heads} not a multiple of {self.n_kv_heads}"
        assert self.head_dim % 2 == 0, "rotary embedding needs an even head_dim"

    @classmethod
    def from_name(cls, name: str) -> ModelArgs:
        if name not in PRESETS:
            raise ValueError(f"unknown model preset {name!r}; presets: {', '.join(PRESETS)}")
        return cls(**PRESETS[name])

    @property
    def n_params(self) -> int:
        d, h = self.dim, self.head_dim
        attn = d * self.n_heads * h * 2 + d * self.n_kv_heads * h * 2
        if self.qkv_bias:
            attn += (self.n_heads + 2 * self.n_kv_heads) * h
        mlp = 3 * d * self.intermediate_size
        per_layer = attn + mlp + 2 * d + (2 * h if self.qk_norm else 0)
        embed = self.vocab_size * d * (1 if self.tie_embeddings else 2)
        return self.n_layers * per_layer + embed + d

    @property
    def qk_norm(self) -> bool:
        """Whether each query and key head is RMS-normalised before the rotary embedding (Qwen3)."""
        return self.model_type == "qwen3"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# Shapes from the models' public config.json files (random weights; for benchmarks and the emulator).
# fmt: off
PRESETS: dict[str, dict[str, Any]] = {
    "tiny": dict(
        model_type="qwen2", vocab_size=8192, dim=256, n_layers=4, n_heads=8, n_kv_heads=2,
        intermediate_size=704, max_seq_len=2048, rope_theta=10000.0, norm_eps=1e-6, qkv_bias=True,
        tie_embeddings=True,
    ),
    # Issue 26's larger models, with tiny's head_dim (32) and 4 query heads per kv head, so that the shipped model grows
    # into them (training/grow.py). small: 1.9x tiny's parameters, 0.6x its int8 decode on an AVX2-only CPU (1,458
    # against 2,503 tok/s, one thread; docs/model-card.md), inside the 1,500 tok/s floor there on a quiet machine;
    # medium: 3.2x, 0.26x there (655 tok/s), inside the floor only on AVX-512 VNNI CPUs.
    "small": dict(
        model_type="qwen2", vocab_size=8192, dim=384, n_layers=4, n_heads=12, n_kv_heads=3,
        intermediate_size=1024, max_seq_len=2048, rope_theta=10000.0, norm_eps=1e-6, qkv_bias=True,
        tie_embeddings=True,
    ),
    "medium": dict(
        model_type="qwen2", vocab_size=8192, dim=384, n_layers=8, n_heads=12, n_kv_heads=3,
        intermediate_size=1024, max_seq_len=2048, rope_theta=10000.0, norm_eps=1e-6, qkv_bias=True,
        tie_embeddings=True,
    ),
    "qwen2.5-coder-0.5b": dict(
        model_type="qwen2", vocab_size=151936, dim=896, n_layers=24, n_heads=14, n_kv_heads=2,
        intermediate_size=4864, max_seq_len=32768, rope_theta=1000000.0, norm_eps=1e-6, qkv_bias=True,
        tie_embeddings=True,
    ),
    "qwen2.5-coder-1.5b": dict(
        model_type="qwen2", vocab_size=151936, dim=1536, n_layers=28, n_heads=12, n_kv_heads=2,
        intermediate_size=8960, max_seq_len=32768, rope_theta=1000000.0, norm_eps=1e-6, qkv_bias=True,
        tie_embeddings=True,
    ),
    "qwen3-0.6b": dict(
        model_type="qwen3", vocab_size=151936, dim=1024, n_layers=28, n_heads=16, n_kv_heads=8, head_dim=128,
        intermediate_size=3072, max_seq_len=40960, rope_theta=1000000.0, norm_eps=1e-6, qkv_bias=False,
        tie_embeddings=True,
    ),
    "llama-3.1-8b": dict(
        model_type="llama", vocab_size=128256, dim=4096, n_layers=32, n_heads=32, n_kv_heads=8,
        intermediate_size=14336, max_seq_len=131072, rope_theta=500000.0, norm_eps=1e-5, qkv_bias=False,
        tie_embeddings=False,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 8192},
    ),
}
# fmt: on


def rope_frequencies(args: ModelArgs) -> Tensor:
    """Inverse frequencies (head_dim // 2,) in float64, with linear (DeepSeek-Coder) or Llama 3 scaling when the
    config asks for it."""
    h = args.head_dim
    inv_freq = 1.0 / (args.rope_theta ** (torch.arange(0, h, 2, dtype=torch.float64) / h))
    scaling = args.rope_scaling or {}
    kind = scaling.get("rope_type", scaling.get("type"))
    if kind in (None, "default"):
        return inv_freq
    if kind == "linear":  # positions divided by factor
        return inv_freq / float(scaling["factor"])
    if kind != "llama3":
        raise ValueError(f"unsupported rope_scaling type {kind!r} (waferline supports 'linear', 'llama3' and none)")
    factor = float(scaling["factor"])
    low, high = float(scaling["low_freq_factor"]), float(scaling["high_freq_factor"])
    old_len = float(scaling["original_max_position_embeddings"])
    wavelen = 2 * math.pi / inv_freq
    low_wavelen, high_wavelen = old_len / low, old_len / high
    smooth = (old_len / wavelen - low) / (high - low)
    scaled = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
    medium = (wavelen <= low_wavelen) & (wavelen >= high_wavelen)
    return torch.where(medium, (1 - smooth) * inv_freq / factor + smooth * inv_freq, scaled)


def rope_tables(args: ModelArgs, positions: int) -> tuple[Tensor, Tensor]:
    """cos and sin, each (positions, head_dim // 2), float32: computed in float64 a block of positions at a time, so
    that no float64 temporary of the whole table (3x its size, for a 32k-position model 24 MB) is made."""
    freqs = rope_frequencies(args).numpy()
    cos = np.empty((positions, freqs.size), dtype=np.float32)
    sin = np.empty_like(cos)
    for start in range(0, positions, 512):
        angles = np.outer(np.arange(start, min(start + 512, positions), dtype=np.float64), freqs)
        cos[start : start + 512] = np.cos(angles)
        sin[start : start + 512] = np.sin(angles)
    return torch.from_numpy(cos), torch.from_numpy(sin)


def weight_shapes(args: ModelArgs) -> dict[str, tuple[int, ...]]:
    """The tensors a model of this shape places, by the names `Transformer.load` takes them: each layer's q, k, v
    projections fused into one `qkv` (out, in) matrix, gate and up into one `gate_up`."""
    d, h, inter = args.dim, args.head_dim, args.intermediate_size
    qkv = (args.n_heads + 2 * args.n_kv_heads) * h
    shapes: dict[str, tuple[int, ...]] = {"embedding": (args.vocab_size, d)}
    for i in range(args.n_layers):
        p = f"layers.{i}."
        shapes.update({p + "attn_norm": (d,), p + "qkv": (qkv, d)})
        if args.qkv_bias:
            shapes[p + "qkv_bias"] = (qkv,)
        if args.qk_norm:
            shapes.update({p + "q_norm": (h,), p + "k_norm": (h,)})
        layer = {"o": (d, args.n_heads * h), "mlp_norm": (d,), "gate_up": (2 * inter, d), "down": (d, inter)}
        shapes.update({p + key: shape for key, shape in layer.items()})
    shapes["norm"] = (d,)
    if not args.tie_embeddings:
        shapes["lm_head"] = (args.vocab_size, d)
    return shapes


# How each placed tensor is used (Device.place's role), by the last part of its name.
ROLES = {
    "embedding": "embedding", "lm_head": "linear", "norm": "norm", "attn_norm": "norm", "mlp_norm": "norm",
    "qkv": "linear", "qkv_bias": "bias", "o": "linear", "gate_up": "linear", "down": "linear",
    "q_norm": "norm", "k_norm": "norm",
}  # fmt: skip


class Transformer:
    """A Llama/Qwen2/Qwen3 decoder whose weights live on a Device; forward() runs one chunk of one sequence."""

    def __init__(self, args: ModelArgs, device: Device) -> None:
        self.args = args
        self.device = device
        self.layers: list[LayerWeights] = []
        self.embedding: WeightRef | None = None
        self.norm: WeightRef | None = None
        self.lm_head: WeightRef | None = None
        self.fused: FusedStep | None = None  # the device's whole one-token step, when it has one (set by load)
        self._exact_verify: bool | None = None
        cos, sin = rope_tables(args, args.max_seq_len)
        self.rope_cos = device.place("rope.cos", cos, role="table")
        self.rope_sin = device.place("rope.sin", sin, role="table")

    def load(self, tensors: Iterable[tuple[str, Weight]]) -> None:
        """Place the model's tensors (the names and shapes of `weight_shapes`; engine/hf.py's `from_hf` makes them
        from a checkpoint), in any order, each as it comes, so that a stream never sits in memory twice. A tied
        model's head is placed from the embedding."""
        args, dev = self.args, self.device
        expected = weight_shapes(args)
        slots: dict[int, dict[str, Any]] = {
            i: {} if args.qkv_bias else {"qkv_bias": None} for i in range(args.n_layers)
        }
        seen: set[str] = set()
        for name, t in tensors:
            want = expected.get(name)
            if want is None:
                raise ValueError(f"unexpected tensor {name!r} for a {args.model_type} model of this shape")
            if tuple(t.shape) != want:
                raise ValueError(f"tensor {name!r} has shape {tuple(t.shape)}, but the model's shape implies {want}")
            seen.add(name)
            key = name.rsplit(".", 1)[-1]
            ref = dev.place(name, t, role=ROLES[key])
            if name == "embedding":
                self.embedding = ref
                if args.tie_embeddings:
                    self.lm_head = dev.place("lm_head", t, role="linear")
            elif name == "lm_head":
                self.lm_head = ref
            elif name == "norm":
                self.norm = ref
            else:
                slots[int(name.split(".")[1])][key] = ref
        missing = expected.keys() - seen
        if missing:
            raise ValueError(f"the model lacks {len(missing)} tensors, for example {sorted(missing)[0]!r}")
        self.layers = [LayerWeights(**slots[i]) for i in range(args.n_layers)]
        self.fused = dev.fuse_decoder(self.plan())

    def plan(self) -> DecoderPlan:
        """The placed model as one description, for `Device.fuse_decoder`."""
        a = self.args
        assert self.embedding is not None and self.norm is not None and self.lm_head is not None, "load() first"
        return DecoderPlan(
            dim=a.dim, n_layers=a.n_layers, n_heads=a.n_heads, n_kv_heads=a.n_kv_heads, head_dim=a.head_dim,
            intermediate_size=a.intermediate_size, vocab=a.vocab_size, max_seq_len=a.max_seq_len, norm_eps=a.norm_eps,
            embedding=self.embedding, layers=self.layers, norm=self.norm, lm_head=self.lm_head,
            rope_cos=self.rope_cos, rope_sin=self.rope_sin,
        )  # fmt: skip

    def forward(
        self, tokens: Sequence[int] | Tensor, kv: KVRef, start: int, *, last_only: bool = True,
        like_steps: bool = False,
    ) -> Tensor:  # fmt: skip
        """tokens (T,) at positions start..start+T-1 -> logits (1 or T, vocab): the last row, or one per token when
        not `last_only`. Advances the cache to start+T. The one way the model makes logits; it picks its route once:

        - one token, with the backend's fused step: that step (the default decode path on the CPU, one C call);
        - with the fused step and `like_steps` (speculative verification: rows equal to one-token steps), its
          k-token call when it takes T tokens at once; without `like_steps` (a prompt), its k-token call, at most
          `max_tokens` tokens a call, when a prefill of T tokens runs faster that way (`prefill_max`);
        - else the per-op calls on all T rows, every weight read once; with `like_steps`, attention token by token
          where the backend's products treat rows independently (`exact_verify`), so that rows equal one-token steps
          exactly (elsewhere they equal them only up to the rounding of a T-row product anyway).

        The caller truncates the cache to take back tokens it does not keep."""
        n = len(tokens)
        assert start == kv.length, f"forward at position {start}, but the cache holds {kv.length}"
        assert n > 0 and start + n <= kv.max_tokens, f"{n} tokens at {start}: the cache holds {kv.max_tokens}"
        fused = self.fused
        if fused is not None:
            ids = tokens.tolist() if isinstance(tokens, Tensor) else tokens
            if n == 1:
                logits = fused.step(int(ids[0]), kv, start)
                self.device.kv_advance(kv, start + 1)
                return logits
            limit = fused.prefill_max
            if (n <= fused.max_tokens) if like_steps else (limit is None or n <= limit):
                return self._forward_many(fused, ids, kv, start, last_only=last_only)
        t = tokens if isinstance(tokens, Tensor) else torch.tensor(list(tokens), dtype=torch.long)
        return self._forward_ops(t, kv, start, last_only=last_only, one_by_one=like_steps and self.exact_verify())

    def _forward_ops(self, tokens: Tensor, kv: KVRef, start: int, *, last_only: bool, one_by_one: bool) -> Tensor:
        """`forward` through the device's per-op calls. `one_by_one`: attention token by token (the one-token call
        for each), so that a row's arithmetic is a one-token step's wherever the backend's other ops treat rows
        independently."""
        args, dev = self.args, self.device
        assert self.embedding is not None and self.norm is not None and self.lm_head is not None, "load() first"
        T = tokens.shape[0]
        H, KVH, D = args.n_heads, args.n_kv_heads, args.head_dim
        cos, sin, eps = self.rope_cos, self.rope_sin, args.norm_eps
        # One decode step is ~15 device calls per layer, each costing microseconds of dispatch whatever its size, so
        # the loop below makes as few as it can: q and k rotate in one call, splits are views.
        x = dev.embed(self.embedding, tokens)  # (T, dim)
        for i, layer in enumerate(self.layers):
            h = dev.rms_norm(x, layer.attn_norm, eps)
            qkv = dev.linear(h, layer.qkv, layer.qkv_bias).view(T, H + 2 * KVH, D)  # heads: H query, KVH key, KVH value
            qk = qkv[:, : H + KVH] if layer.q_norm is None else self._norm_heads(qkv, layer, T)
            qk = dev.rotary(qk, cos, sin, start)  # (T, H + KVH, D)
            q, k = qk.split_with_sizes((H, KVH), dim=1)  # (T, H, D), (T, KVH, D); a C++ call, unlike split()
            v = qkv[:, H + KVH :]
            if one_by_one and T > 1:
                rows = [dev.attend(kv, i, q[t : t + 1], k[t : t + 1], v[t : t + 1], start + t) for t in range(T)]
                attn = torch.cat(rows)
            else:
                attn = dev.attend(kv, i, q, k, v, start)  # (T, H * D)
            x = dev.add(x, dev.linear(attn, layer.o))
            h = dev.rms_norm(x, layer.mlp_norm, eps)
            gate, up = dev.linear(h, layer.gate_up).chunk(2, dim=-1)  # (T, inter) each
            x = dev.add(x, dev.linear(dev.swiglu(gate, up), layer.down))
        dev.kv_advance(kv, start + T)
        if last_only:
            x = x[-1:]
        return dev.linear(dev.rms_norm(x, self.norm, eps), self.lm_head)  # (1 or T, vocab)

    def _norm_heads(self, qkv: Tensor, layer: LayerWeights, T: int) -> Tensor:
        """Qwen3's per-head RMSNorm of the queries and keys (T, H + KVH, D), each head as one row of D values."""
        H, KVH, D, dev = self.args.n_heads, self.args.n_kv_heads, self.args.head_dim, self.device
        assert layer.q_norm is not None and layer.k_norm is not None
        q = dev.rms_norm(qkv[:, :H].reshape(T * H, D), layer.q_norm, self.args.norm_eps)
        k = dev.rms_norm(qkv[:, H : H + KVH].reshape(T * KVH, D), layer.k_norm, self.args.norm_eps)
        return torch.cat((q.reshape(T, H, D), k.reshape(T, KVH, D)), dim=1)

    def _forward_many(
        self, fused: FusedStep, tokens: Sequence[int], kv: KVRef, start: int, *, last_only: bool
    ) -> Tensor:
        """`forward` through the fused k-token step, at most its `max_tokens` tokens a call."""
        size = fused.max_tokens
        out = []
        for i in range(0, len(tokens), size):
            chunk = tokens[i : i + size]
            # last_only: the chunks before the last write their K/V and skip the head, the last makes one row
            rows = None if not last_only else 1 if i + size >= len(tokens) else 0
            out.append(fused.many(chunk, kv, start + i, rows=rows))
            self.device.kv_advance(kv, start + i + len(chunk))
        # one chunk's rows as they came: torch.cat would copy them on torch's threads, whose OpenMP workers then spin
        # for a while after it, on the core that the fused step's own worker needs for the next step
        return out[-1] if last_only or len(out) == 1 else torch.cat(out)

    def row_stats(self, rows: Tensor, until_miss: Sequence[int] = ()) -> RowStats:
        """Per row of logits (n, vocab): the first index of its largest value (argmax), that value, and the row's
        logsumexp: what greedy decoding and the per-token log-probability need. One C call through the backend's
        fused step where it has one (two torch calls cost ~20 µs a token), else torch. With `until_miss` (the draft
        a k-token step verified, row i predicting until_miss[i]) the lists may end after the first row whose argmax
        is not its draft id (greedy decoding reads no row after it)."""
        fused = self.fused
        if fused is not None and rows.dtype == torch.float32 and rows.is_contiguous() and rows.dim() == 2:
            return fused.row_stats(rows, until_miss)
        return torch_row_stats(rows)

    def verifies_in_one_call(self, n: int) -> bool:
        """Whether `forward(..., like_steps=True)` of n tokens is one call of the fused k-token step."""
        return self.fused is not None and n <= self.fused.max_tokens

    def exact_verify(self) -> bool:
        """Whether `forward(..., like_steps=True)` rows equal one-token steps bit for bit here: the fused k-token
        step, or per-op products whose rows do not depend on the other rows (torch's int8 CPU kernel; not float32
        GEMM against GEMV, whose sums run in another order). As the device declares it (`exact_rows`), else probed
        once on the first layer's weights."""
        if self._exact_verify is None:
            declared = self.device.exact_rows
            if self.fused is not None and self.fused.max_tokens >= 2:
                self._exact_verify = True
            elif declared is not None:
                self._exact_verify = declared
            else:
                dev, w = self.device, self.layers[0].qkv
                x = torch.randn(4, self.args.dim, generator=torch.Generator().manual_seed(0)).to(dev.dtype)
                with torch.inference_mode():
                    rows = torch.cat([dev.linear(x[i : i + 1], w) for i in range(len(x))])
                    self._exact_verify = bool(torch.equal(dev.linear(x, w), rows))
        return self._exact_verify

    def open_cache(self, max_tokens: int | None = None) -> KVRef:
        n = min(max_tokens or self.args.max_seq_len, self.args.max_seq_len)
        return self.device.kv_open(self.args.n_layers, self.args.n_kv_heads, self.args.head_dim, n)
