"""The seam between the engine and the hardware: the per-token operations every backend provides.

The engine's transformer is written once against these calls. Activations are plain torch tensors shaped
(tokens, features); weights and KV caches live behind opaque handles that only the backend that made them may use.
A backend may fuse or compile behind these calls; if a call needs more, change the seam for every backend at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch
from torch import Tensor


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


# GGUF block formats a backend may keep as the file stores them: ggml's type number, values and bytes per block
BLOCK_FORMATS = {
    "F32": (0, 1, 4), "Q4_0": (2, 32, 18), "Q4_1": (3, 32, 20), "Q5_0": (6, 32, 22), "Q5_1": (7, 32, 24),
    "Q8_0": (8, 32, 34), "Q4_K": (12, 256, 144), "Q5_K": (13, 256, 176), "Q6_K": (14, 256, 210),
    # 8 rows interleaved at load (x8_interleave), never in a file
    "Q4_0_X8": (102, 32, 18), "Q4_1_X8": (103, 32, 20), "Q5_0_X8": (106, 32, 22), "Q8_0_X8": (108, 32, 34),
}  # fmt: skip
X8_BASE = {"Q4_0_X8": "Q4_0", "Q4_1_X8": "Q4_1", "Q5_0_X8": "Q5_0", "Q8_0_X8": "Q8_0"}  # an interleaved format's own
# bytes before a block's q (16 bytes of 4-bit q, Q8_0's 32 signed bytes): d (m, or the fifth bits)
X8_HEAD = {"Q4_0": 2, "Q4_1": 4, "Q5_0": 6, "Q8_0": 2}
# which formats a build's 8-row products take (waferline_blocks_x8()'s bits, fused.h): the 4- and 5-bit ones wherever
# there is AVX2, Q8_0 with AVX512-VNNI
X8_KINDS = {1: ("Q4_0", "Q4_1", "Q5_0"), 2: ("Q8_0",)}


def x8_kinds(bits: int) -> tuple[str, ...]:
    """The formats placed 8 rows interleaved for a build whose waferline_blocks_x8() is `bits`."""
    return tuple(kind for bit, kinds in X8_KINDS.items() if bits & bit for kind in kinds)


def x8_interleave(rows: Tensor, kind: str) -> Tensor:
    """(n, row bytes) uint8 rows of Q4_0, Q4_1, Q5_0 or Q8_0, n a multiple of 8 -> the same bytes as Q4_0_X8 /
    Q4_1_X8 / Q5_0_X8 / Q8_0_X8 (n, row bytes): per group of 8 rows and per block, the 8 rows' d (Q4_1: then their
    m; Q5_0: then their fifth bits as four 64-bit byte masks, `Q5_0_X8_FIFTH`), then chunks of 32 bytes (4, Q8_0 8),
    chunk c holding bytes 4c..4c+3 of each row's q (fused_blocks_x8.c multiplies them).

    The bytes are moved by numpy (as every BlockWeight's are at load): a few copy loops, where torch's reshape,
    permute and cat touched several MiB of libtorch's code, resident after the load (docs/engine.md)."""
    n, size = rows.shape
    head = X8_HEAD[kind]
    bs = BLOCK_FORMATS[kind][2]
    chunks = (bs - head) // 4
    b = rows.numpy().reshape(n // 8, 8, size // bs, bs).transpose(0, 2, 1, 3)  # group, block, row, block bytes
    heads = b[..., :head].reshape(n // 8, size // bs, 8, head // 2, 2).transpose(0, 1, 3, 2, 4)  # d's, then m's
    q = b[..., head:].reshape(n // 8, size // bs, 8, chunks, 4).transpose(0, 1, 3, 2, 4)  # chunk c: each row's 4 bytes
    out = np.empty((n // 8, size // bs, bs * 8), np.uint8)
    out[..., : head * 8] = heads.reshape(n // 8, size // bs, head * 8)
    out[..., head * 8 :] = q.reshape(n // 8, size // bs, 32 * chunks)
    if kind == "Q5_0":  # the 8 rows' fifth bits, 16 + 16 a row, moved bit by bit into the product's masks
        bits = np.unpackbits(out[..., 16:48], axis=-1, bitorder="little")
        out[..., 16:48] = np.packbits(bits[..., Q5_0_X8_FIFTH], axis=-1, bitorder="little")
    return torch.from_numpy(out.reshape(n, size))


def _q5_0_x8_fifth() -> np.ndarray:
    """Where Q5_0_X8's fifth bits come from: mask bit i (of the 256 after the group's 8 d's, 64 a mask) is bit
    FIFTH[i] of the 8 rows' low then high 16 fifth bits (16 a row, row r's low 16 at bit 16 r, its high 16 at
    128 + 16 r). Mask m = 2 h + part covers chunks 2 h and 2 h + 1 of the block's nibbles (part 0: the low nibbles,
    inputs 4 c + k; part 1: the high ones, 16 + 4 c + k): its bit 4 L + k is row L's input k of chunk 2 h for L < 8,
    row L - 8's of chunk 2 h + 1 for L >= 8, the byte a 512-bit register of those two chunks holds there
    (fused_blocks_x8.c adds 16 to the bytes a mask selects; AVX2 takes each chunk's 32 bits)."""
    fifth = np.empty(256, np.int64)
    for m in range(4):
        h, part = divmod(m, 2)
        for j in range(64):
            lane, k = divmod(j, 4)
            row, c = lane % 8, 2 * h + lane // 8
            fifth[64 * m + j] = 128 * part + 16 * row + 4 * c + k
    return fifth


Q5_0_X8_FIFTH = _q5_0_x8_fifth()


def x8_deinterleave(rows: Tensor, kind: str) -> Tensor:
    """x8_interleave's inverse: Q4_0_X8 / Q4_1_X8 / Q5_0_X8 / Q8_0_X8 rows (n, row bytes) -> the file's rows."""
    n, size = rows.shape
    head = X8_HEAD[X8_BASE[kind]]
    bs = BLOCK_FORMATS[kind][2]
    chunks = (bs - head) // 4
    g = rows.numpy().reshape(n // 8, size // bs, 8 * bs)
    if kind == "Q5_0_X8":  # the fifth bits back out of their masks
        g = g.copy()
        bits = np.empty((*g.shape[:-1], 256), np.uint8)
        bits[..., Q5_0_X8_FIFTH] = np.unpackbits(g[..., 16:48], axis=-1, bitorder="little")
        g[..., 16:48] = np.packbits(bits, axis=-1, bitorder="little")
    heads = g[..., : 8 * head].reshape(n // 8, size // bs, head // 2, 8, 2).transpose(0, 1, 3, 2, 4)
    q = g[..., 8 * head :].reshape(n // 8, size // bs, chunks, 8, 4).transpose(0, 1, 3, 2, 4)
    blocks = np.empty((n // 8, size // bs, 8, bs), np.uint8)
    blocks[..., :head] = heads.reshape(n // 8, size // bs, 8, head)
    blocks[..., head:] = q.reshape(n // 8, size // bs, 8, bs - head)
    return torch.from_numpy(np.ascontiguousarray(blocks.transpose(0, 2, 1, 3)).reshape(n, size))


def _joined(parts: Sequence[Tensor]) -> Tensor:
    """1-D uint8 CPU tensors one after another, by numpy (see x8_interleave)."""
    return torch.from_numpy(np.concatenate([p.numpy().reshape(-1) for p in parts]))


@dataclass(eq=False)
class BlockWeight:
    """An (out, in) weight in GGUF block formats, kept as the file's bytes rather than expanded: `data` is its rows'
    bytes one after another (uint8, 1-D), `segments` says which rows are in which format ((format, rows), ...: a
    fused q/k/v may mix them). A backend that reads blocks keeps it (the torch CPU backend's fused step,
    fused_blocks.c); any other calls `dense()`, which dequantises it, as `gguf` does, to float32."""

    data: Tensor
    shape: tuple[int, int]
    segments: tuple[tuple[str, int], ...]

    def __post_init__(self) -> None:
        assert sum(rows for _, rows in self.segments) == self.shape[0], "segments must cover every row"
        assert self.data.dtype == torch.uint8 and self.data.dim() == 1, "the rows' bytes, uint8, 1-D"
        assert self.data.numel() == sum(rows * self.row_bytes(kind) for kind, rows in self.segments)

    def row_bytes(self, kind: str) -> int:
        _, values, size = BLOCK_FORMATS[kind]
        assert self.shape[1] % values == 0, f"{self.shape[1]} inputs are not whole {kind} blocks"
        return self.shape[1] // values * size

    @property
    def kind(self) -> str:
        """The format of a weight of one segment."""
        assert len(self.segments) == 1, "a weight of several formats has no one kind"
        return self.segments[0][0]

    @property
    def nbytes(self) -> int:
        return self.data.numel()

    def rows(self) -> Tensor:
        """(out, row bytes) uint8, a view: the rows of a weight of one format."""
        return self.data.view(self.shape[0], self.row_bytes(self.kind))

    def with_rows(self, rows: Tensor) -> BlockWeight:
        """The same format with its rows replaced by `rows` (out', row bytes), e.g. reordered."""
        data = torch.from_numpy(np.ascontiguousarray(rows.numpy()).reshape(-1))  # a copy only if not contiguous
        return BlockWeight(data, (rows.shape[0], self.shape[1]), ((self.kind, rows.shape[0]),))

    def interleaved(self, kinds: Sequence[str] = ("Q4_0", "Q4_1", "Q5_0")) -> BlockWeight:
        """The same weight with each segment of one of `kinds` (Q4_0, Q4_1, Q5_0, Q8_0) placed by whole groups of 8
        rows (where the segment starts at a multiple of 8) as Q4_0_X8 / ... (x8_interleave), the rest as it is: the
        same bytes, moved."""
        parts: list[Tensor] = []
        segments: list[tuple[str, int]] = []
        at = row = 0
        for kind, n in self.segments:
            size = self.row_bytes(kind)
            part = self.data[at : at + n * size].view(n, size)
            whole = n // 8 * 8 if kind in X8_HEAD and kind in kinds and row % 8 == 0 else 0
            if whole:
                parts.append(x8_interleave(part[:whole], kind).view(-1))
                segments.append((f"{kind}_X8", whole))
            if n > whole:
                parts.append(part[whole:].reshape(-1))
                segments.append((kind, n - whole))
            at, row = at + n * size, row + n
        if tuple(segments) == self.segments:
            return self  # nothing to move: the same bytes, not a copy (a tied head's are the table's)
        return BlockWeight(_joined(parts), self.shape, tuple(segments))

    @staticmethod
    def cat(parts: Sequence[BlockWeight]) -> BlockWeight:
        """Rows of `parts` one after another (torch.cat along the rows), one copy of their bytes."""
        assert len({p.shape[1] for p in parts}) == 1, "parts of one matrix share their inputs"
        segments: list[tuple[str, int]] = []
        for kind, rows in (seg for p in parts for seg in p.segments):
            if segments and segments[-1][0] == kind:
                segments[-1] = (kind, segments[-1][1] + rows)
            else:
                segments.append((kind, rows))
        data = _joined([p.data for p in parts])
        return BlockWeight(data, (sum(p.shape[0] for p in parts), parts[0].shape[1]), tuple(segments))

    def dequantize(self, rows: Tensor | None = None) -> Tensor:
        """(out, in) float32, or only the rows `rows` (int64 indices) of a weight of one format."""
        from gguf import GGMLQuantizationType, quants

        out: list[Tensor] = []
        at = 0
        for kind, n in [(self.kind, self.shape[0])] if rows is not None else self.segments:
            size = self.row_bytes(kind)
            part = self.data[at : at + n * size].view(n, size)
            at += n * size
            if rows is not None and kind in X8_BASE:  # the groups of 8 that hold the rows, in the file's order
                groups, lane = torch.unique(rows // 8, return_inverse=True)
                grouped = part.view(n // 8, 8 * size)[groups].view(-1, size)
                part, kind = x8_deinterleave(grouped, kind)[lane * 8 + rows % 8], X8_BASE[kind]
            elif rows is not None:
                part = part[rows]
            if kind == "F32":
                out.append(part.contiguous().view(torch.float32).clone())
                continue
            if kind in X8_BASE:  # whole groups of 8 (rows=None: the kind's one segment), put back in the file's order
                part, kind = x8_deinterleave(part, kind), X8_BASE[kind]
            array = quants.dequantize(part.numpy(), GGMLQuantizationType[kind])
            out.append(torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32)))
        return torch.cat(out).reshape(-1, self.shape[1])


Weight = Tensor | BlockWeight  # what `Device.place` takes


def dense(weight: Weight) -> Tensor:
    """The weight as a tensor: a BlockWeight dequantised to float32, a tensor as it is."""
    return weight.dequantize() if isinstance(weight, BlockWeight) else weight


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
