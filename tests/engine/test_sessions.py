"""KV-cached sessions: cached decode equals recomputation, prefix reuse equals a fresh prefill, eviction is safe."""

from __future__ import annotations

import pytest
import torch
from torch import Tensor

from waferline.engine.generate import generate
from waferline.engine.hf import from_hf, init_random
from waferline.engine.kvcache import Session, SessionClosedError, SessionPool, common_prefix, session_bytes
from waferline.engine.model import ModelArgs, Transformer
from waferline.hardware import open_device

ARGS = ModelArgs(
    model_type="qwen2", vocab_size=512, dim=64, n_layers=2, n_heads=4, n_kv_heads=2, intermediate_size=128,
    max_seq_len=96, qkv_bias=True, tie_embeddings=True, norm_eps=1e-6,
)  # fmt: skip


@pytest.fixture(scope="module")
def model() -> Transformer:
    m = Transformer(ARGS, open_device("cpu", dtype=torch.float32))
    m.load(from_hf(ARGS, init_random(ARGS, seed=0).items()))
    return m


def ids(n: int, seed: int = 0) -> list[int]:
    return torch.randint(0, ARGS.vocab_size, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


def full_logits(model: Transformer, tokens: list[int]) -> Tensor:
    """Every position's logits from one forward pass over the whole sequence in a fresh cache."""
    with torch.inference_mode():
        return model.forward(torch.tensor(tokens), model.open_cache(len(tokens)), 0, last_only=False)


def test_cached_decode_equals_full_recomputation(model: Transformer) -> None:
    tokens = ids(40)
    reference = full_logits(model, tokens)  # (40, vocab)
    session = Session(model, "s")
    with torch.inference_mode():
        first = session.forward(tokens[:25], last_only=False)  # a prompt chunk ...
        steps = [session.forward([t])[0] for t in tokens[25:]]  # ... then one token at a time
    torch.testing.assert_close(first, reference[:25], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(torch.stack(steps), reference[25:], atol=1e-5, rtol=1e-5)
    assert session.tokens == tokens and session.kv.length == 40


def test_prefix_reuse_equals_a_fresh_prefill(model: Transformer) -> None:
    old = ids(30, seed=1)
    new = old[:20] + ids(7, seed=2)  # the user edited the end of the prompt
    session = Session(model, "doc")
    with torch.inference_mode():
        session.forward(old)
        reused = session.reuse_prefix(new)
        assert reused == common_prefix(old, new) == 20
        assert session.tokens == new[:20] and session.kv.length == 20
        logits = session.forward(new[reused:], last_only=False)
    torch.testing.assert_close(logits, full_logits(model, new)[20:], atol=1e-5, rtol=1e-5)


def test_prepare_keeps_one_token_to_prefill(model: Transformer) -> None:
    prompt = ids(12, seed=3)
    session = Session(model, "doc")
    with torch.inference_mode():
        session.forward(prompt)
        assert session.reuse_prefix(prompt) == 11  # the same prompt: all but the last token
        assert session.length == 11
        last = session.forward(prompt[11:])
        torch.testing.assert_close(last[0], full_logits(model, prompt)[-1], atol=1e-5, rtol=1e-5)
        assert session.reuse_prefix(prompt[:5]) == 4  # a shorter prompt that the cache extends
        other = [(prompt[0] + 1) % ARGS.vocab_size, *prompt[1:6]]  # differs from the first token on
        assert session.reuse_prefix(other) == 0 and session.length == 0
    with pytest.raises(ValueError, match="empty"):
        session.reuse_prefix([])
    with pytest.raises(ValueError, match=r"97 tokens .* context of 96"):
        session.reuse_prefix(ids(97))


def test_generation_after_reuse_equals_generation_from_scratch(model: Transformer) -> None:
    base = ids(24, seed=4)
    warm = Session(model, "warm")
    generate(warm, base, max_new_tokens=10)
    edited = base + ids(3, seed=5)  # typed three more tokens
    r_warm = generate(warm, edited, max_new_tokens=12)
    r_cold = generate(Session(model, "cold"), edited, max_new_tokens=12)
    assert r_warm.reused_tokens == 24 and r_warm.prefilled_tokens == 3
    assert r_cold.reused_tokens == 0 and r_cold.prefilled_tokens == 27
    assert r_warm.tokens == r_cold.tokens


def test_session_size_is_capped_by_the_model_context(model: Transformer) -> None:
    assert Session(model, "a", max_tokens=32).max_tokens == 32
    assert Session(model, "b", max_tokens=10_000).max_tokens == ARGS.max_seq_len
    s = Session(model, "c", max_tokens=32)
    assert s.nbytes == session_bytes(model, 32) == 2 * 2 * 2 * 16 * 4 * 32


def test_lru_eviction_under_a_memory_cap_never_corrupts_another_session(model: Transformer) -> None:
    per = session_bytes(model, 64)
    pool = SessionPool(model, max_bytes=2 * per + per // 2, max_tokens_per_session=64)  # room for two sessions
    prompts = {name: ids(16, seed=10 + i) for i, name in enumerate("abc")}
    expected = {name: generate(Session(model, "ref"), p, max_new_tokens=6).tokens for name, p in prompts.items()}

    # interleave three documents over two slots; each request also reuses its own cache when it is still live
    order = ["a", "b", "a", "c", "b", "a", "c", "c", "b", "a"]
    held: dict[str, Session] = {}
    for name in order:
        session = pool.get(name)
        held.setdefault(name, session)
        assert pool.bytes_used <= pool.max_bytes and len(pool) <= 2
        result = generate(session, prompts[name], max_new_tokens=6)
        assert result.tokens == expected[name], f"session {name} produced other tokens after interleaving"
    assert pool.evictions >= 4
    assert list(pool) == ["b", "a"]  # least recently used first
    assert "c" not in pool

    # a caller that kept an evicted session gets an error, never someone else's cache
    stale = held["c"]
    assert stale.closed
    with pytest.raises(SessionClosedError):
        generate(stale, prompts["c"], max_new_tokens=2)


def test_pool_reuses_a_live_session_and_drops_on_request(model: Transformer) -> None:
    pool = SessionPool(model, max_tokens_per_session=32)
    s = pool.get("doc")
    generate(s, ids(10), max_new_tokens=3)
    assert pool.get("doc") is s
    r = generate(pool.get("doc"), [*ids(10), 7], max_new_tokens=2)
    assert r.reused_tokens == 10
    pool.drop("doc")
    pool.drop("never-opened")
    assert s.closed and "doc" not in pool and pool.bytes_used == 0


def test_pool_rejects_a_cap_below_one_session(model: Transformer) -> None:
    with pytest.raises(ValueError, match="cannot hold one session"):
        SessionPool(model, max_bytes=100, max_tokens_per_session=64)
