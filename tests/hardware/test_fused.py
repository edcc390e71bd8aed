"""The torch backend's fused C decode step against its own per-op path, on shared KV caches; and its fallbacks."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import torch
from random_weights import scaled_state  # tests/support
from required import missing  # tests/support

from waferline.engine.hf import from_hf, init_random
from waferline.engine.model import ModelArgs, Transformer
from waferline.hardware.torch_backend import TorchDevice, fused, fused_library

SHAPES = {
    "qwen2-gqa-bias-tied": dict(
        model_type="qwen2", vocab_size=96, dim=64, n_layers=2, n_heads=4, n_kv_heads=2, intermediate_size=96,
        max_seq_len=128, qkv_bias=True, tie_embeddings=True, norm_eps=1e-6,
    ),
    "llama-mha-untied-llama3-rope": dict(
        model_type="llama", vocab_size=80, dim=48, n_layers=3, n_heads=4, n_kv_heads=4, intermediate_size=160,
        max_seq_len=128, rope_theta=500000.0, norm_eps=1e-5,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 64},
    ),
    "qwen3-per-head-norms-wide-head-dim": dict(  # each q and k head normalised (unequal weights) before rotation
        model_type="qwen3", vocab_size=96, dim=64, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=32,
        intermediate_size=96, max_seq_len=128, tie_embeddings=True, norm_eps=1e-6,
    ),
    "odd-widths-head-dim": dict(  # widths that are not multiples of 64 exercise the kernel's tails
        model_type="qwen2", vocab_size=70, dim=40, n_layers=1, n_heads=2, n_kv_heads=1, intermediate_size=50,
        max_seq_len=128, qkv_bias=True, head_dim=24,
    ),
}  # fmt: skip


pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.fixture(scope="module")
def compiled() -> None:
    if fused_library.library() is None:
        missing(f"the fused C step could not be built: {fused_library._library_error}")


def build(shape: str, *, dtype: torch.dtype, weights: str, fuse: bool, monkeypatch: Any) -> Transformer:
    monkeypatch.setenv("WAFERLINE_FUSED", "1" if fuse else "0")
    args = ModelArgs(**SHAPES[shape])
    model = Transformer(args, TorchDevice(dtype=dtype, weights=weights))
    model.load(from_hf(args, scaled_state(args, seed=3, weight_scale=1.0).items()))  # init_random's, Qwen3's ramps
    assert (model.fused is not None) == fuse
    return model


def decode_logits(model: Transformer, prompt: list[int], tokens: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Prefill `prompt` (per-op, many tokens), then feed `tokens` one at a time; (logits per step, cache data)."""
    kv = model.open_cache(len(prompt) + len(tokens))
    model.forward(torch.tensor(prompt), kv, 0)
    out = [model.forward(torch.tensor([t]), kv, len(prompt) + i)[0].float() for i, t in enumerate(tokens)]
    assert kv.length == len(prompt) + len(tokens)
    return torch.stack(out), kv.payload.data.float()


@pytest.mark.parametrize("shape", list(SHAPES))
def test_float32_fused_step_equals_the_per_op_step(shape: str, compiled: None, monkeypatch: Any) -> None:
    g = torch.Generator().manual_seed(1)
    vocab = SHAPES[shape]["vocab_size"]
    prompt, tokens = torch.randint(0, vocab, (9,), generator=g).tolist(), torch.randint(0, vocab, (20,), generator=g)
    per_op = build(shape, dtype=torch.float32, weights="float", fuse=False, monkeypatch=monkeypatch)
    fast = build(shape, dtype=torch.float32, weights="float", fuse=True, monkeypatch=monkeypatch)
    ref_logits, ref_cache = decode_logits(per_op, prompt, tokens.tolist())
    logits, cache = decode_logits(fast, prompt, tokens.tolist())
    torch.testing.assert_close(logits, ref_logits, atol=2e-5, rtol=1e-4)
    torch.testing.assert_close(cache, ref_cache, atol=1e-5, rtol=1e-5)  # the keys and values it wrote, too


@pytest.mark.parametrize("shape", list(SHAPES))
def test_int8_fused_step_stays_close_to_the_per_op_int8_step(shape: str, compiled: None, monkeypatch: Any) -> None:
    """W8A8 (fused) and W8A16 (per-op) differ only by activation rounding: a few percent of the logits' range."""
    g = torch.Generator().manual_seed(2)
    vocab = SHAPES[shape]["vocab_size"]
    prompt, tokens = torch.randint(0, vocab, (7,), generator=g).tolist(), torch.randint(0, vocab, (16,), generator=g)
    ref_logits, _ = decode_logits(
        build(shape, dtype=torch.float32, weights="float", fuse=False, monkeypatch=monkeypatch), prompt, tokens.tolist()
    )
    per_op, _ = decode_logits(
        build(shape, dtype=torch.bfloat16, weights="int8", fuse=False, monkeypatch=monkeypatch), prompt, tokens.tolist()
    )
    logits, cache = decode_logits(
        build(shape, dtype=torch.bfloat16, weights="int8", fuse=True, monkeypatch=monkeypatch), prompt, tokens.tolist()
    )
    scale = ref_logits.abs().max()
    assert (logits - ref_logits).abs().max() / scale < 0.06
    assert (logits - per_op).abs().max() / scale < 0.06
    assert (logits - ref_logits).abs().max() > 0  # it really is quantised (not a float path in disguise)
    assert torch.isfinite(cache).all()


def test_fused_and_per_op_steps_share_one_cache(compiled: None, monkeypatch: Any) -> None:
    """Decode fused, then prefill more tokens per-op on the same cache: equal to a per-op run throughout."""
    shape = "qwen2-gqa-bias-tied"
    per_op = build(shape, dtype=torch.float32, weights="float", fuse=False, monkeypatch=monkeypatch)
    fast = build(shape, dtype=torch.float32, weights="float", fuse=True, monkeypatch=monkeypatch)
    outs = []
    for model in (per_op, fast):
        kv = model.open_cache(40)
        model.forward(torch.tensor([1, 2, 3]), kv, 0)
        a = model.forward(torch.tensor([4]), kv, 3)
        b = model.forward(torch.tensor([5]), kv, 4)
        c = model.forward(torch.tensor([6, 7, 8, 9]), kv, 5)  # per-op prefill reads the fused step's keys
        model.device.kv_truncate(kv, 4)  # prefix reuse: rewrite position 4 with another token
        d = model.forward(torch.tensor([11]), kv, 4)
        outs.append(torch.cat([a, b, c, d]).float())
    torch.testing.assert_close(outs[1], outs[0], atol=2e-5, rtol=1e-4)


def test_out_of_range_token_is_refused_not_read(compiled: None, monkeypatch: Any) -> None:
    model = build("odd-widths-head-dim", dtype=torch.float32, weights="float", fuse=True, monkeypatch=monkeypatch)
    assert model.fused is not None
    kv = model.open_cache(8)
    with pytest.raises(ValueError, match="refused token 70"):
        model.fused.step(70, kv, 0)
    with pytest.raises(ValueError, match="position 8"):
        model.fused.step(1, kv, 8)


def test_env_switch_and_large_models_keep_the_per_op_path(monkeypatch: Any) -> None:
    monkeypatch.setenv("WAFERLINE_FUSED", "0")
    args = ModelArgs(**SHAPES["odd-widths-head-dim"])
    model = Transformer(args, TorchDevice())
    model.load(from_hf(args, init_random(args).items()))
    assert model.fused is None
    monkeypatch.setenv("WAFERLINE_FUSED", "1")
    monkeypatch.setattr("waferline.hardware.torch_backend.torch_device.FUSE_MAX_WEIGHT_BYTES", 1000)
    model = Transformer(args, TorchDevice())
    model.load(from_hf(args, init_random(args).items()))
    assert model.fused is None


def test_compile_failure_falls_back_with_one_warning(monkeypatch: Any, tmp_path: Path, caplog: Any) -> None:
    monkeypatch.setenv("CC", "/bin/false")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(fused_library, "_library", None)
    monkeypatch.setattr(fused_library, "_library_error", None)
    args = ModelArgs(**SHAPES["odd-widths-head-dim"])
    for _ in range(2):
        model = Transformer(args, TorchDevice())
        model.load(from_hf(args, init_random(args).items()))
        assert model.fused is None
        kv = model.open_cache(8)
        assert model.forward(torch.tensor([1, 2]), kv, 0).shape == (1, 70)
        assert model.forward(torch.tensor([3]), kv, 2).shape == (1, 70)  # per-op decode
    warnings = [r for r in caplog.records if "fused decode step unavailable" in r.getMessage()]
    assert len(warnings) == 1 and "/bin/false failed" in warnings[0].getMessage()
    assert not list(tmp_path.rglob("*.so*"))  # nothing half-written left in the cache


def test_compiled_library_is_cached_by_content(monkeypatch: Any, tmp_path: Path, compiled: None) -> None:
    first = fused_library.compile_library(tmp_path)
    assert first.is_file() and first.parent == tmp_path

    def no_compiler(*a: Any, **k: Any) -> None:
        raise AssertionError("compiled again")

    monkeypatch.setattr(subprocess, "run", no_compiler)
    assert fused_library.compile_library(tmp_path) == first


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("weights", ["float", "int8"])
def test_many_token_step_equals_one_token_steps_bit_for_bit(
    shape: str, weights: str, compiled: None, monkeypatch: Any
) -> None:
    """The k-token step (speculative verification) writes the same logits and cache as k one-token steps, exactly:
    greedy speculative decoding then cannot part from plain decoding."""
    dtype = torch.float32 if weights == "float" else torch.bfloat16
    model = build(shape, dtype=dtype, weights=weights, fuse=True, monkeypatch=monkeypatch)
    assert model.fused is not None and model.fused.max_tokens == 16
    vocab = model.args.vocab_size
    g = torch.Generator().manual_seed(5)
    prompt = torch.randint(0, vocab, (7,), generator=g).tolist()
    for k in (1, 2, 5, 16):
        tokens = torch.randint(0, vocab, (k,), generator=g).tolist()
        one, one_cache = decode_logits(model, prompt, tokens)
        kv = model.open_cache(len(prompt) + k)
        model.forward(torch.tensor(prompt), kv, 0)
        many = model.forward(tokens, kv, len(prompt), last_only=False, like_steps=True)
        assert kv.length == len(prompt) + k
        assert torch.equal(many, one), f"k={k}"
        assert torch.equal(kv.payload.data.float(), one_cache), f"k={k}"


@pytest.mark.parametrize("fmt", [0, 1])  # KV_F32, KV_BF16
@pytest.mark.parametrize("G, D", [(8, 256), (3, 64), (2, 128), (12, 64), (4, 32), (1, 64), (6, 32)])
@pytest.mark.parametrize("n, L0", [(16, 57), (4, 62), (2, 63)])
def test_attention_of_many_queries_equals_one_token_at_a_time_bit_for_bit(
    n: int, L0: int, G: int, D: int, fmt: int, compiled: None
) -> None:
    """wl_attend_group for n tokens against each token alone, the tokens seeing different numbers of positions across
    a chunk's end (16 tokens over up to 72 positions: the first 8 see one chunk, the others two; 4 tokens see 62 to 65,
    2 tokens 63 and 64): the same floats, on a float32 and a bfloat16 cache, and softmax(q k / sqrt(D)) v in float64
    within 1e-5. 16 x 8 queries 256 wide are more than the transposed queries' buffer takes (the scalar loop stands
    in); one token's queries 64 and 128 wide are read in place (ATTN_STRIDED; 12 of them in two groups), several
    tokens' transposed; with AVX-512, on a bfloat16 cache 32 or 64 wide, one token's 1 to 8 queries and every
    token's transposed ones take the direct path (ATTN_DIRECT: keys transposed in registers, a chunk's value rows in
    one pass, each query's last rows where its token stops)."""
    import ctypes

    import numpy as np

    lib = ctypes.CDLL(str(fused_library.compile_library()))
    f = lib.wl_attend_group
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    f.argtypes = [ptr, i64, ptr, i64, i64, ptr, i64, i64, i64, i64, i64, i64, ptr, ptr, ptr]
    f.restype = None
    L = L0 + n - 1
    rng = np.random.default_rng(3)
    values = rng.standard_normal(2 * L * D).astype(np.float32)
    kv = values if fmt == 0 else (values.view(np.uint32) >> 16).astype(np.uint16)
    q = rng.standard_normal((n, G * D)).astype(np.float32)
    at = lambda a: ctypes.c_void_p(a.ctypes.data)  # noqa: E731
    many = np.zeros((n, G * D), np.float32)
    chunk = 64  # WL_ATTN_CHUNK
    parts, scores = np.zeros(-(-L // chunk) * n * G * (D + 16), np.float32), np.zeros(n * G * chunk, np.float32)
    row = np.zeros(16 * D, np.float32)
    f(at(many), G * D, at(q), G * D, n, at(kv), fmt, 0, L * D, L0, G, D, at(parts), at(scores), at(row))
    for t in range(n):
        one = np.zeros(G * D, np.float32)
        qt = np.ascontiguousarray(q[t])
        f(at(one), G * D, at(qt), G * D, 1, at(kv), fmt, 0, L * D, L0 + t, G, D, at(parts), at(scores), at(row))
        assert np.array_equal(one, many[t]), f"token {t}"
    cache = (kv.astype(np.uint32) << 16).view(np.float32) if fmt == 1 else kv
    keys, vals = cache[: L * D].reshape(L, D).astype(np.float64), cache[L * D :].reshape(L, D).astype(np.float64)
    for t in range(n):
        s = q[t].reshape(G, D).astype(np.float64) @ keys[: L0 + t].T / np.sqrt(D)
        p = np.exp(s - s.max(axis=1, keepdims=True))
        want = (p / p.sum(axis=1, keepdims=True)) @ vals[: L0 + t]
        assert np.allclose(many[t].reshape(G, D), want, atol=1e-5, rtol=1e-5), f"token {t}"


@pytest.mark.parametrize("weights", ["float", "int8"])
def test_a_prefill_runs_through_the_fused_step_where_it_pays_and_equals_one_token_steps(
    weights: str, compiled: None, monkeypatch: Any
) -> None:
    """A prompt prefilled where the k-token step beats the per-op calls (int8 at any length, float32 up to
    FLOAT_PREFILL_MAX tokens) goes through it, 16 tokens a call, and writes the logits and cache of one-token steps
    exactly; a longer float32 prompt stays on the per-op calls. One call's rows come back as the step wrote them."""
    dtype = torch.float32 if weights == "float" else torch.bfloat16
    model = build("qwen2-gqa-bias-tied", dtype=dtype, weights=weights, fuse=True, monkeypatch=monkeypatch)
    assert model.fused is not None
    calls: list[tuple[int, int | None]] = []  # tokens and logits rows of each call
    many = model.fused.many

    made: list[torch.Tensor] = []

    def counted(tokens: list[int], kv: Any, pos: int, *, rows: int | None = None) -> torch.Tensor:
        calls.append((len(tokens), rows))
        made.append(many(tokens, kv, pos, rows=rows))
        return made[-1]

    model.fused.many = counted  # type: ignore[method-assign]
    g = torch.Generator().manual_seed(9)
    for length in (3, fused.FLOAT_PREFILL_MAX, 40):
        tokens = torch.randint(0, model.args.vocab_size, (length,), generator=g)
        one_kv = model.open_cache(length)
        with torch.inference_mode():
            one = torch.cat([model.forward([int(t)], one_kv, i) for i, t in enumerate(tokens)])
        calls.clear()
        kv, rows_kv = model.open_cache(length), model.open_cache(length)
        with torch.inference_mode():
            last = model.forward(tokens, kv, 0)
            rows = model.forward(tokens, rows_kv, 0, last_only=False)
        assert kv.length == rows_kv.length == length
        if weights == "int8" or length <= fused.FLOAT_PREFILL_MAX:
            chunks = [16] * (length // 16) + ([length % 16] if length % 16 else [])
            # last_only: the chunks before the last skip the head, the last makes its last row; then all rows
            assert calls == [(c, 0) for c in chunks[:-1]] + [(chunks[-1], 1)] + [(c, None) for c in chunks], calls
            assert torch.equal(rows, one) and torch.equal(last, one[-1:]), length
            assert torch.equal(kv.payload.data, one_kv.payload.data), length
            if len(chunks) == 1:  # one call's rows as the step wrote them: no copy on torch's threads (model.py)
                assert rows.data_ptr() == made[-1].data_ptr(), length
        else:
            assert calls == [], calls
            assert torch.allclose(rows, one, atol=1e-4), length


def test_many_token_step_refuses_what_does_not_fit(compiled: None, monkeypatch: Any) -> None:
    model = build("odd-widths-head-dim", dtype=torch.float32, weights="float", fuse=True, monkeypatch=monkeypatch)
    assert model.fused is not None
    kv = model.open_cache(20)
    with pytest.raises(ValueError, match="refused 17 tokens"):
        model.fused.many([1] * 17, kv, 0)
    with pytest.raises(ValueError, match="refused 2 tokens"):
        model.fused.many([1, 70], kv, 0)  # 70 is past the vocabulary
    with pytest.raises(ValueError, match="refused 4 tokens"):
        model.fused.many([1, 2, 3, 4], kv, 18)  # past the cache
    with pytest.raises(ValueError, match="refused 2 tokens"):
        model.fused.many([1, 2], kv, 0, rows=3)  # more logits rows than tokens
    assert (
        len(model.forward(list(range(17)), kv, 0, last_only=False, like_steps=True)) == 17
    )  # more than one call takes: the per-op calls


def _with_threads(n: int) -> Any:
    """A context that sets torch's threads (which the fused step follows) and puts them back."""
    import contextlib

    @contextlib.contextmanager
    def ctx() -> Any:
        before = torch.get_num_threads()
        torch.set_num_threads(n)
        try:
            yield
        finally:
            torch.set_num_threads(before)

    return ctx()


@pytest.mark.parametrize("prompt_len", [70, 60, 54])
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("weights", ["float", "int8"])
def test_the_step_on_several_threads_equals_one_thread_bit_for_bit(
    shape: str, weights: str, prompt_len: int, compiled: None, monkeypatch: Any
) -> None:
    """Products and attention are split between threads by output rows and by KV heads (and 4 tokens at a time of a
    step of more than 4, or the chunks of 64 positions of a step of up to 4: the prompt of 70 makes two), so every
    value is computed as one thread computes it: one-token and k-token steps (3 and 5 tokens) give the same logits and
    cache on 1, 2 and 3 threads. The prompts of 60 and 54 put a one-token step (at position 64) and a 3-token step (at
    62..64) where the last token's own position begins a chunk of 64, the one a step of several threads left out
    (2026-12-07: their attention merged a chunk nobody had written)."""
    dtype = torch.float32 if weights == "float" else torch.bfloat16
    model = build(shape, dtype=dtype, weights=weights, fuse=True, monkeypatch=monkeypatch)
    vocab = model.args.vocab_size
    g = torch.Generator().manual_seed(6)
    prompt = torch.randint(0, vocab, (prompt_len,), generator=g).tolist()
    tokens = torch.randint(0, vocab, (16,), generator=g)
    results = []
    for threads in (1, 2, 3):
        kv = model.open_cache(len(prompt) + 16)
        model.forward(torch.tensor(prompt), kv, 0)  # per-op prefill on one thread (torch's float GEMM splits sums)
        with _with_threads(threads):
            one = torch.cat([model.forward(tokens[i : i + 1], kv, len(prompt) + i) for i in range(8)])
            few = model.forward(tokens[8:11].tolist(), kv, len(prompt) + 8, last_only=False, like_steps=True)
            many = model.forward(tokens[11:].tolist(), kv, len(prompt) + 11, last_only=False, like_steps=True)
        results.append((one, few, many, kv.payload.data.clone()))
    for one, few, many, cache in results[1:]:
        assert torch.equal(one, results[0][0]) and torch.equal(few, results[0][1]) and torch.equal(many, results[0][2])
        assert torch.equal(cache, results[0][3])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_greedy_tokens_through_the_threaded_step_equal_the_per_op_path(
    seed: int, compiled: None, monkeypatch: Any
) -> None:
    """float32, weights at std 0.1 (at 0.02 a random model repeats one token and any path would agree): the fused
    step on 1 and 2 threads writes the per-op path's 40 greedy tokens. (int8 is not compared here: the fused step
    quantises activations to 8 bits and the per-op path keeps them in bfloat16, so on random weights, where near-ties
    are everywhere, their texts part; test_int8_fused_step_stays_close_to_the_per_op_int8_step bounds the gap.)"""
    from waferline.engine.generate import generate
    from waferline.engine.kvcache import Session

    args = ModelArgs(**{**SHAPES["qwen2-gqa-bias-tied"], "vocab_size": 512, "dim": 128, "intermediate_size": 256})
    state = {k: v if "norm" in k else 5 * v for k, v in init_random(args, seed=seed).items()}
    texts = []
    for fuse, threads in ((False, 1), (True, 1), (True, 2)):
        monkeypatch.setenv("WAFERLINE_FUSED", "1" if fuse else "0")
        model = Transformer(args, TorchDevice())
        model.load(from_hf(args, state.items()))
        assert (model.fused is not None) == fuse
        with _with_threads(threads):
            texts.append(generate(Session(model, "t", max_tokens=64), [1, 2, 3, 4, 5], max_new_tokens=40).tokens)
    assert len(set(texts[0])) > 10, "a degenerate text would prove nothing"
    assert texts[1] == texts[0] and texts[2] == texts[0]


def _read_probe(sizes: tuple[int, ...], seed: int) -> tuple[Any, int, list[torch.Tensor]]:
    """waferline_read over random buffers of these sizes, as read(threads) -> checksum; the checksum it must give (the
    sum of the buffers' 8-byte words plus their trailing bytes, mod 2^64); the buffers."""
    import ctypes

    lib = fused_library.library()
    assert lib is not None
    g = torch.Generator().manual_seed(seed)
    bufs = [torch.randint(0, 256, (n,), dtype=torch.uint8, generator=g) for n in sizes]
    expected = 0
    for b in bufs:
        words = len(b) // 8
        expected += int(b[: words * 8].view(torch.int64).sum()) + int(b[words * 8 :].sum())
    ptrs = (ctypes.c_void_p * len(bufs))(*(b.data_ptr() for b in bufs))
    lengths = torch.tensor([len(b) for b in bufs], dtype=torch.int64)

    def read(threads: int) -> int:
        return int(lib.waferline_read(ptrs, lengths.data_ptr(), len(bufs), threads))

    return read, expected % (1 << 64), bufs


def test_the_read_probe_reads_every_byte(compiled: None) -> None:
    """The roofline's read (waferline_read) covers each buffer to its last byte, whatever the size and threads: its
    checksum is the sum of the buffers' 8-byte words plus their trailing bytes."""
    read, expected, bufs = _read_probe((1, 7, 4096, 4103, 70001, 300000), seed=0)
    for threads in (1, 2, 3):
        assert read(threads) == expected
    assert fused_library.read_seconds(bufs, threads=2, repeats=2) > 0


def test_a_worker_that_loses_its_core_is_a_stall_and_the_caller_then_runs_alone(compiled: None) -> None:
    """fused_pool.c: a worker asleep in the middle of its chunk (20 ms, as a preempted one) keeps the caller waiting
    far longer than its own chunk (0.2 ms): a stall, after which the caller runs its products alone for 16 times the
    wait; then the workers are tried again. (The caller may run both chunks before the worker comes: tried again.)"""
    lib = fused_library.library()
    assert lib is not None
    fused_library.pool_stats()  # counted from here
    for _ in range(50):
        if lib.waferline_pool_stall_probe(200, 20_000) > 0:
            break
    else:
        pytest.fail("the worker never took its chunk")
    stats = fused_library.pool_stats()
    assert stats["stalls"] == 1, stats
    assert lib.waferline_pool_stall_probe(0, 20_000) == 0  # within the next 320 ms: alone, no worker asleep
    assert fused_library.pool_stats() == {"split": 0, "alone": 1, "stalls": 0}
    assert fused_library.pool_stats() == {"split": 0, "alone": 0, "stalls": 0}  # read once, then counted afresh


def test_the_pool_runs_every_chunk_once_whatever_the_threads(compiled: None) -> None:
    """wl_parallel shares a product's chunks out in one part per thread, each thread taking from the front of its own
    and then from the back of the others': through the read probe (one product per buffer, each chunk adding its
    bytes to a checksum), a chunk taken twice or by nobody changes the sum. Many products in a row, on more threads
    than cores too, so that workers arrive late, steal, and find their part already taken."""
    read, expected, _ = _read_probe((65536 * 2 + 5, 65536 * 37 + 11, 3 << 20), seed=1)
    for _ in range(40):
        for threads in (2, 3, 5, 8):
            assert read(threads) == expected


def test_two_callers_at_once_get_the_same_logits(compiled: None, monkeypatch: Any) -> None:
    """Two models stepped from two Python threads at once (ctypes lets go of the GIL): one of them holds the worker
    threads, the other runs its step alone, and both get what they get one after the other."""
    import threading

    models = [build(s, dtype=torch.float32, weights="float", fuse=True, monkeypatch=monkeypatch) for s in SHAPES]
    models = models[:2]

    def run(model: Transformer, out: list[torch.Tensor]) -> None:
        kv = model.open_cache(60)
        model.forward(torch.tensor([1, 2, 3]), kv, 0)
        for i in range(50):
            out.append(model.forward(torch.tensor([(5 * i) % 40]), kv, 3 + i))

    alone: list[list[torch.Tensor]] = [[], []]
    together: list[list[torch.Tensor]] = [[], []]
    with _with_threads(2):
        for model, out in zip(models, alone, strict=True):
            run(model, out)
        workers = [threading.Thread(target=run, args=(m, o)) for m, o in zip(models, together, strict=True)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    for a, b in zip(alone, together, strict=True):
        assert len(b) == 50 and all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


def test_a_model_over_the_limit_says_why_it_stays_per_op(monkeypatch: Any, caplog: Any) -> None:
    monkeypatch.setattr("waferline.hardware.torch_backend.torch_device.FUSE_MAX_WEIGHT_BYTES", 1000)
    args = ModelArgs(**SHAPES["odd-widths-head-dim"])
    model = Transformer(args, TorchDevice())
    with caplog.at_level("INFO", logger="waferline.hardware"):
        model.load(from_hf(args, init_random(args).items()))
    assert model.fused is None
    lines = [r.getMessage() for r in caplog.records if "not the fused C step" in r.getMessage()]
    assert len(lines) == 1 and "over the 0.0 GB it is measured up to" in lines[0]


def test_a_forked_child_steps_without_the_parents_workers(compiled: None, monkeypatch: Any) -> None:
    """fork() copies the pool but not its threads: the child starts an empty pool and gets the same logits."""
    import os

    model = build("qwen2-gqa-bias-tied", dtype=torch.float32, weights="float", fuse=True, monkeypatch=monkeypatch)
    kv = model.open_cache(16)
    model.forward(torch.tensor([1, 2, 3]), kv, 0)
    with _with_threads(2):
        expected = model.forward(torch.tensor([4]), kv, 3)  # the parent's workers exist now
        model.device.kv_truncate(kv, 3)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: one step on 2 threads, then report whether it matched
            ok = torch.equal(model.forward(torch.tensor([4]), kv, 3), expected)
            os.write(write, b"1" if ok else b"0")
            os._exit(0)
        os.close(write)
        _, status = os.waitpid(pid, 0)
        assert os.read(read, 1) == b"1" and status == 0
