"""The fused step's products on GGUF blocks (fused_blocks.c, fused_kquants.c) against two references: the same
arithmetic written out in numpy (activations quantised to 8-bit blocks of 32, or of 256 for the K-quants, as
llama.cpp does; the weights as the `gguf` package dequantises them) to float32 rounding, and the dequantised float
product to within what 8-bit activations cost; then whole models written as Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 files,
loaded with their blocks kept, against the same files dequantised on load (K-quant files, which only llama-quantize
writes: tests/engine/test_gguf_llama_cpp.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from block_weights import blocks  # tests/support
from required import missing  # tests/support

from waferline.engine.checkpoint import DEFAULT_MODEL_DIR, load_model
from waferline.engine.generate import generate
from waferline.engine.gguf.write import export_gguf
from waferline.engine.kvcache import Session
from waferline.hardware.blocks import BLOCK_FORMATS, BlockWeight, x8_deinterleave, x8_kinds
from waferline.hardware.torch_backend import fused, fused_library

KINDS = ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0")
SHAPES = ((1, 32), (37, 64), (17, 96), (130, 576), (40, 1536))  # one block; rows not a multiple of 16; wide rows
K_KINDS = ("Q4_K", "Q5_K", "Q6_K")
K_SHAPES = ((1, 256), (37, 512), (17, 768), (40, 1536))
K_HALVES = {"Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208,)}  # where the fp16 d (and dmin) lie in a super-block


@pytest.fixture(scope="module", autouse=True)
def compiled() -> None:
    if fused_library.library() is None:
        missing(f"the fused C step could not be built: {fused_library._library_error}")


def k_blocks(kind: str, shape: tuple[int, int], g: np.random.Generator) -> BlockWeight:
    """Random super-blocks (the `gguf` package does not quantise K-quants): every byte of the 4/5/6-bit values and
    of the scales random, d and dmin fp16 of the size llama-quantize writes."""
    _, values, size = BLOCK_FORMATS[kind]
    raw = g.integers(0, 256, (shape[0], shape[1] // values, size), dtype=np.uint8)
    for at in K_HALVES[kind]:
        halves = (g.uniform(0.0005, 0.004, raw.shape[:2]) * (1 if kind != "Q6_K" else 0.25)).astype(np.float16)
        raw[:, :, at : at + 2] = halves[..., None].view(np.uint8)
    return BlockWeight(torch.from_numpy(raw.reshape(-1).copy()), shape, ((kind, shape[0]),))


def f16(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32).astype(np.float16).astype(np.float64)


def reference(x: np.ndarray, w: BlockWeight) -> np.ndarray:
    """What fused_blocks.c computes, in float64: x quantised per block of 32 (d = max|x| / 127 to fp16, q =
    round(x 127 / max|x|) to even, s = d sum q to fp16), then per row sum over blocks of d_w d_x (q_w . q_x) (+ m_w s_x
    for Q4_1), the weights' integers and scales read from the blocks."""
    n_in = w.shape[1]
    xb = x.astype(np.float32).reshape(x.shape[0], n_in // 32, 32)
    amax = np.abs(xb).max(axis=2, keepdims=True)
    inv = np.where(amax > 0, np.float32(127) / np.where(amax > 0, amax, 1), 0).astype(np.float32)
    qx = np.rint((xb * inv).astype(np.float32)).astype(np.float64)  # (n, nb, 32)
    dx = f16(amax[..., 0] / np.float32(127))
    sx = f16((amax[..., 0] / np.float32(127)) * qx.sum(axis=2).astype(np.float32))
    raw = w.rows().numpy().reshape(w.shape[0], n_in // 32, -1)
    kind = w.kind
    dw = raw[:, :, 0:2].copy().view(np.float16)[..., 0].astype(np.float64)  # (out, nb)
    if kind == "Q8_0":
        qw = raw[:, :, 2:].view(np.int8).astype(np.float64)
    else:
        qs = raw[:, :, -16:]
        qw = np.concatenate((qs & 0xF, qs >> 4), axis=2).astype(np.float64)
        if kind in ("Q5_0", "Q5_1"):  # bit j of the 4 bytes before q: input j's fifth bit
            fifth = np.unpackbits(raw[:, :, -20:-16], axis=2, bitorder="little").astype(np.float64)
            qw += 16 * fifth
        qw -= {"Q4_0": 8, "Q5_0": 16}.get(kind, 0)
    dots = np.einsum("obj,nbj->nob", qw, qx)
    y = (dots * dw[None] * dx[:, None, :]).sum(axis=2)
    if kind in ("Q4_1", "Q5_1"):
        mw = raw[:, :, 2:4].copy().view(np.float16)[..., 0].astype(np.float64)
        y += (mw[None] * sx[:, None, :]).sum(axis=2)
    return y


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("shape", SHAPES)
def test_the_block_product_is_llama_cpps_arithmetic(kind: str, shape: tuple[int, int]) -> None:
    g = np.random.default_rng(sum(shape) + len(kind))
    w = blocks(kind, g.standard_normal(shape) * 0.05)
    x = g.standard_normal((3, shape[1])).astype(np.float32)
    x[2, : min(32, shape[1])] = 0.0  # an all-zero block: scale 0, no division
    y = fused.blocks_linear(torch.from_numpy(x), w).double().numpy()
    ref = reference(x, w)
    scale = np.abs(ref).max()
    assert np.abs(y - ref).max() <= 1e-5 * scale + 1e-7
    # and against the dequantised weights in float: the 8-bit activations' error, no more
    dense = x.astype(np.float64) @ w.dequantize().double().numpy().T
    assert np.abs(y - dense).max() <= 0.03 * np.abs(dense).max()


def k_reference(x: np.ndarray, w: BlockWeight) -> np.ndarray:
    """What fused_kquants.c computes, in float64: x quantised per 256 as llama.cpp's Q8_K (max the value of largest
    magnitude, d = 1 / (-127 / max) in float32, q = round(x -127 / max) to even, at most 127), against the weights as
    the `gguf` package dequantises the super-blocks."""
    xb = x.astype(np.float32).reshape(x.shape[0], -1, 256)
    at = np.abs(xb).argmax(axis=2)[..., None]
    peak = np.take_along_axis(xb, at, axis=2)
    iscale = np.where(peak != 0, np.float32(-127) / np.where(peak != 0, peak, 1), 0).astype(np.float32)
    qx = np.minimum(np.rint((xb * iscale).astype(np.float32)), 127)
    dx = np.where(iscale != 0, np.float32(1) / np.where(iscale != 0, iscale, 1), 0).astype(np.float32)
    xq = (qx.astype(np.float64) * dx.astype(np.float64)).reshape(x.shape)
    return xq @ w.dequantize().double().numpy().T


def test_the_blocks_of_32_activations_are_the_same_bytes_as_written_out_in_numpy() -> None:
    """wl_quantize_q8 (16 blocks at a time in AVX-512, one at a time in AVX2 or scalar code): per block of 32, amax the
    largest magnitude (NaN ignored), q = x * (127 / amax) rounded to even (NaN 0), d = amax / 127 and s = d * sum(q),
    both rounded to half precision. 37 blocks: two groups of 16 and 5 left over, with zeros, ties, NaN and infinity."""
    import ctypes

    lib = ctypes.CDLL(str(fused_library.compile_library()))
    g = np.random.default_rng(11)
    x = g.standard_normal((37, 32)).astype(np.float32)
    x[1] = 0.0
    x[2] = np.round(x[2] * 4) / 4  # values half a step apart: rounding to even decides
    x[3, 5] = np.nan
    x[4, 31] = np.inf
    x[17, 19] = np.nan  # in the second group of 16, the second half of its block
    x[18] *= 1e4
    x[20] *= 1e-30
    x[36, 7] = -9.0  # in the blocks left over
    flat = x.reshape(-1)
    q = np.zeros(flat.size, np.int8)
    d, sv = np.zeros(37, np.float32), np.zeros(37, np.float32)
    sums = np.zeros(37, np.int32)
    ptr = lambda a: ctypes.c_void_p(a.ctypes.data)  # noqa: E731
    lib.wl_quantize_q8(ptr(q), ptr(d), ptr(sv), ptr(sums), ptr(flat), ctypes.c_int64(flat.size))
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        amax = np.where(np.isnan(x), 0, np.abs(x)).max(axis=1).astype(np.float32)
        iscale = np.where(amax > 0, np.float32(127) / np.where(amax > 0, amax, 1), 0).astype(np.float32)
        v = (x * iscale[:, None]).astype(np.float32)
        want = np.where(np.isnan(v), 0, np.rint(np.nan_to_num(v))).astype(np.int32)
        db = (amax / np.float32(127)).astype(np.float32)
        total = want.sum(axis=1)
        want_s = (db * total.astype(np.float32)).astype(np.float32).astype(np.float16).astype(np.float32)
    assert (q.reshape(37, 32) == want).all()
    assert (sums == total).all()
    assert (d == db.astype(np.float16).astype(np.float32)).all()
    assert np.array_equal(sv, want_s, equal_nan=True)


def test_the_k_quant_activations_are_llama_cpps_q8_k_bit_for_bit() -> None:
    """wl_quantize_q8k (vectorised where there is AVX2) against Q8_K written out in numpy: the first value of largest
    magnitude sets the scale (a tie of +a and -a goes to whichever comes first), 0 blocks stay 0."""
    import ctypes

    lib = ctypes.CDLL(str(fused_library.compile_library()))
    g = np.random.default_rng(7)
    x = g.standard_normal((9, 256)).astype(np.float32)
    x[1, 3], x[1, 200] = -5.0, 5.0  # the first of a tie is negative
    x[2, 10], x[2, 11] = 5.0, -5.0  # and positive
    x[3] = 0.0
    x[4, :] = 0.0
    x[4, 255] = -1e-30  # a lone tiny value, last in its block
    x[5] *= 1e6
    x[6] = np.round(x[6] * 4) / 4  # many values exactly half a step apart: rounding to even decides
    x = x.reshape(-1)
    q = np.zeros(x.size, np.int8)
    d = np.zeros(x.size // 256, np.float32)
    sums = np.zeros(x.size // 16, np.int16)
    ptr = lambda a: ctypes.c_void_p(a.ctypes.data)  # noqa: E731
    lib.wl_quantize_q8k(ptr(q), ptr(d), ptr(sums), ptr(x), ctypes.c_int64(x.size))
    xb = x.reshape(-1, 256)
    peak = xb[np.arange(len(xb)), np.abs(xb).argmax(axis=1)]
    safe = np.where(peak != 0, peak, 1).astype(np.float32)
    iscale = (np.float32(-127) / safe).astype(np.float32)
    want = np.minimum(np.rint((xb * iscale[:, None]).astype(np.float32)), 127).astype(np.int8)
    want[peak == 0] = 0
    assert (q.reshape(-1, 256) == want).all()
    assert (d == np.where(peak != 0, np.float32(1) / iscale, 0).astype(np.float32)).all()
    assert (sums == want.reshape(-1, 16).astype(np.int32).sum(axis=1)).all()


@pytest.mark.parametrize("kind", K_KINDS)
@pytest.mark.parametrize("shape", K_SHAPES)
def test_the_k_quant_product_is_llama_cpps_arithmetic(kind: str, shape: tuple[int, int]) -> None:
    g = np.random.default_rng(sum(shape) + len(kind) + ord(kind[1]))
    w = k_blocks(kind, shape, g)
    x = g.standard_normal((3, shape[1])).astype(np.float32)
    x[1, 3] = -5.0  # a negative peak: the scale's sign is the peak's
    x[2, :256] = 0.0  # an all-zero super-block: d 0, no division
    y = fused.blocks_linear(torch.from_numpy(x), w).double().numpy()
    ref = k_reference(x, w)
    assert np.abs(y - ref).max() <= 1e-5 * np.abs(ref).max() + 1e-7
    # and against the dequantised weights in float: no more than rounding each x to its 8-bit step can cost
    wd = w.dequantize().double().numpy()
    dense = x.astype(np.float64) @ wd.T
    step = np.abs(x.astype(np.float64)).reshape(3, -1, 256).max(axis=2) / 254  # half a step of each super-block
    bound = np.einsum("nb,ob->no", step, np.abs(wd).reshape(wd.shape[0], -1, 256).sum(axis=2))
    assert (np.abs(y - dense) <= 1.01 * bound + 1e-6).all()


@pytest.mark.parametrize("kind", KINDS + K_KINDS)
def test_the_step_reads_an_embedding_row_as_gguf_dequantises_it(kind: str) -> None:
    g = np.random.default_rng(11)
    w = k_blocks(kind, (5, 512), g) if kind in K_KINDS else blocks(kind, g.standard_normal((5, 512)))
    rows = torch.tensor([4, 0, 2])
    got = fused.blocks_rows(w, rows)
    assert torch.allclose(got, w.dequantize(rows), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("kind", KINDS + K_KINDS)
def test_each_output_is_the_same_whatever_the_vectors_and_threads(kind: str) -> None:
    g = np.random.default_rng(7)
    w = k_blocks(kind, (300, 256), g) if kind in K_KINDS else blocks(kind, g.standard_normal((300, 256)))
    x = torch.from_numpy(g.standard_normal((16, 256)).astype(np.float32))
    many = fused.blocks_linear(x, w, threads=2)
    ones = torch.cat([fused.blocks_linear(x[i : i + 1], w, threads=1) for i in range(16)])
    assert torch.equal(many, ones)


def test_a_matrix_of_several_formats_is_its_parts_one_after_another() -> None:
    g = np.random.default_rng(3)
    parts = [blocks(kind, g.standard_normal((rows, 64))) for kind, rows in (("Q4_1", 20), ("Q4_1", 5), ("Q8_0", 9))]
    f32 = torch.from_numpy(g.standard_normal((7, 64)).astype(np.float32))
    parts.append(BlockWeight(f32.view(torch.uint8).view(-1).clone(), (7, 64), (("F32", 7),)))
    whole = BlockWeight.cat(parts)
    assert whole.segments == (("Q4_1", 25), ("Q8_0", 9), ("F32", 7))
    x = torch.from_numpy(g.standard_normal((2, 64)).astype(np.float32))
    pieces = [fused.blocks_linear(x, p) for p in parts]
    assert torch.equal(fused.blocks_linear(x, whole), torch.cat(pieces, dim=1))
    assert torch.allclose(pieces[-1], x @ f32.T, rtol=1e-5, atol=1e-5)  # float rows: a float product
    assert torch.equal(whole.dequantize()[25:34], parts[2].dequantize())


def test_a_k_quant_mix_is_its_parts_one_after_another() -> None:
    """A Q4_K_M file's fused q/k/v: Q4_K rows, then Q6_K (attn_v), beside a 32-block format in one matrix."""
    g = np.random.default_rng(5)
    parts = [k_blocks("Q4_K", (24, 512), g), k_blocks("Q6_K", (8, 512), g), blocks("Q5_0", g.standard_normal((8, 512)))]
    whole = BlockWeight.cat(parts)
    x = torch.from_numpy(g.standard_normal((3, 512)).astype(np.float32))
    assert torch.equal(fused.blocks_linear(x, whole), torch.cat([fused.blocks_linear(x, p) for p in parts], dim=1))


def test_a_table_the_product_cannot_read_is_refused() -> None:
    w = blocks("Q4_0", np.ones((4, 64), dtype=np.float32))
    bad = BlockWeight(w.data, (4, 64), (("Q4_0", 4),))
    bad.segments = (("Q4_0", 3),)  # rows the table does not cover
    with pytest.raises(ValueError, match="refused"):
        fused.blocks_linear(torch.ones(1, 64), bad)


X8_TYPES = ["Q4_0", "Q4_1", "Q5_0", "Q8_0", "Q4_K", "Q5_K", "Q6_K"]


def x8_weight(kind: str, rows: int, g: np.random.Generator, wide: bool = False) -> BlockWeight:
    """A weight of `rows` rows to interleave: 96 inputs (576 wide) in blocks of 32, 512 (1536) in K-quants."""
    if kind in K_KINDS:
        return k_blocks(kind, (rows, 1536 if wide else 512), g)
    return blocks(kind, g.standard_normal((rows, 576 if wide else 96)))


@pytest.mark.parametrize("kind", X8_TYPES)
def test_eight_rows_interleaved_are_the_same_bytes_and_the_same_weights(kind: str) -> None:
    g = np.random.default_rng(13)
    w = x8_weight(kind, 37, g)
    x8 = w.interleaved(X8_TYPES)
    assert x8.segments == ((f"{kind}_X8", 32), (kind, 5))  # whole groups of 8; the last 5 rows as they are
    assert x8.nbytes == w.nbytes and not torch.equal(x8.data, w.data)
    if kind == "Q5_0":  # bytes moved, and the fifth bits moved bit by bit into masks: the same bits
        bits = [np.unpackbits(t.numpy()) for t in (x8.data, w.data)]
        assert (bits[0] == 1).sum() == (bits[1] == 1).sum()
    else:
        assert torch.equal(torch.sort(x8.data).values, torch.sort(w.data).values)  # moved, not changed
    assert torch.equal(x8_deinterleave(x8.data[: 32 * w.row_bytes(kind)].view(32, -1), f"{kind}_X8"), w.rows()[:32])
    assert torch.equal(x8.dequantize(), w.dequantize())
    # a segment that starts off a multiple of 8 stays as it is (a group never straddles a chunk of rows)
    other = "Q8_0" if kind != "Q8_0" else "Q4_0"
    mixed = BlockWeight.cat([blocks(other, g.standard_normal((3, w.shape[1]))), w]).interleaved(X8_TYPES)
    assert mixed.segments == ((other, 3), (kind, 37))
    assert w.interleaved([k for k in X8_TYPES if k != kind]) is w  # only the kinds asked for; nothing moved, no copy


@pytest.mark.parametrize("kind", X8_TYPES)
def test_an_interleaved_tables_rows_are_its_rows(kind: str) -> None:
    """An embedding placed 8 rows interleaved (the tied head's bytes) is read a row at a time from its group: by the
    fused step (wl_block_table_row) and by `dequantize(rows)`, as the file's rows."""
    g = np.random.default_rng(29)
    w = x8_weight(kind, 48, g)
    x8 = w.interleaved(X8_TYPES)
    assert x8.segments == ((f"{kind}_X8", 48),)
    rows = torch.tensor([0, 47, 9, 8, 15, 9, 30])
    expected = w.dequantize(rows)
    assert torch.equal(x8.dequantize(rows), expected)
    assert torch.equal(fused.blocks_rows(x8, rows), expected)


@pytest.mark.parametrize("kind", X8_TYPES)
def test_the_interleaved_product_is_the_rows_product(kind: str) -> None:
    """Where this build has it (4-bit ones with AVX2, Q8_0 and the K-quants with AVX512-VNNI): the same integer dots,
    summed per row lane in another float order; n vectors equal one at a time, 2 threads equal 1, bit for bit."""
    lib = fused_library.library()
    assert lib is not None
    g = np.random.default_rng(17)
    w = x8_weight(kind, 300, g, wide=True)
    x8 = w.interleaved(X8_TYPES)
    x = torch.from_numpy(g.standard_normal((16, w.shape[1])).astype(np.float32))
    x[3, 5] = -9.0  # a negative peak in a super-block
    if kind not in x8_kinds(int(lib.waferline_blocks_x8())):
        with pytest.raises(ValueError, match="refused"):  # a build without the product refuses the layout
            fused.blocks_linear(x, x8)
        pytest.skip(f"this build multiplies no 8-row groups of {kind}")
    rows, grouped = fused.blocks_linear(x, w), fused.blocks_linear(x, x8, threads=2)
    assert (grouped - rows).abs().max() <= 1e-5 * rows.abs().max()
    assert torch.equal(grouped, torch.cat([fused.blocks_linear(x[i : i + 1], x8, threads=1) for i in range(16)]))
    assert (grouped - x @ w.dequantize().T).abs().max() <= 0.03 * rows.abs().max()


def test_an_interleaved_segment_off_a_group_boundary_is_refused() -> None:
    g = np.random.default_rng(19)
    x8 = blocks("Q4_0", g.standard_normal((16, 64))).interleaved()
    head = blocks("Q8_0", g.standard_normal((3, 64)))
    bad = BlockWeight(torch.cat([head.data, x8.data]), (19, 64), (("Q8_0", 3), ("Q4_0_X8", 16)))
    with pytest.raises(ValueError, match="refused"):
        fused.blocks_linear(torch.ones(1, 64), bad)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("blocks")
    kinds = ("q4_0", "q4_1", "q5_0", "q5_1", "q8_0")
    return {kind: export_gguf(DEFAULT_MODEL_DIR, out / f"mini-{kind}.gguf", kind) for kind in kinds}


PROMPT = 'def scale(values, factor):\n    """Multiply each value by factor."""\n    return '


@pytest.mark.parametrize("kind", ["q4_0", "q4_1", "q5_0", "q5_1", "q8_0"])
def test_a_block_file_loads_unexpanded_and_decodes_as_its_dequantised_weights(
    kind: str, files: dict[str, Path], monkeypatch: Any
) -> None:
    path = files[kind]
    native = load_model(path)
    assert (
        native.model.fused is not None
        and int(native.model.fused.dims[fused_library.DIMS.index("wfmt")]) == fused_library.W_BLOCKS
    )
    placed = native.model.device.placement().weight_bytes
    assert placed <= 1.05 * path.stat().st_size  # the blocks (the tied head shares the embedding's), rope, norms
    assert all(isinstance(layer.qkv.payload, BlockWeight) for layer in native.model.layers)
    monkeypatch.setenv("WAFERLINE_GGUF_BLOCKS", "0")
    dense = load_model(path)
    assert not isinstance(dense.model.layers[0].qkv.payload, BlockWeight)
    ids = native.tokenizer.encode(PROMPT)
    a, b = (m.model.forward(ids, m.model.open_cache(64), 0)[0] for m in (native, dense))
    assert (a - b).abs().max() <= 0.05 * b.abs().max()  # 8-bit activations against float ones
    # greedy decoding: the dense model's 16 tokens, fed to the native one, are each its first choice or within a
    # near-tie of it (this file's Q5_0 weights leave two tokens 0.02 apart at the second step)
    theirs = list(generate(Session(dense.model), ids, max_new_tokens=16).tokens)
    forced = native.model.forward(ids + theirs[:-1], native.model.open_cache(64), 0, last_only=False)[len(ids) - 1 :]
    gaps = forced.max(dim=1).values - forced[torch.arange(16), torch.tensor(theirs)]
    assert float(gaps.max()) <= 0.1, gaps.tolist()
    assert int((gaps == 0).sum()) >= 12, gaps.tolist()
