"""The torch backend's ops against straightforward reference math, and its int8 path against float."""

from __future__ import annotations

import pytest
import torch
from torch import Tensor

from waferline.engine.hf import from_hf, init_random
from waferline.engine.model import ModelArgs, Transformer, rope_tables
from waferline.hardware import KVRef, open_device
from waferline.hardware.torch_backend import TorchDevice
from waferline.hardware.torch_backend.kernels import quantize_int8

pytestmark = pytest.mark.usefixtures("single_thread")


def ref_rms_norm(x: Tensor, w: Tensor, eps: float) -> Tensor:
    x64 = x.double()
    return (x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + eps) * w.double()).float()


def ref_rotary(x: Tensor, cos: Tensor, sin: Tensor, start: int) -> Tensor:
    """Hugging Face's rotate_half form: x * cos + rotate_half(x) * sin, cos/sin repeated over both halves."""
    T, _, D = x.shape
    c = torch.cat((cos, cos), -1)[start : start + T, None, :]
    s = torch.cat((sin, sin), -1)[start : start + T, None, :]
    rotated = torch.cat((-x[..., D // 2 :], x[..., : D // 2]), -1)
    return x * c + rotated * s


def ref_attention(q: Tensor, keys: Tensor, values: Tensor, start: int) -> Tensor:
    """q: (T, H, D) at positions start..; keys, values: (end, KVH, D). Naive softmax attention, causal, GQA."""
    T, H, D = q.shape
    end, KVH, _ = keys.shape
    k = keys.repeat_interleave(H // KVH, dim=1).double()  # (end, H, D)
    v = values.repeat_interleave(H // KVH, dim=1).double()
    scores = torch.einsum("thd,shd->hts", q.double(), k) / D**0.5  # (H, T, end)
    pos = torch.arange(start, start + T)[:, None]
    scores = scores.masked_fill(torch.arange(end)[None, :] > pos, float("-inf"))
    out = torch.einsum("hts,shd->thd", scores.softmax(-1), v)  # (T, H, D)
    return out.reshape(T, H * D).float()


def test_linear_matches_matmul_with_and_without_bias() -> None:
    g = torch.Generator().manual_seed(0)
    w, b, x = torch.randn(48, 32, generator=g), torch.randn(48, generator=g), torch.randn(5, 32, generator=g)
    for dtype, tol in ((torch.float32, 1e-5), (torch.bfloat16, 5e-2)):
        dev = TorchDevice(dtype=dtype)
        W, B = dev.place("w", w), dev.place("b", b, role="bias")
        xd = x.to(dtype)
        ref = xd.float() @ w.to(dtype).float().T
        torch.testing.assert_close(dev.linear(xd, W).float(), ref, atol=tol, rtol=tol)
        torch.testing.assert_close(dev.linear(xd, W, B).float(), ref + b.to(dtype).float(), atol=tol, rtol=tol)
        torch.testing.assert_close(dev.linear(xd[:1], W).float(), ref[:1], atol=tol, rtol=tol)  # one token


def test_int8_quantisation_error_is_within_half_a_step_per_weight() -> None:
    w = torch.randn(64, 40, generator=torch.Generator().manual_seed(1))
    w[3] = 0.0  # an all-zero row must not divide by zero
    qw = quantize_int8(w, torch.bfloat16)
    assert qw.q.dtype == torch.int8 and qw.q.shape == (64, 40) and qw.scale.shape == (64,)
    step = qw.scale.float()[:, None]  # (out, 1), rounded to bfloat16 before quantising
    overshoot = (w.abs().amax(1, keepdim=True) - 127 * step).clamp(min=0)  # where the rounded scale clips a row's max
    assert ((qw.dequantize() - w).abs() <= step / 2 + overshoot + 1e-7).all()
    assert (qw.dequantize()[3] == 0).all()


def test_int8_linear_equals_its_dequantised_weight() -> None:
    g = torch.Generator().manual_seed(2)
    w, b, x = torch.randn(96, 64, generator=g), torch.randn(96, generator=g), torch.randn(3, 64, generator=g)
    dev = TorchDevice(dtype=torch.bfloat16, weights="int8")
    W, B = dev.place("w", w), dev.place("b", b, role="bias")
    xb = x.to(torch.bfloat16)
    ref = xb.float() @ W.payload.dequantize().T + b.to(torch.bfloat16).float()
    torch.testing.assert_close(dev.linear(xb, W, B).float(), ref, atol=0.1, rtol=2e-2)
    with pytest.raises(ValueError, match="bfloat16 or float16"):
        TorchDevice(dtype=torch.float32, weights="int8")


@pytest.mark.parametrize("n_in", [24, 40, 50, 33])
def test_int8_linear_handles_input_widths_the_torch_kernel_does_not(n_in: int) -> None:
    """`_weight_int8pack_mm` returns garbage (or crashes) unless the width is a multiple of 32; the backend pads."""
    g = torch.Generator().manual_seed(n_in)
    w, x = torch.randn(70, n_in, generator=g), torch.randn(2, n_in, generator=g).to(torch.bfloat16)
    W = TorchDevice(dtype=torch.bfloat16, weights="int8").place("w", w)
    ref = x.float() @ W.payload.dequantize().T
    torch.testing.assert_close(W.payload.q, W.payload.q_mm[:, :n_in])
    torch.testing.assert_close(TorchDevice(dtype=torch.bfloat16, weights="int8").linear(x, W).float(), ref, atol=0.1,
                               rtol=2e-2)  # fmt: skip


def test_rms_norm_matches_reference() -> None:
    g = torch.Generator().manual_seed(3)
    x, w = torch.randn(4, 64, generator=g) * 3, torch.rand(64, generator=g) + 0.5
    dev = TorchDevice()
    out = dev.rms_norm(x, dev.place("n", w, role="norm"), 1e-6)
    assert out.shape == (4, 64)
    torch.testing.assert_close(out, ref_rms_norm(x, w, 1e-6), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(dev.rms_norm(x[2:3], dev.place("n", w, role="norm"), 1e-6), out[2:3])


@pytest.mark.parametrize("start", [0, 7])
def test_rotary_matches_rotate_half_reference(start: int) -> None:
    args = ModelArgs(dim=64, n_heads=4, n_kv_heads=2, max_seq_len=32, rope_theta=500.0)
    cos, sin = rope_tables(args, args.max_seq_len)
    dev = TorchDevice()
    C, S = dev.place("rope.cos", cos, role="table"), dev.place("rope.sin", sin, role="table")
    x = torch.randn(3, 6, args.head_dim, generator=torch.Generator().manual_seed(4))
    torch.testing.assert_close(dev.rotary(x, C, S, start), ref_rotary(x, cos, sin, start), atol=1e-6, rtol=1e-6)


def test_attend_matches_naive_causal_gqa_for_chunks_and_single_tokens() -> None:
    H, KVH, D, total = 6, 2, 16, 11
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(total, n, D, generator=g) for n in (H, KVH, KVH))
    dev = TorchDevice()
    kv = dev.kv_open(layers=2, kv_heads=KVH, head_dim=D, max_tokens=16)
    # a 6-token chunk at 0, a 3-token chunk at 6 (sees the cache), then two single tokens
    for a, b in ((0, 6), (6, 9), (9, 10), (10, 11)):
        out = dev.attend(kv, 1, q[a:b], k[a:b], v[a:b], a)
        dev.kv_advance(kv, b)
        torch.testing.assert_close(out, ref_attention(q[a:b], k[:b], v[:b], a), atol=1e-5, rtol=1e-5)


def test_kv_truncate_then_rewrite_equals_fresh_and_close_frees() -> None:
    D, KVH, H = 8, 1, 2
    g = torch.Generator().manual_seed(6)
    q, k, v = (
        torch.randn(6, H, D, generator=g),
        torch.randn(6, KVH, D, generator=g),
        torch.randn(6, KVH, D, generator=g),
    )
    k_alt = torch.randn(6, KVH, D, generator=g)
    dev = TorchDevice()
    kv = dev.kv_open(1, KVH, D, 8)
    dev.attend(kv, 0, q[:6], k_alt[:6], v[:6], 0)  # stale keys at every position
    dev.kv_advance(kv, 6)
    dev.kv_truncate(kv, 2)
    assert kv.length == 2
    out = dev.attend(kv, 0, q[2:6], k[2:6], v[2:6], 2)
    keys = torch.cat((k_alt[:2], k[2:6]))
    torch.testing.assert_close(out, ref_attention(q[2:6], keys, v[:6], 2), atol=1e-5, rtol=1e-5)
    dev.kv_close(kv)
    assert kv.payload is None and kv.length == 0


def test_kv_bytes_follow_the_dtype() -> None:
    for dtype in (torch.float32, torch.bfloat16):
        kv: KVRef = TorchDevice(dtype=dtype).kv_open(layers=3, kv_heads=2, head_dim=8, max_tokens=10)
        assert kv.bytes_per_token == 2 * 3 * 2 * 8 * dtype.itemsize
        assert kv.nbytes == kv.bytes_per_token * 10 == kv.payload.data.numel() * dtype.itemsize


def test_swiglu_and_add() -> None:
    g = torch.Generator().manual_seed(7)
    a, b = torch.randn(2, 10, generator=g), torch.randn(2, 10, generator=g)
    dev = TorchDevice()
    torch.testing.assert_close(dev.swiglu(a, b), a * torch.sigmoid(a) * b)
    torch.testing.assert_close(dev.add(a, b), a + b)
    torch.testing.assert_close(dev.embed(dev.place("e", a, role="embedding"), torch.tensor([1, 0])), a.flip(0))


def _confident_tiny(seed: int = 0) -> tuple[ModelArgs, dict[str, Tensor]]:
    """A tiny Qwen2 model with weights at std 0.1: random std-0.02 logits are nearly flat, so any change of
    arithmetic (even float32 kernels in another order) can flip a near-tie; a trained model is not like that."""
    args = ModelArgs(
        model_type="qwen2", vocab_size=512, dim=64, n_layers=2, n_heads=4, n_kv_heads=2, intermediate_size=128,
        max_seq_len=128, qkv_bias=True, tie_embeddings=True, norm_eps=1e-6,
    )  # fmt: skip
    state = {k: v if k.endswith("norm.weight") else v * 5 for k, v in init_random(args, seed=seed).items()}
    return args, state


def _greedy(model: Transformer, prompt: Tensor, n: int) -> list[int]:
    kv = model.open_cache()
    with torch.inference_mode():
        tok = model.forward(prompt, kv, 0).argmax(-1)
        out = [int(tok)]
        for _ in range(n - 1):
            tok = model.forward(tok.view(1), kv, kv.length).argmax(-1)
            out.append(int(tok))
    return out


def test_int8_logits_track_float32_along_its_greedy_sequence(monkeypatch: pytest.MonkeyPatch) -> None:
    """Teacher-forced on the float32 model's own greedy sequence: the per-op int8 kernel's logits stay within a few
    percent and pick the same token almost everywhere. Free-running sequences of a random model part at the first
    near-tie (bfloat16 alone parts after 6 to 60 tokens), so token equality is checked on the trained model (next
    test, which also covers the fused step)."""
    monkeypatch.setenv("WAFERLINE_FUSED", "0")  # the per-op path: the fused step's int8 is the next test's
    args, state = _confident_tiny()
    prompt = torch.randint(0, args.vocab_size, (12,), generator=torch.Generator().manual_seed(0))
    reference = Transformer(args, open_device("cpu", dtype=torch.float32))
    reference.load(from_hf(args, state.items()))
    int8 = Transformer(args, open_device("cpu", dtype=torch.bfloat16, weights="int8"))
    int8.load(from_hf(args, state.items()))
    seq = torch.cat((prompt, torch.tensor(_greedy(reference, prompt, 48))))
    with torch.inference_mode():
        lf = reference.forward(seq, reference.open_cache(), 0, last_only=False)  # (T, vocab)
        lq = int8.forward(seq, int8.open_cache(), 0, last_only=False).float()
    assert (lq - lf).abs().max() < 0.05 * (lf.max() - lf.min())
    assert (lq.argmax(-1) == lf.argmax(-1)).float().mean() >= 0.9  # 0.93 here; a wrong kernel gives ~0


CODE_PROMPTS = (
    "def fibonacci(n):\n",
    "import os\n\n\ndef read_lines(path):\n",
    "for (let i = 0; i < n; i++) {",
    "class Stack:\n    def __init__(self):\n",
    "#include <stdio.h>\nint main(void) {\n",
    "fn main() {\n    let v = vec![1, 2, 3];\n",
)


@pytest.mark.parametrize("fuse", [False, True])
def test_int8_tracks_float32_on_the_trained_model(fuse: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """On the shipped model, int8's logits stay close to float32's along float32's greedy continuation of code
    prompts, and free-running, int8 writes float32's 32 tokens exactly for some prompts. Per-op (float activations
    times int8 weights): within 3% of the logits' range at every position and 1.5% on average (the stage-3 model,
    2026-12-05: 2.3% at worst, on the C prompt, 1.0-1.2% on average, 3 of 6 prompts identical; stage 2: 2.0%, 1.0%,
    5 of 6). The fused step, which also rounds each product's input to 8 bits, and which decodes (and, for int8,
    prefills) by default: within 5% and 3% (stage 3: 4.3% at worst, 1.9-2.5% on average, 2 of 6 identical; stage 2:
    3.8%, 2.0%, 4 of 6). Whether 32 greedy tokens match flips on near-ties; what the user sees through int8 is
    measured end to end by eval-editor. A wrong kernel is off by the whole range, and writes none of them."""
    monkeypatch.setenv("WAFERLINE_FUSED", "1" if fuse else "0")
    worst, mean = (0.05, 0.03) if fuse else (0.03, 0.015)
    from waferline.engine.checkpoint import DEFAULT_MODEL_DIR, load_model
    from waferline.engine.weights import stream_tensors, weight_shards

    if not (DEFAULT_MODEL_DIR / "config.json").is_file():
        pytest.skip("the trained default model is not in this checkout")
    loaded = load_model(DEFAULT_MODEL_DIR, dtype="float32")
    reference = loaded.model
    int8 = Transformer(loaded.args, open_device("cpu", dtype=torch.bfloat16, weights="int8"))
    int8.load(from_hf(loaded.args, stream_tensors(weight_shards(DEFAULT_MODEL_DIR))))
    identical = 0
    for text in CODE_PROMPTS:
        prompt = torch.tensor(loaded.tokenizer.encode(text))
        ref = _greedy(reference, prompt, 32)
        seq = torch.cat((prompt, torch.tensor(ref)))
        with torch.inference_mode():  # the logits that chose each new token, both models fed float32's sequence
            lf = reference.forward(seq, reference.open_cache(), 0, last_only=False)[len(prompt) - 1 : -1]
            lq = int8.forward(seq, int8.open_cache(), 0, last_only=False).float()[len(prompt) - 1 : -1]
        ratio = (lq - lf).abs().amax(-1) / (lf.amax(-1) - lf.amin(-1))
        assert ratio.max() < worst and ratio.mean() < mean, (text, ratio.max(), ratio.mean())
        identical += _greedy(int8, prompt, 32) == ref
    assert (int8.fused is not None) == fuse
    assert identical >= (2 if fuse else 3), (
        f"int8 wrote float32's tokens for only {identical} of {len(CODE_PROMPTS)} prompts"
    )
