"""The torch backend's fused decode step: one C call (fused_library.py builds and loads the C) for a whole token.

Decoding a small model one token at a time is dispatch-bound in eager PyTorch (~150 calls of 3-40 µs for a
4-layer model, against ~0.1 ms of arithmetic), and a large one is bound by streaming its weights, which torch's
int8 kernel does at about half the machine's read speed. So on the CPU the backend runs the whole step in one C call
that reads the same placed weights and writes the same KV cache tensor as the per-op path, on as many threads as
torch is set to use (`many` runs up to 16 tokens in one call, to verify a speculative draft). Prefill (many tokens
at once, compute-bound) stays on the per-op path.

Here: `CompiledStep` (the FusedStep of hardware/device.py), `build` (the pointer table and `dims` of one placed
model, in the layout fused_library.py checks), the weight layouts it makes (packed int8, GGUF segment tables), and
`blocks_linear`, the GGUF block product alone (for tests and benchmarks).
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from waferline.hardware.blocks import BLOCK_FORMATS, BlockWeight
from waferline.hardware.device import DecoderPlan, KVRef, WeightRef, torch_row_stats
from waferline.hardware.torch_backend import fused_library, hugepages, prefetch
from waferline.hardware.torch_backend.fused_library import (
    DIMS,
    EMB_BLOCKS,
    GLOBAL_PTRS,
    INT8_VNNI,
    KV_BF16,
    KV_F32,
    LAYER_PTRS,
    W_BLOCKS,
    W_F32,
    W_INT8,
    W_INT8_PACKED,
)
from waferline.hardware.torch_backend.kernels import Int8Linear

# int8 weights up to this many bytes are also kept packed for the product that needs no reduction (fused_packed.c),
# which makes a k-token step's arithmetic ~2x faster; a larger model keeps only the rows (no second copy of them)
PACK_LIMIT_BYTES = 64 << 20
# A prompt runs through `many`, 16 tokens a call, rather than the per-op calls: int8 at any length (its products take
# 8 tokens per read of the weights: 16 tokens at 100 cached positions 0.9 ms against 4.4 per-op for the shipped model,
# 256 tokens 12.8 against 47; the 0.5B shape 64 tokens 0.39 s against 0.99), float32 up to this many tokens (its
# products read the weights once per token: 8 tokens 1.8 ms against 2.4, 16 tokens 2.95 against 2.7). Measured
# 2026-12-02, one thread, docs/engine.md ("Prefill through the fused step").
FLOAT_PREFILL_MAX = 8
# A step of this many tokens or more runs on `batch_threads`: its products are bound by arithmetic, which a second
# core shares (a one-token step streams the weights, and waits at each product for the slower thread)
BATCH_TOKENS = 4


def packed_product_pays() -> bool:
    """Whether the packed int8 layout is the faster one here: with VNNI. Without it the packed product has no vector
    form (its pairs of products would saturate AVX2's maddubs) while the row layout's has one (fused_linear.c)."""
    lib = fused_library.library()
    return lib is not None and bool(lib.waferline_int8_features() & INT8_VNNI)


@dataclass(eq=False)
class CompiledStep:
    """The compiled step for one placed model, the torch CPU backend's `FusedStep` (hardware/device.py):
    `step(token, kv, pos) -> logits (1, vocab)` float32, and `many(tokens, kv, pos) -> logits (T, vocab)` for up to
    `max_tokens` tokens at once (speculative verification, prefill), whose rows equal T one-token steps bit for bit
    while every weight is read once.

    Each call runs on `threads` threads, or `batch_threads` for BATCH_TOKENS tokens or more (0: torch's intra-op
    threads; the caller's and worker threads that fused_pool.c starts once and keeps), with the same result for any
    number. Not reentrant: the step works in one scratch buffer per model. The engine touches a model from one
    thread only (the job queue's, engine/jobs.py), as the per-op path also assumes for its KV caches.
    """

    lib: ctypes.CDLL
    dims: Tensor  # int64, DIMS order
    eps: Tensor  # float32 (1,)
    ptrs: Any  # ctypes array of void pointers, GLOBAL_PTRS then LAYER_PTRS per layer
    keep: list[Tensor]  # the tensors `ptrs` points into (float32 copies of norms, scales, biases; the scratch)
    kv_dtype: torch.dtype
    vocab: int
    max_tokens: int = 1  # tokens one call of `many` takes (the C file's STEP_MAX_TOKENS)
    prefill_max: int | None = 0  # prompt tokens up to which `many` beats the per-op calls (None: any; `build`)
    _stats: tuple[Any, ...] | None = None  # row_stats' output arrays and its draft's ids
    _ids: Any = None  # many's token ids, a ctypes int64 array kept between calls (torch.tensor of a list: ~4 µs)
    threads: int = 0  # a one-token step's threads (0: torch.get_num_threads())
    batch_threads: int = 0  # a step of BATCH_TOKENS or more (0: as `threads`)
    blocks: bool = False  # GGUF block weights (W_BLOCKS): the products that prefetch in software
    _prefetch_by_threads: dict[int, bool] = field(default_factory=dict)  # chosen per one-token step's threads

    def threads_for(self, n: int) -> int:
        """The threads a step of n tokens runs on."""
        chosen = self.batch_threads if n >= BATCH_TOKENS and self.batch_threads > 0 else self.threads
        return chosen if chosen > 0 else torch.get_num_threads()

    def _cache(self, kv: KVRef) -> Tensor:
        cache = kv.payload
        assert cache is not None, "this KV cache was closed"
        data: Tensor = cache.data
        assert data.dtype == self.kv_dtype and data.is_contiguous(), "a KV cache made for another model"
        return data

    @property
    def prefetch(self) -> bool | None:
        """The products' software prefetch (prefetch.py) for the one-token step's threads now set: None until it is
        chosen for them; True, the library's default, unmeasured, without block weights (their products never
        prefetch)."""
        return self._prefetch_by_threads.get(self.threads_for(1)) if self.blocks else True

    def tune(self) -> None:
        """Choose the prefetch for the threads now set (the loader calls this once it has set them), rather than
        in the first call."""
        if self.blocks:
            self._chosen_prefetch()

    def _prefetch(self) -> None:
        """Before each call: a block model applies its prefetch setting (the library's is the process's)."""
        if self.blocks:
            prefetch.apply(self.lib, self._chosen_prefetch())

    def _chosen_prefetch(self) -> bool:
        """A block model's prefetch for the one-token step's threads, chosen the first time by timing one-token
        steps on a private one-position cache (prefetch.py: 17 to 65 steps, ~0.3 s for SmolLM2, fewer rounds once a
        large model's steps are long)."""
        threads = self.threads_for(1)
        chosen = self._prefetch_by_threads.get(threads)
        if chosen is None:
            shape = dict(zip(DIMS, self.dims.tolist(), strict=True))
            cache = torch.zeros(shape["layers"], 2, shape["kv_heads"], 1, shape["head_dim"], dtype=self.kv_dtype)
            out = torch.empty(1, self.vocab, dtype=torch.float32)

            def one_step() -> None:
                rc = self._call_step(cache, 0, 0, out)
                assert rc == 0, "the prefetch probe's step was refused"

            chosen = self._prefetch_by_threads[threads] = prefetch.choose(self.lib, one_step)
        return chosen

    def _call_step(self, data: Tensor, token: int, pos: int, logits: Tensor) -> int:
        max_t = data.shape[3]  # (layers, 2, kv_heads, max_tokens, head_dim)
        return int(
            self.lib.waferline_step(
                self.dims.data_ptr(), self.eps.data_ptr(), self.ptrs, data.data_ptr(), max_t, token, pos,
                logits.data_ptr(), self.threads_for(1),
            )
        )  # fmt: skip

    def step(self, token: int, kv: KVRef, pos: int) -> Tensor:
        data = self._cache(kv)
        self._prefetch()
        logits = torch.empty(1, self.vocab, dtype=torch.float32)
        max_t = data.shape[3]
        rc = self._call_step(data, token, pos, logits)
        if rc != 0:
            raise ValueError(f"fused step refused token {token} at position {pos} (vocab {self.vocab}, cache {max_t})")
        return logits

    def row_stats(self, rows: Tensor, until_miss: Sequence[int] = ()) -> tuple[list[int], list[float], list[float]]:
        """Per row of `rows` (n, vocab) float32: the index of its first largest value (torch's argmax), that value,
        and the row's logsumexp, in one C call. Rows whose largest value is not finite (NaN, all -inf) get torch's
        answers. With `until_miss` (the draft the rows verify: row i predicting until_miss[i]) only the rows up to
        the first whose argmax is not its draft id, which are all greedy decoding reads."""
        n = rows.shape[0]
        assert rows.dim() == 2 and rows.dtype == torch.float32 and rows.is_contiguous(), "float32 (n, vocab) rows"
        n_until = min(len(until_miss), n - 1)
        if self._stats is None or len(self._stats[0]) < n:  # kept between calls: a ctypes array costs ~1 µs
            size = max(n, 16)
            self._stats = tuple((t * size)() for t in (ctypes.c_int64, ctypes.c_float, ctypes.c_float, ctypes.c_int64))
        top, mx, lse, draft = self._stats
        if n_until:
            draft[:n_until] = until_miss[:n_until]
        done = self.lib.waferline_row_stats(rows.data_ptr(), n, rows.shape[1], top, mx, lse, draft, n_until)
        tops, maxes, lses = top[:done], mx[:done], lse[:done]
        for i, t in enumerate(tops):
            if t < 0:
                (tops[i],), (maxes[i],), (lses[i],) = torch_row_stats(rows[i : i + 1])
        if done < n and tops[-1] == until_miss[done - 1]:  # torch's answer for a non-finite row held the draft
            more = torch_row_stats(rows[done:])
            tops, maxes, lses = tops + more[0], maxes + more[1], lses + more[2]
        return tops, maxes, lses

    def many(self, tokens: Sequence[int], kv: KVRef, pos: int, *, rows: int | None = None) -> Tensor:
        """Run the tokens at pos.. through the step: the logits of all of them (n, vocab), or of the last `rows`
        (rows, vocab; 0: none, the head skipped)."""
        data = self._cache(kv)
        self._prefetch()
        n, max_t, rc = len(tokens), data.shape[3], -1
        if 0 < n <= self.max_tokens:
            if self._ids is None:
                self._ids = (ctypes.c_int64 * self.max_tokens)()
            self._ids[:n] = tokens
            rows = n if rows is None else rows
            logits = torch.empty(max(rows, 0), self.vocab, dtype=torch.float32)
            rc = self.lib.waferline_steps(
                self.dims.data_ptr(), self.eps.data_ptr(), self.ptrs, data.data_ptr(), max_t, self._ids, n, pos,
                logits.data_ptr(), rows, self.threads_for(n),
            )  # fmt: skip
        if rc != 0:
            raise ValueError(
                f"fused step refused {n} tokens at position {pos} (at most {self.max_tokens}, vocab {self.vocab}, "
                f"cache {max_t})"
            )
        return logits


def _zeroed_pages(floats: int) -> Tensor:
    """`floats` zeros in their own anonymous mapping: the kernel gives its pages zeroed on first touch, so the step
    scratch's attention scores, sized for the context's every position, are resident only as far as a session's
    positions reach (a 8,192-position SmolLM2 step: 5.2 MB zeroed by torch.zeros, a few hundred KB touched)."""
    import mmap

    pages = mmap.mmap(-1, max(floats, 1) * 4)
    return torch.frombuffer(pages, dtype=torch.float32, count=floats)


def build(plan: DecoderPlan, *, weights: str, dtype: torch.dtype) -> CompiledStep | str:
    """A CompiledStep for `plan` as the torch CPU backend placed it, or why there is none (a sentence for the log)."""
    if fused_library.disabled_by_env():
        return "WAFERLINE_FUSED=0"
    if dtype not in (torch.float32, torch.bfloat16) or (weights == "float" and dtype != torch.float32):
        # bfloat16 float weights are packed for oneDNN, float16 has no kernel here
        return f"it runs float32 and int8 weights, not {str(dtype).removeprefix('torch.')}"
    lib = fused_library.library()
    if lib is None:
        return f"it could not be compiled ({fused_library._library_error})"
    keep: list[Tensor] = []

    def f32(ref: WeightRef | None, *, norm: bool = False) -> int:
        if ref is None:
            return 0
        t = ref.payload
        t = (t[: ref.shape[0]] if norm else t).float().contiguous()  # norms are stored doubled (kernels.norm_weight)
        keep.append(t)
        return t.data_ptr()

    matrices = [plan.lm_head, *(m for layer in plan.layers for m in (layer.qkv, layer.o, layer.gate_up, layer.down))]
    blocks = any(isinstance(m.payload, BlockWeight) for m in matrices)
    packed = (
        not blocks
        and weights == "int8"
        and packed_product_pays()
        and sum(_int8_bytes(m) for m in matrices) <= PACK_LIMIT_BYTES
    )

    arena = hugepages.Arena()

    def matrix(ref: WeightRef) -> list[int]:
        """weights, per-row scales and per-row sums (the last two only for int8; no sums when packed); for GGUF
        blocks their bytes and segment table (a matrix of a block model that is not in blocks: float32 rows)."""
        w = ref.payload
        if blocks:
            if not isinstance(w, BlockWeight):
                dense = w.dequantize() if isinstance(w, Int8Linear) else w.float().t()
                rows = dense.contiguous().view(torch.uint8).view(-1)
                w = BlockWeight(rows, (ref.shape[0], ref.shape[1]), (("F32", ref.shape[0]),))
            table = segment_table(w)
            keep.extend((w.data, table))
            return [w.data.data_ptr(), table.data_ptr(), 0]
        if isinstance(w, Int8Linear):
            assert weights == "int8"
            scale = w.scale.float().contiguous()
            if packed:
                q = pack_int8(w.q)
                keep.extend((q, scale))
                return [q.data_ptr(), scale.data_ptr(), 0]
            _stream_int8(w, arena)  # the rows the step reads, on 2 MB pages (torch's product reads them too)
            rowsum = w.q.sum(dim=1, dtype=torch.int32).contiguous()
            keep.extend((w.q, scale, rowsum))
            return [w.q.data_ptr(), scale.data_ptr(), rowsum.data_ptr()]
        assert isinstance(w, Tensor) and w.dtype == torch.float32 and w.shape == (ref.shape[1], ref.shape[0]), (
            f"{ref.name}: expected a transposed float32 weight"
        )
        return [w.data_ptr(), 0, 0]

    embed = plan.embedding.payload
    if isinstance(embed, BlockWeight):
        embfmt, table_bytes = EMB_BLOCKS + BLOCK_FORMATS[embed.kind][0], embed.data
    else:
        assert isinstance(embed, Tensor)
        if embed.dtype not in (torch.float32, torch.bfloat16):
            return f"it reads float32 and bfloat16 embeddings, not {str(embed.dtype).removeprefix('torch.')}"
        embfmt, table_bytes = KV_BF16 if embed.dtype == torch.bfloat16 else KV_F32, embed
    keep.append(table_bytes)
    values = [
        table_bytes.data_ptr(),
        f32(plan.norm, norm=True),
        *matrix(plan.lm_head),
        f32(plan.rope_cos),
        f32(plan.rope_sin),
    ]
    dims = torch.tensor(
        [
            plan.dim, plan.n_layers, plan.n_heads, plan.n_kv_heads, plan.head_dim, plan.intermediate_size, plan.vocab,
            plan.max_seq_len,
            W_BLOCKS if blocks else (W_INT8_PACKED if packed else W_INT8) if weights == "int8" else W_F32,
            KV_BF16 if dtype == torch.bfloat16 else KV_F32, embfmt,
        ],
        dtype=torch.int64,
    )  # fmt: skip
    assert len(dims) == len(DIMS)
    scratch = _zeroed_pages(int(lib.waferline_scratch_floats(dims.data_ptr())))
    keep.append(scratch)
    values.append(scratch.data_ptr())
    for layer in plan.layers:
        values += [f32(layer.attn_norm, norm=True), *matrix(layer.qkv), f32(layer.qkv_bias), *matrix(layer.o)]
        values += [f32(layer.mlp_norm, norm=True), *matrix(layer.gate_up), *matrix(layer.down)]
        values += [f32(layer.q_norm, norm=True), f32(layer.k_norm, norm=True)]  # 0 (NULL) but for Qwen3
    assert len(values) == len(GLOBAL_PTRS) + len(LAYER_PTRS) * plan.n_layers
    ptrs = (ctypes.c_void_p * len(values))(*values)
    eps = torch.tensor([plan.norm_eps], dtype=torch.float32)
    return CompiledStep(
        lib=lib, dims=dims, eps=eps, ptrs=ptrs, keep=keep, kv_dtype=dtype, vocab=plan.vocab,
        max_tokens=int(lib.waferline_step_max_tokens()),
        prefill_max=None if weights == "int8" or blocks else FLOAT_PREFILL_MAX, blocks=bool(blocks),
    )  # fmt: skip


def _stream_int8(w: Int8Linear, arena: hugepages.Arena) -> None:
    """Move an int8 weight's rows (q, and q_mm where it is the same tensor or torch's padded copy) into `arena`, in
    place: the per-op path holds the same Int8Linear and reads them there too. Only the row layout's weights move (a
    model too large to pack); the packed layout is a copy of its own, and a small model's TLB reach is enough."""
    same = w.q_mm is w.q
    w.q = arena.copy(w.q)
    w.q_mm = w.q if same else arena.copy(w.q_mm)


def segment_table(w: BlockWeight) -> Tensor:
    """The int64 table fused_blocks.c reads a block matrix's rows by: how many segments, then each one's format
    (ggml's type number) and rows."""
    flat = [len(w.segments)] + [x for kind, rows in w.segments for x in (BLOCK_FORMATS[kind][0], rows)]
    return torch.tensor(flat, dtype=torch.int64)


def blocks_linear(x: Tensor, w: BlockWeight, *, threads: int = 1) -> Tensor:
    """x (n, in) float32, n <= 16 -> (n, out) = W x as the fused step computes it on GGUF blocks (fused_blocks.c):
    for tests and benchmarks of the product alone."""
    lib = fused_library.library()
    assert lib is not None, fused_library._library_error
    x = x.float().contiguous()
    n = x.shape[0]
    y = torch.empty(n, w.shape[0], dtype=torch.float32)
    table = segment_table(w)
    scratch = torch.empty(n * int(lib.wl_blocks_scratch_bytes(w.shape[1])) + 64, dtype=torch.uint8)
    rc = lib.waferline_blocks_linear(
        y.data_ptr(), x.data_ptr(), n, w.data.data_ptr(), table.data_ptr(), w.shape[1], w.shape[0],
        scratch.data_ptr(), threads,
    )  # fmt: skip
    if rc != 0:
        raise ValueError(f"the block product refused {n} vectors on {w.segments} of {w.shape}")
    return y


def blocks_rows(w: BlockWeight, rows: Tensor) -> Tensor:
    """(len(rows), in) float32: the rows of a one-format block weight as the fused step reads an embedding's
    (wl_block_dequantize_row): for tests against `BlockWeight.dequantize`."""
    lib = fused_library.library()
    assert lib is not None, fused_library._library_error
    ids = rows.to(torch.int64).contiguous()
    out = torch.empty(ids.numel(), w.shape[1], dtype=torch.float32)
    kind = BLOCK_FORMATS[w.kind][0]
    if lib.waferline_blocks_rows(
        out.data_ptr(), w.data.data_ptr(), kind, w.shape[1], w.shape[0], ids.data_ptr(), ids.numel()
    ):
        raise ValueError(f"the block rows refused {w.kind} rows {ids.tolist()} of {w.shape}")
    return out


def _int8_bytes(ref: WeightRef) -> int:
    w = ref.payload
    return w.q.numel() if isinstance(w, Int8Linear) else 0


def pack_int8(q: Tensor) -> Tensor:
    """int8 rows (out, in) in fused_packed.c's packed layout: blocks of 16 rows (the last padded with zero rows), each
    as groups of 4 inputs (the last padded with zeros), a group being 16 rows x 4 bytes; stored as w + 128."""
    n_out, n_in = q.shape
    rows, cols = -(-n_out // 16) * 16, -(-n_in // 4) * 4
    padded = torch.zeros(rows, cols, dtype=torch.int16)
    padded[:n_out, :n_in] = q.to(torch.int16)
    blocks = padded.view(rows // 16, 16, cols // 4, 4).permute(0, 2, 1, 3)  # (block, group, row, byte)
    return (blocks + 128).to(torch.uint8).contiguous().view(-1)
