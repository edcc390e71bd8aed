"""The block weights and KV caches the fused step streams lie on 2 MB pages (hardware/torch_backend/hugepages.py):
the same values, in mappings that start on a 2 MB boundary, and on transparent huge pages where the kernel gives
them; nowhere else when WAFERLINE_HUGE_PAGES=0."""

from __future__ import annotations

import mmap
from pathlib import Path

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType, quants

from waferline.hardware.blocks import BlockWeight
from waferline.hardware.torch_backend import hugepages
from waferline.hardware.torch_backend.torch_device import TorchDevice

pytestmark = pytest.mark.skipif(not hasattr(mmap, "MADV_HUGEPAGE"), reason="no MADV_HUGEPAGE: not Linux")

THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def thp_given() -> bool:
    """Whether this kernel gives an advised mapping transparent huge pages ("[always]" or "[madvise]")."""
    return THP.exists() and "[never]" not in THP.read_text()


def huge_kb(ptr: int) -> int:
    """AnonHugePages (kB) of the mapping of this process that holds address `ptr`."""
    lines = Path("/proc/self/smaps").read_text().splitlines()
    inside = False
    for line in lines:
        head = line.split()[0]
        if "-" in head and all(c in "0123456789abcdef-" for c in head):
            lo, hi = (int(x, 16) for x in head.split("-"))
            inside = lo <= ptr < hi
        elif inside and line.startswith("AnonHugePages:"):
            return int(line.split()[1])
    return 0


@pytest.fixture(autouse=True)
def huge_pages_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WAFERLINE_HUGE_PAGES", raising=False)


def test_an_arena_copy_is_the_same_tensor_on_2mb_aligned_mappings() -> None:
    arena = hugepages.Arena(block_bytes=4 << 20)
    parts = [torch.randn(300, 7), torch.arange(1000, dtype=torch.int64)]
    parts.append(torch.randint(0, 255, (5 << 20,), dtype=torch.uint8))
    placed = [arena.copy(t) for t in parts]
    for t, p in zip(parts, placed, strict=True):
        assert p is not t and p.dtype == t.dtype and p.shape == t.shape and p.is_contiguous()
        assert torch.equal(p, t)
        assert p.data_ptr() % hugepages.ALIGN == 0
    # the first two share a block that starts on a 2 MB boundary, one after the other; the third (over a block)
    # has a mapping of its own, and the block goes on taking the next ones
    assert placed[0].data_ptr() % hugepages.PAGE == 0 and placed[2].data_ptr() % hugepages.PAGE == 0
    assert placed[1].data_ptr() == placed[0].data_ptr() + 300 * 7 * 4 + (-(300 * 7 * 4) % 64)
    after = arena.copy(torch.ones(3))
    assert after.data_ptr() == placed[1].data_ptr() + 8000
    assert arena.nbytes == sum(t.numel() * t.element_size() for t in parts) + 12
    parts[0].zero_()
    assert placed[0].abs().sum() > 0, "a copy, not a view of the source"


def test_bytes_taken_from_the_arena_are_written_by_the_caller() -> None:
    """`take` hands out the arena's bytes one after another, as `copy` places them; interleaving a block weight
    writes its moved bytes straight there (one copy at load), the same bytes as interleaving it anywhere else."""
    arena = hugepages.Arena(block_bytes=4 << 20)
    first = arena.take(100)
    assert first is not None and first.dtype == torch.uint8 and first.shape == (100,)
    assert first.data_ptr() % hugepages.PAGE == 0
    w = np.random.default_rng(2).standard_normal((64, 256)).astype(np.float32)
    q = quants.quantize(w, GGMLQuantizationType.Q4_0)
    weight = BlockWeight(torch.from_numpy(q.reshape(-1).copy()), w.shape, (("Q4_0", 64),))
    taken: list[torch.Tensor] = []

    def place(nbytes: int) -> torch.Tensor | None:
        out = arena.take(nbytes)
        assert out is not None
        taken.append(out)
        return out

    placed = weight.interleaved(("Q4_0",), place=place)
    assert placed.segments == (("Q4_0_X8", 64),) and len(taken) == 1
    assert placed.data.data_ptr() == taken[0].data_ptr() == first.data_ptr() + 128  # the next cache line on
    assert torch.equal(placed.data, weight.interleaved(("Q4_0",)).data)
    assert arena.nbytes == 100 + weight.nbytes
    assert weight.interleaved(("Q8_0",), place=place) is weight and len(taken) == 1  # nothing to move: no bytes
    assert arena.take(0) is None


@pytest.mark.skipif(not thp_given(), reason="this kernel gives no transparent huge pages (THP 'never')")
def test_what_the_arena_holds_lies_on_huge_pages() -> None:
    arena = hugepages.Arena()
    placed = arena.copy(torch.ones(16 << 20, dtype=torch.uint8))
    assert huge_kb(placed.data_ptr()) >= 2048, "no huge page under the arena's tensor"


def test_switched_off_the_arena_leaves_tensors_where_they_are(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WAFERLINE_HUGE_PAGES", "0")
    t = torch.randn(64)
    assert hugepages.Arena().copy(t) is t
    e = hugepages.empty((3, 4), torch.bfloat16, zero=True)
    assert e.shape == (3, 4) and e.dtype == torch.bfloat16 and not e.any()


def test_empty_gives_zeros_of_the_shape_on_its_own_mapping() -> None:
    small = hugepages.empty((2, 2, 3, 100, 64), torch.bfloat16, zero=True)  # 150 KB: torch's, no huge page to fill
    assert small.shape == (2, 2, 3, 100, 64) and not small.any()
    e = hugepages.empty((2, 2, 3, 2000, 64), torch.bfloat16, zero=True)  # 3 MB
    assert e.shape == (2, 2, 3, 2000, 64) and e.dtype == torch.bfloat16 and e.is_contiguous() and not e.any()
    assert e.data_ptr() % hugepages.PAGE == 0
    e.fill_(1.5)
    assert float(e.float().sum()) == 1.5 * e.numel()


def test_a_placed_block_weight_and_a_kv_cache_lie_on_the_arena_s_pages() -> None:
    dev = TorchDevice(weights="int8", dtype=torch.bfloat16)
    if not dev.keeps_blocks():
        pytest.skip("the fused step is not built here: block weights are dequantised")
    w = np.random.default_rng(0).standard_normal((64, 256)).astype(np.float32)
    q = quants.quantize(w, GGMLQuantizationType.Q4_0)
    given = BlockWeight(torch.from_numpy(q.reshape(-1).copy()), w.shape, (("Q4_0", 64),))
    placed = dev.place("layers.0.mlp.down", given).payload
    assert isinstance(placed, BlockWeight) and placed.data.data_ptr() % hugepages.PAGE == 0
    assert torch.equal(placed.dequantize(), given.dequantize())
    kv = dev.kv_open(layers=2, kv_heads=3, head_dim=64, max_tokens=3000)  # 4.6 MB
    assert kv.payload.data.data_ptr() % hugepages.PAGE == 0 and not kv.payload.data.any()


@pytest.mark.skipif(not thp_given(), reason="this kernel gives no transparent huge pages (THP 'never')")
def test_only_whole_2mb_pages_of_a_mapping_are_huge() -> None:
    e = hugepages.empty((5 << 20,), torch.uint8)  # 2.5 pages: two huge, the last half page left to 4 KB pages
    e.fill_(1)
    assert huge_kb(e.data_ptr()) == 4096


def test_switched_off_placement_keeps_torch_s_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WAFERLINE_HUGE_PAGES", "0")
    dev = TorchDevice(weights="int8", dtype=torch.bfloat16)
    w = np.random.default_rng(1).standard_normal((16, 64)).astype(np.float32)
    q = quants.quantize(w, GGMLQuantizationType.Q8_0)
    given = BlockWeight(torch.from_numpy(q.reshape(-1).copy()), w.shape, (("Q8_0", 16),))
    assert dev._streamed(given, ()) is given
    moved = dev._streamed(given, ("Q8_0",))  # interleaved where numpy puts it, no arena
    assert moved.segments == (("Q8_0_X8", 16),) and torch.equal(moved.dequantize(), given.dequantize())
    kv = dev.kv_open(layers=1, kv_heads=1, head_dim=64, max_tokens=8)
    assert not kv.payload.data.any()


def test_an_int8_model_the_step_reads_by_rows_has_them_on_2mb_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    """A model too large for the packed layout (or a CPU without VNNI) has its int8 rows moved onto the arena when
    the step is built, the Int8Linear changed in place, so that torch's per-op product reads the same memory; the
    tokens do not change."""
    from waferline.engine.generate import generate
    from waferline.engine.kvcache import Session
    from waferline.engine.loader import load
    from waferline.hardware.torch_backend import fused, kernels

    def tokens(loaded: object) -> list[int]:
        session = Session(loaded.model, "t", max_tokens=64)  # type: ignore[attr-defined]
        return generate(session, list(range(5, 25)), max_new_tokens=12).tokens

    monkeypatch.setenv("WAFERLINE_HUGE_PAGES", "0")
    monkeypatch.setattr(fused, "packed_product_pays", lambda: False)
    plain = load("tiny", weights="int8")
    if plain.model.fused is None:
        pytest.skip("the fused step is not built here")
    monkeypatch.delenv("WAFERLINE_HUGE_PAGES")
    moved = load("tiny", weights="int8")
    plan = moved.model.plan()
    rows = [plan.lm_head.payload] + [r.payload for layer in plan.layers for r in (layer.qkv, layer.o, layer.down)]
    assert all(isinstance(w, kernels.Int8Linear) and w.q_mm is w.q for w in rows)
    assert rows[0].q.data_ptr() % hugepages.PAGE == 0  # the first matrix the step reads starts the arena
    base = rows[0].q.data_ptr()
    assert all(base <= w.q.data_ptr() < base + hugepages.BLOCK_BYTES for w in rows)
    assert tokens(moved) == tokens(plain)
    moved.model.fused = None  # the per-op path reads the moved rows too
    assert tokens(moved) == tokens(plain)


def test_a_refused_mapping_leaves_tensors_on_torch_s_memory(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError(12, "Cannot allocate memory")

    monkeypatch.setattr(hugepages.mmap, "mmap", refuse)
    monkeypatch.setattr(hugepages, "_warned", False)
    arena = hugepages.Arena()
    t = torch.randn(1 << 20)
    with caplog.at_level("INFO", logger="waferline.hardware"):
        assert arena.copy(t) is t and not arena.on
        assert arena.copy(torch.ones(3)).data_ptr() != 0  # and stays off, no second try
        e = hugepages.empty((4 << 20,), torch.uint8, zero=True)
    assert e.numel() == 4 << 20 and not e.any()
    assert sum("refused" in r.getMessage() for r in caplog.records) == 1
