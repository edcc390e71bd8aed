"""The fused step's packed int8 product (a second copy of small models' weights, laid out for the VNNI product that
needs no reduction) against the row layout it replaces, and the C argmax/logsumexp that generation reads."""

from __future__ import annotations

import ctypes
import math
from typing import Any

import pytest
import torch
from required import missing  # tests/support

from waferline.engine.hf import from_hf, init_random
from waferline.engine.model import ModelArgs, Transformer
from waferline.hardware.torch_backend import TorchDevice, fused, fused_library

SHAPES = {
    "qwen2-gqa-bias": dict(
        model_type="qwen2", vocab_size=200, dim=64, n_layers=2, n_heads=4, n_kv_heads=2, intermediate_size=96,
        max_seq_len=128, qkv_bias=True, tie_embeddings=True, norm_eps=1e-6,
    ),
    # widths that are not multiples of 4 or 16: padded groups and rows, the last block of rows partly stored
    "odd-widths": dict(
        model_type="qwen2", vocab_size=70, dim=42, n_layers=1, n_heads=2, n_kv_heads=1, intermediate_size=50,
        max_seq_len=64, qkv_bias=True, head_dim=22,
    ),
}  # fmt: skip

pytestmark = pytest.mark.usefixtures("single_thread")
PACK_LIMIT = fused.PACK_LIMIT_BYTES


@pytest.fixture(scope="module")
def compiled() -> None:
    if fused_library.library() is None:
        missing(f"the fused C step could not be built: {fused_library._library_error}")


def build(shape: str, *, packed: bool, monkeypatch: Any) -> Transformer:
    monkeypatch.setenv("WAFERLINE_FUSED", "1")
    monkeypatch.setattr(fused, "PACK_LIMIT_BYTES", PACK_LIMIT if packed else 0)
    monkeypatch.setattr(fused, "packed_product_pays", lambda: True)  # the layouts are compared on every CPU
    args = ModelArgs(**SHAPES[shape])
    model = Transformer(args, TorchDevice(dtype=torch.bfloat16, weights="int8"))
    model.load(from_hf(args, init_random(args, seed=4).items()))
    assert model.fused is not None
    assert int(model.fused.dims[fused_library.DIMS.index("wfmt")]) == (
        fused_library.W_INT8_PACKED if packed else fused_library.W_INT8
    )
    return model


def test_small_models_are_packed_only_where_the_packed_product_is_the_faster(compiled: None, monkeypatch: Any) -> None:
    monkeypatch.setenv("WAFERLINE_FUSED", "1")
    args = ModelArgs(**SHAPES["qwen2-gqa-bias"])
    model = Transformer(args, TorchDevice(dtype=torch.bfloat16, weights="int8"))
    model.load(from_hf(args, init_random(args, seed=4).items()))
    assert model.fused is not None
    vnni = bool(fused_library.library().waferline_int8_features() & fused_library.INT8_VNNI)  # type: ignore[union-attr]
    assert int(model.fused.dims[fused_library.DIMS.index("wfmt")]) == (
        fused_library.W_INT8_PACKED if vnni else fused_library.W_INT8
    )


def test_pack_int8_puts_each_weight_where_the_kernel_reads_it() -> None:
    q = torch.randint(-128, 128, (37, 10), dtype=torch.int8, generator=torch.Generator().manual_seed(0))
    packed = fused.pack_int8(q)
    assert packed.dtype == torch.uint8 and packed.numel() == 48 * 12  # rows padded to 16s, inputs to 4s
    groups = 3
    for r in (0, 15, 16, 36):
        for i in (0, 3, 4, 9):
            at = ((r // 16) * groups + i // 4) * 64 + (r % 16) * 4 + i % 4
            assert int(packed[at]) == int(q[r, i]) + 128
    assert int(packed[((47 // 16) * groups + 0) * 64 + (47 % 16) * 4]) == 128  # a padding row holds w = 0


@pytest.mark.parametrize("shape", list(SHAPES))
def test_packed_product_gives_the_row_layouts_logits_bit_for_bit(shape: str, compiled: None, monkeypatch: Any) -> None:
    """The same integers, the same float arithmetic after them: one-token and k-token steps, and the cache they
    write, equal the row layout's exactly (on 1 and 2 threads)."""
    rows = build(shape, packed=False, monkeypatch=monkeypatch)
    packed = build(shape, packed=True, monkeypatch=monkeypatch)
    vocab = SHAPES[shape]["vocab_size"]
    g = torch.Generator().manual_seed(8)
    prompt = torch.randint(0, vocab, (9,), generator=g)
    for threads in (1, 2):
        torch.set_num_threads(threads)
        results = []
        for model in (rows, packed):
            kv = model.open_cache(9 + 3 + 2 + 8 + 9 + 16)
            model.forward(prompt, kv, 0)
            one = torch.cat([model.forward(torch.tensor([t]), kv, 9 + i) for i, t in enumerate([3, 1, 4])])
            many = [
                model.forward(list(range(5, 5 + k)), kv, kv.length, last_only=False, like_steps=True)
                for k in (2, 8, 9, 16)
            ]
            results.append((one, many, kv.payload.data.float().clone()))
        assert torch.equal(results[0][0], results[1][0])
        assert all(torch.equal(a, b) for a, b in zip(results[0][1], results[1][1], strict=True))
        assert torch.equal(results[0][2], results[1][2])
    torch.set_num_threads(1)


def test_row_stats_for_a_greedy_draft_stop_after_its_first_miss(compiled: None, monkeypatch: Any) -> None:
    """Given the draft the rows verify (row i predicting draft[i]), row_stats stop after the first row whose argmax
    is not its draft id, with the same answers as without the draft up to there; a row that is not finite gets
    torch's answer, and where that holds the draft, the rows after it are read too."""
    model = build("qwen2-gqa-bias", packed=True, monkeypatch=monkeypatch)
    assert model.fused is not None
    rows = torch.randn(6, 300, generator=torch.Generator().manual_seed(2)) * 5
    full = model.fused.row_stats(rows)
    tops = full[0]
    held = [tops[0], tops[1], (tops[2] + 1) % 300, tops[3], tops[4]]  # the third drafted id misses
    assert model.fused.row_stats(rows, held) == tuple(x[:3] for x in full)
    assert model.fused.row_stats(rows, tops[:5]) == full  # every drafted id holds: every row
    assert model.fused.row_stats(rows, [(tops[0] + 1) % 300]) == tuple(x[:1] for x in full)
    assert model.row_stats(rows, held) == tuple(x[:3] for x in full)
    nan = rows.clone()
    nan[1, 0] = math.nan  # torch's argmax of this row is 0, the NaN
    got = model.fused.row_stats(nan, [tops[0], 0, tops[2], tops[3], tops[4]])
    assert got[0] == [tops[0], 0, *tops[2:]] and len(got[2]) == 6 and math.isnan(got[2][1])


def test_row_stats_match_torch_and_hand_odd_rows_to_it(compiled: None, monkeypatch: Any) -> None:
    model = build("qwen2-gqa-bias", packed=True, monkeypatch=monkeypatch)
    assert model.fused is not None
    g = torch.Generator().manual_seed(1)
    rows = torch.randn(6, 1000, generator=g) * 8
    rows[1, 10] = rows[1, 500] = rows[1].max() + 1  # a tie: the first index, as torch.argmax
    rows[2, :] = -math.inf
    rows[2, 7] = 3.0  # one finite value among -inf (a healing mask)
    rows[3, 0] = math.nan  # not finite: torch's answers
    rows[4, :] = -math.inf  # nothing finite at all: torch's answers
    rows[5, :] = 0.0  # a flat row: the first index
    tops, maxes, lses = model.fused.row_stats(rows)
    want_top = rows.argmax(dim=-1).tolist()
    want_lse = torch.logsumexp(rows, dim=-1).tolist()
    assert tops == want_top and tops[1] == 10 and tops[5] == 0
    for i in (0, 1, 2, 5):
        assert maxes[i] == float(rows[i, tops[i]])
        assert lses[i] == pytest.approx(want_lse[i], rel=1e-5, abs=1e-5)
    assert math.isnan(lses[3]) and math.isnan(maxes[3])
    assert lses[4] == -math.inf
    # the model's row_stats: the C call for float32 rows, torch for others, with the same answers
    for r in (rows[:3], rows[:3].to(torch.bfloat16)):
        t, m, lse = model.row_stats(r.contiguous())
        assert t == r.float().argmax(dim=-1).tolist()
        assert m == pytest.approx(r.float().max(dim=-1).values.tolist())
        assert lse == pytest.approx(torch.logsumexp(r.float(), dim=-1).tolist(), rel=1e-5)


def test_the_steps_exp_is_e_to_the_x_and_its_vector_lanes_are_the_scalar_ones(compiled: None) -> None:
    """softmax's and SiLU's e^x (vectorised where the build has AVX-512 or AVX2, else scalar) against float64 on
    values across its range, the clamped ends included; every vector lane bit for bit what the scalar tail gives the
    same value (one value at a time takes the scalar path), so a row's values do not depend on where they fall."""
    lib = fused_library.library()
    assert lib is not None
    lib.waferline_exp_shifted.restype = ctypes.c_float
    lib.waferline_exp_shifted.argtypes = (ctypes.c_void_p, ctypes.c_int64, ctypes.c_float)
    g = torch.Generator().manual_seed(5)
    for n in (1, 7, 8, 15, 16, 17, 333):
        v = (torch.rand(n, generator=g) * 175 - 95).float()  # a sum of up to 333 below float32 max
        out = v.clone()
        total = lib.waferline_exp_shifted(out.data_ptr(), n, ctypes.c_float(0.5))
        one = v.clone()
        for i in range(n):
            lib.waferline_exp_shifted(one[i:].data_ptr(), 1, ctypes.c_float(0.5))
        assert torch.equal(out, one), n
        want = torch.exp(torch.clamp(v.double() - 0.5, -87.3, 88.3))
        assert torch.all((out.double() - want).abs() <= 1e-5 * want + 1e-43), n  # e^-87.3 lies near FLT_MIN
        assert math.isclose(total, float(want.sum()), rel_tol=1e-5), n
