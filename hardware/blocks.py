"""GGUF block weights as a backend may keep them: the block formats (`BLOCK_FORMATS`), the 8-row interleaved
layouts the fused step's products read (`x8_interleave`, `BlockWeight.interleaved`), and `BlockWeight` itself, the
file's bytes of an (out, in) matrix that a backend reads as blocks or dequantises (`dense`). `Weight`, a tensor or a
BlockWeight, is what `Device.place` (hardware/device.py) takes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

# GGUF block formats a backend may keep as the file stores them: ggml's type number, values and bytes per block
BLOCK_FORMATS = {
    "F32": (0, 1, 4), "Q4_0": (2, 32, 18), "Q4_1": (3, 32, 20), "Q5_0": (6, 32, 22), "Q5_1": (7, 32, 24),
    "Q8_0": (8, 32, 34), "Q4_K": (12, 256, 144), "Q5_K": (13, 256, 176), "Q6_K": (14, 256, 210),
    # 8 rows interleaved at load (x8_interleave), never in a file
    "Q4_0_X8": (102, 32, 18), "Q4_1_X8": (103, 32, 20), "Q5_0_X8": (106, 32, 22), "Q8_0_X8": (108, 32, 34),
    "Q4_K_X8": (112, 256, 144), "Q5_K_X8": (113, 256, 176), "Q6_K_X8": (114, 256, 210),
}  # fmt: skip
X8_BASE = {"Q4_0_X8": "Q4_0", "Q4_1_X8": "Q4_1", "Q5_0_X8": "Q5_0", "Q8_0_X8": "Q8_0", "Q4_K_X8": "Q4_K",
           "Q5_K_X8": "Q5_K", "Q6_K_X8": "Q6_K"}  # fmt: skip  # an interleaved format's own
# bytes before a block's q (16 bytes of 4-bit q, Q8_0's 32 signed bytes): d (m, or the fifth bits)
X8_HEAD = {"Q4_0": 2, "Q4_1": 4, "Q5_0": 6, "Q8_0": 2}


# The K-quants' super-blocks as the fields the X8 layouts hold side by side, in their order there ((file offset, bytes),
# fused_kquants_x8.c): Q4_K's d, dmin, 3 words of scales and mins, then its 128 bytes of q (Q5_K: its 32 bytes of
# fifth bits first); Q6_K's 128 bytes of low bits and 64 of high bits with its 16 scales between the halves, d last.
# The q bytes go in groups of 4, each 32 bytes' groups in the order 0, 4, 1, 5, 2, 6, 3, 7: a 64-byte register of a
# group pair then holds the first 16 bytes of the 32 in its low half, the last 16 in its high half (Q6_K: two
# sub-blocks of 16, each with its own scale).
def _k_fields(kind: str) -> list[tuple[int, int]]:
    def q_bytes(at: int, chunks: int) -> list[tuple[int, int]]:
        return [(at + 32 * c + 4 * g, 4) for c in range(chunks) for g in (0, 4, 1, 5, 2, 6, 3, 7)]

    if kind in ("Q4_K", "Q5_K"):  # Q5_K: its 32 bytes of fifth bits, then the 128 of q
        return [(0, 2), (2, 2), (4, 4), (8, 4), (12, 4), *q_bytes(16, 4 if kind == "Q4_K" else 5)]
    # Q6_K in the order its product reads them, front to back: per half h of the super-block and register p, the
    # register of qh's chunk h, then those of ql's chunks 2 h and 2 h + 1; then the half's 8 scales; d last
    fields: list[tuple[int, int]] = []
    for h in range(2):
        for p in range(4):
            for at in (128 + 32 * h, 64 * h, 64 * h + 32):
                fields += [(at + 4 * p, 4), (at + 4 * (p + 4), 4)]
        fields += [(192 + s, 1) for s in range(8 * h, 8 * h + 8)]
    return [*fields, (208, 2)]


def _k_x8_order(kind: str) -> np.ndarray:
    """Byte i of a Q4_K_X8 / Q5_K_X8 / Q6_K_X8 super-block is byte order[i] of its 8 rows' super-blocks one after
    another: each field of _k_fields, the 8 rows' copies side by side."""
    size = BLOCK_FORMATS[kind][2]
    return np.array([r * size + at + i for at, width in _k_fields(kind) for r in range(8) for i in range(width)])


K_X8_ORDER = {kind: _k_x8_order(kind) for kind in ("Q4_K", "Q5_K", "Q6_K")}
# which formats a build's 8-row products take (waferline_blocks_x8()'s bits, fused.h): the 4- and 5-bit ones wherever
# there is AVX2, Q8_0 and the K-quants with AVX512-VNNI
X8_KINDS = {1: ("Q4_0", "Q4_1", "Q5_0"), 2: ("Q8_0",), 4: tuple(K_X8_ORDER)}


def x8_kinds(bits: int) -> tuple[str, ...]:
    """The formats placed 8 rows interleaved for a build whose waferline_blocks_x8() is `bits`."""
    return tuple(kind for bit, kinds in X8_KINDS.items() if bits & bit for kind in kinds)


def x8_interleave(rows: Tensor, kind: str) -> Tensor:
    """(n, row bytes) uint8 rows of Q4_0, Q4_1, Q5_0 or Q8_0, n a multiple of 8 -> the same bytes as Q4_0_X8 /
    Q4_1_X8 / Q5_0_X8 / Q8_0_X8 (n, row bytes): per group of 8 rows and per block, the 8 rows' d (Q4_1: then their
    m; Q5_0: then their fifth bits as four 64-bit byte masks, `Q5_0_X8_FIFTH`), then chunks of 32 bytes (4, Q8_0 8),
    chunk c holding bytes 4c..4c+3 of each row's q (fused_blocks_x8.c multiplies them).

    Q4_K, Q5_K and Q6_K go to Q4_K_X8 / Q5_K_X8 / Q6_K_X8 (K_X8_ORDER).

    The bytes are moved by numpy (as every BlockWeight's are at load): a few copy loops, where torch's reshape,
    permute and cat touched several MiB of libtorch's code, resident after the load (docs/engine.md)."""
    n, size = rows.shape
    if kind in K_X8_ORDER:
        return _k_x8(rows, kind, inverse=False)
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
    """x8_interleave's inverse: rows of an X8 layout (n, row bytes) -> the file's rows."""
    n, size = rows.shape
    if X8_BASE[kind] in K_X8_ORDER:
        return _k_x8(rows, X8_BASE[kind], inverse=True)
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


def _k_x8(rows: Tensor, kind: str, inverse: bool) -> Tensor:
    """Q4_K / Q6_K rows (n, row bytes) in their X8 layout (K_X8_ORDER), or back (inverse)."""
    n, size = rows.shape
    bs, order = BLOCK_FORMATS[kind][2], K_X8_ORDER[kind]
    if not inverse:  # group, row, super-block, bytes -> group, super-block, the 8 rows' bytes, reordered
        side = rows.numpy().reshape(n // 8, 8, size // bs, bs).transpose(0, 2, 1, 3).reshape(n // 8, size // bs, -1)
        return torch.from_numpy(np.ascontiguousarray(side[..., order]).reshape(n, size))
    side = np.empty((n // 8, size // bs, 8 * bs), np.uint8)
    side[..., order] = rows.numpy().reshape(n // 8, size // bs, 8 * bs)
    return torch.from_numpy(
        np.ascontiguousarray(side.reshape(n // 8, size // bs, 8, bs).transpose(0, 2, 1, 3)).reshape(n, size)
    )


def _joined(parts: Sequence[Tensor], place: Callable[[int], Tensor | None] | None = None) -> Tensor:
    """1-D uint8 CPU tensors one after another, by numpy (see x8_interleave): into `place(nbytes)` where that gives
    a uint8 tensor of those bytes (a caller's memory, e.g. on 2 MB pages: one copy, not two), else a new tensor."""
    arrays = [p.numpy().reshape(-1) for p in parts]
    out = place(sum(a.size for a in arrays)) if place is not None else None
    if out is None:
        return torch.from_numpy(np.concatenate(arrays))
    np.concatenate(arrays, out=out.numpy())
    return out


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

    def interleaved(
        self, kinds: Sequence[str] = ("Q4_0", "Q4_1", "Q5_0"), place: Callable[[int], Tensor | None] | None = None
    ) -> BlockWeight:
        """The same weight with each segment of one of `kinds` (Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K) placed by
        whole groups of 8 rows (where the segment starts at a multiple of 8) as Q4_0_X8 / ... (x8_interleave), the
        rest as it is: the same bytes, moved (into `place(nbytes)` where given and it gives memory, see _joined)."""
        parts: list[Tensor] = []
        segments: list[tuple[str, int]] = []
        at = row = 0
        for kind, n in self.segments:
            size = self.row_bytes(kind)
            part = self.data[at : at + n * size].view(n, size)
            whole = n // 8 * 8 if (kind in X8_HEAD or kind in K_X8_ORDER) and kind in kinds and row % 8 == 0 else 0
            if whole:
                parts.append(x8_interleave(part[:whole], kind).view(-1))
                segments.append((f"{kind}_X8", whole))
            if n > whole:
                parts.append(part[whole:].reshape(-1))
                segments.append((kind, n - whole))
            at, row = at + n * size, row + n
        if tuple(segments) == self.segments:
            return self  # nothing to move: the same bytes, not a copy (a tied head's are the table's)
        return BlockWeight(_joined(parts, place), self.shape, tuple(segments))

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
