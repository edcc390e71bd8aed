"""The seam between the engine and the hardware: the per-token operations every backend provides.

The engine's transformer is written once against these calls. Activations are plain torch tensors shaped
(tokens, features); weights and KV caches live behind opaque handles that only the backend that made them may use.
A backend may fuse or compile behind these calls; if a call needs more, change the seam for every backend at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import torch
from torch import Tensor

from waferline.hardware.blocks import Weight


@dataclass(eq=False)
class WeightRef:
    """A tensor placed on a device once, at load. `payload` belongs to the backend that placed it."""

    name: str
    shape: tuple[int, ...]
    dtype: torch.dtype
    payload: Any = field(repr=False, default=None)

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n


@dataclass(eq=False)
class KVRef:
    """One session's key/value cache: `layers` x (max_tokens, kv_heads, head_dim) for keys and for values.

    `length` is how many positions hold valid keys and values; positions at or past it are free.
    """

    layers: int
    kv_heads: int
    head_dim: int
    max_tokens: int
    length: int = 0
    payload: Any = field(repr=False, default=None)
    dtype: torch.dtype = torch.float32  # the element type of the stored keys and values

    @property
    def bytes_per_token(self) -> int:
        """Bytes one position costs across all layers, keys and values."""
        return 2 * self.layers * self.kv_heads * self.head_dim * self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        """Bytes the whole preallocated cache holds (every position, used or not)."""
        return self.bytes_per_token * self.max_tokens


@dataclass
class LayerWeights:
    """One decoder layer's placed weights."""

    attn_norm: WeightRef
    qkv: WeightRef  # fused (q + 2 kv, dim)
    qkv_bias: WeightRef | None
    o: WeightRef
    mlp_norm: WeightRef
    gate_up: WeightRef  # fused (2 * inter, dim)
    down: WeightRef
    q_norm: WeightRef | None = None  # Qwen3: RMSNorm of each query head (head_dim,), before the rotary embedding
    k_norm: WeightRef | None = None  # ... and of each key head


@dataclass(kw_only=True)
class DecoderPlan:
    """A whole placed decoder, for backends that run a one-token step in one call (`Device.fuse_decoder`)."""

    dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab: int
    max_seq_len: int
    norm_eps: float
    embedding: WeightRef
    layers: list[LayerWeights]
    norm: WeightRef
    lm_head: WeightRef
    rope_cos: WeightRef  # (max_seq_len, head_dim // 2), role 'table'
    rope_sin: WeightRef


@dataclass(frozen=True)
class Placement:
    """What a device holds after load: the weight format it placed (a name in hardware/registry.py's
    WEIGHT_FORMATS), the dtype its activations compute in, and the bytes its placed weights take."""

    weights: str
    dtype: torch.dtype
    weight_bytes: int


RowStats = tuple[list[int], list[float], list[float]]  # per row of logits: argmax, largest value, logsumexp


class FusedStep(Protocol):
    """A backend's whole decoder step in one call (`Device.fuse_decoder`): the CPU hot path of the default config,
    where the engine makes no per-op call per token. Every method gives what the per-op calls give for the same
    placed model; the engine picks between them once per forward (`Transformer.forward`).

    - `step(token, kv, pos)`: logits (1, vocab) float32 for one token at `pos`; writes its keys and values there,
      and the caller advances the cache (`kv_advance`), as after the per-op calls.
    - `many(tokens, kv, pos)`: logits (T, vocab) for 1 <= T <= `max_tokens` tokens at once, every weight read once,
      each row bit for bit a one-token step's (the k tokens of a speculative draft; a prompt, `prefill_max`).
    - `row_stats(rows, until_miss)`: per row of float32 logits (n, vocab) its argmax (first largest index), that
      value and its logsumexp, what generation reads for each token (`torch_row_stats` elsewhere); given
      `until_miss` (the draft a k-token step verified, row i predicting until_miss[i]) it may stop after the first
      row whose argmax is not its draft id, the last row greedy decoding reads.
    """

    # Threads of a one-token step, and of a step of BATCH_TOKENS or more (a prompt's chunk, a draft's verification):
    # set per model (engine/loader.py `set_threads`), so that two models in one process keep their own; 0: torch's
    # intra-op threads.
    threads: int
    batch_threads: int

    def threads_for(self, n: int) -> int:
        """The threads a step of n tokens runs on."""
        ...

    @property
    def max_tokens(self) -> int:
        """Tokens one call of `many` takes."""
        ...

    @property
    def prefill_max(self) -> int | None:
        """Prompt tokens up to which `many` (at most `max_tokens` a call) beats the per-op calls for a prefill:
        0 never, None any length."""
        ...

    def tune(self) -> None:
        """Whatever the step times on this machine for its threads, done now (after the threads are set, at load)
        rather than within its first call; a first call after a change of threads does it again."""
        ...

    def step(self, token: int, kv: KVRef, pos: int) -> Tensor: ...
    def many(self, tokens: Sequence[int], kv: KVRef, pos: int, *, rows: int | None = None) -> Tensor: ...
    def row_stats(self, rows: Tensor, until_miss: Sequence[int] = ()) -> RowStats: ...


def torch_row_stats(rows: Tensor) -> RowStats:
    """`row_stats` in torch, for any backend: per row of logits (n, vocab), its argmax (the first largest index),
    that value, and its logsumexp, in float32."""
    r = rows.float()
    top = r.argmax(dim=-1)
    return top.tolist(), r.gather(1, top[:, None])[:, 0].tolist(), torch.logsumexp(r, dim=-1).tolist()


@runtime_checkable
class Device(Protocol):
    """What the engine needs from hardware to run a Llama/Qwen2/Qwen3 decoder, one sequence at a time."""

    name: str
    dtype: torch.dtype  # the activation dtype the backend computes in

    @property
    def exact_rows(self) -> bool | None:
        """Whether the per-op calls on T rows give every row bit for bit what a one-token call gives. The engine
        then verifies a speculative draft with attention token by token only where that keeps rows exact, and
        otherwise in one call per layer over all T queries (the k-token step as the hardware runs it). None: the
        backend does not say, and the engine probes (`Transformer.exact_verify`); a backend that counts what it does
        (the wafer emulator) declares it, since a probe would be charged to its counters."""
        ...

    # -- placement, once per tensor at load ------------------------------------------------------------------------
    def place(self, name: str, weight: Weight, *, role: str = "linear") -> WeightRef:
        """Take ownership of `weight`.

        role: 'linear' (out, in), 'embedding' (vocab, dim), 'norm' (dim,), 'bias' (out,), 'table' (positions, d).
        A BlockWeight (GGUF blocks) is kept as it is by a backend that reads them, else `dense(weight)` is placed.
        """
        ...

    # -- KV pages, per session -------------------------------------------------------------------------------------
    def kv_open(self, layers: int, kv_heads: int, head_dim: int, max_tokens: int) -> KVRef: ...
    def kv_truncate(self, kv: KVRef, length: int) -> None:
        """Forget every position at or after `length` (prefix reuse keeps the first `length`)."""
        ...

    def kv_close(self, kv: KVRef) -> None: ...

    # -- per-step operations on activations x: (tokens, dim) ----------------------------------------------------
    def embed(self, table: WeightRef, tokens: Tensor) -> Tensor:
        """tokens: (T,) int64 -> (T, dim)."""
        ...

    def rms_norm(self, x: Tensor, weight: WeightRef, eps: float) -> Tensor: ...

    def linear(self, x: Tensor, weight: WeightRef, bias: WeightRef | None = None) -> Tensor:
        """x: (T, in) -> (T, out) = x @ W.T + b."""
        ...

    def rotary(self, x: Tensor, cos: WeightRef, sin: WeightRef, start: int) -> Tensor:
        """Rotate x: (T, heads, head_dim) for positions start..start+T-1, half-split (NeoX/Llama HF) layout.

        cos, sin: placed tables (max_positions, head_dim // 2) with role 'table'.
        """
        ...

    def attend(self, kv: KVRef, layer: int, q: Tensor, k: Tensor, v: Tensor, start: int) -> Tensor:
        """Write k, v (T, kv_heads, head_dim) at positions start..start+T-1 of `layer`, then attend causally.

        q: (T, heads, head_dim) -> (T, heads * head_dim). Grouped-query: heads is a multiple of kv_heads.
        The caller advances kv.length after the last layer (see `kv_advance`).
        """
        ...

    def kv_advance(self, kv: KVRef, length: int) -> None:
        """Mark positions < length as valid after a forward step wrote them."""
        ...

    def swiglu(self, gate: Tensor, up: Tensor) -> Tensor:
        """silu(gate) * up, elementwise."""
        ...

    def add(self, x: Tensor, y: Tensor) -> Tensor:
        """The residual add."""
        ...

    # -- a whole step ------------------------------------------------------------------------------------------------
    def fuse_decoder(self, plan: DecoderPlan) -> FusedStep | None:
        """A one-token step equal to the per-op calls for this placed model, or None: the engine then makes the
        per-op calls. Called once after load; a backend that counts or emulates per op returns None."""
        ...

    # -- accounting ------------------------------------------------------------------------------------------------
    def placement(self) -> Placement:
        """What was placed so far: weight format, activation dtype, bytes."""
        ...

    def counters(self) -> dict[str, float]: ...
    def reset_counters(self) -> None: ...
