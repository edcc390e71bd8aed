"""The fused step's products on GGUF blocks (fused_blocks.c) against two references: the same arithmetic written out
in numpy (activations quantised to 8-bit blocks of 32 as llama.cpp does, integer dot products per block) to float32
rounding, and the dequantised float product to within what 8-bit activations cost; then whole models written as
Q4_0, Q4_1 and Q8_0 files, loaded with their blocks kept, against the same files dequantised on load."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType, quants
from required import missing  # tests/support

from waferline.engine.checkpoint import DEFAULT_MODEL_DIR, load_model
from waferline.engine.generate import generate
from waferline.engine.gguf.write import export_gguf
from waferline.engine.kvcache import Session
from waferline.hardware.device import BlockWeight
from waferline.hardware.torch_backend import fused, fused_library

KINDS = ("Q4_0", "Q4_1", "Q8_0")
SHAPES = ((1, 32), (37, 64), (17, 96), (130, 576), (40, 1536))  # one block; rows not a multiple of 16; wide rows


@pytest.fixture(scope="module", autouse=True)
def compiled() -> None:
    if fused_library.library() is None:
        missing(f"the fused C step could not be built: {fused_library._library_error}")


def blocks(kind: str, w: np.ndarray) -> BlockWeight:
    q = quants.quantize(w.astype(np.float32), GGMLQuantizationType[kind])
    return BlockWeight(torch.from_numpy(q.reshape(-1).copy()), w.shape, ((kind, w.shape[0]),))


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
        qw = np.concatenate((qs & 0xF, qs >> 4), axis=2).astype(np.float64) - (8 if kind == "Q4_0" else 0)
    dots = np.einsum("obj,nbj->nob", qw, qx)
    y = (dots * dw[None] * dx[:, None, :]).sum(axis=2)
    if kind == "Q4_1":
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


@pytest.mark.parametrize("kind", KINDS)
def test_each_output_is_the_same_whatever_the_vectors_and_threads(kind: str) -> None:
    g = np.random.default_rng(7)
    w = blocks(kind, g.standard_normal((300, 256)))
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


def test_a_table_the_product_cannot_read_is_refused() -> None:
    w = blocks("Q4_0", np.ones((4, 64), dtype=np.float32))
    bad = BlockWeight(w.data, (4, 64), (("Q4_0", 4),))
    bad.segments = (("Q4_0", 3),)  # rows the table does not cover
    with pytest.raises(ValueError, match="refused"):
        fused.blocks_linear(torch.ones(1, 64), bad)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("blocks")
    return {kind: export_gguf(DEFAULT_MODEL_DIR, out / f"mini-{kind}.gguf", kind) for kind in ("q4_0", "q4_1", "q8_0")}


PROMPT = 'def scale(values, factor):\n    """Multiply each value by factor."""\n    return '


@pytest.mark.parametrize("kind", ["q4_0", "q4_1", "q8_0"])
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
    mine = generate(Session(native.model), ids, max_new_tokens=16).tokens
    theirs = generate(Session(dense.model), ids, max_new_tokens=16).tokens
    assert list(mine[:4]) == list(theirs[:4])
