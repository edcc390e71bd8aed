"""generate(): greedy equals the model's argmax, every stop rule, budgets on a fake clock, seeded sampling."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from waferline.engine.generate import generate, prefill, sample
from waferline.engine.hf import from_hf, init_random
from waferline.engine.kvcache import Session
from waferline.engine.model import ModelArgs, Transformer
from waferline.engine.tokenizer import Tokenizer, byte_fallback_tokenizer
from waferline.hardware import open_device

ARGS = ModelArgs(
    model_type="qwen2",
    vocab_size=512,
    dim=64,
    n_layers=2,
    n_heads=4,
    n_kv_heads=2,
    intermediate_size=128,
    max_seq_len=128,
    qkv_bias=True,
    tie_embeddings=False,
    norm_eps=1e-6,
)  # fmt: skip  (untied: a random tied model mostly repeats its last token)


@pytest.fixture(scope="module")
def model() -> Transformer:
    m = Transformer(ARGS, open_device("cpu", dtype=torch.float32))
    # weights at std 0.1 (not 0.02) so that greedy choices are not near-ties
    m.load(
        from_hf(ARGS, ((k, v if k.endswith("norm.weight") else v * 5) for k, v in init_random(ARGS, seed=0).items()))
    )
    return m


TOKENIZER = byte_fallback_tokenizer(ARGS.vocab_size)
PROMPT = TOKENIZER.encode("def add(a, b):\n    return")  # 18 ids


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return TOKENIZER


def fresh(model: Transformer, max_tokens: int | None = None) -> Session:
    return Session(model, "t", max_tokens=max_tokens)


def manual_greedy(model: Transformer, prompt: list[int], n: int) -> list[int]:
    """Greedy by recomputing the whole sequence for every token (no cache reuse between steps)."""
    seq = list(prompt)
    with torch.inference_mode():
        for _ in range(n):
            logits = model.forward(torch.tensor(seq), model.open_cache(len(seq)), 0)
            seq.append(int(logits[-1].argmax()))
    return seq[len(prompt) :]


def test_greedy_equals_recomputed_argmax_and_reports_counts(model: Transformer) -> None:
    r = generate(fresh(model), PROMPT, max_new_tokens=12)
    assert r.tokens == manual_greedy(model, PROMPT, 12)
    assert r.stop_reason == "max_tokens" and r.new_tokens == 12
    assert (r.prompt_tokens, r.reused_tokens, r.prefilled_tokens, r.decode_steps) == (18, 0, 18, 11)
    assert r.prefill_s >= 0 and r.decode_s >= 0


def test_chunked_prefill_equals_one_pass(model: Transformer) -> None:
    a, b = fresh(model), fresh(model)
    with torch.inference_mode():
        one = prefill(a, PROMPT, chunk_size=64)
        chunked = prefill(b, PROMPT, chunk_size=3)
        assert chunked is not None and one is not None
        torch.testing.assert_close(chunked, one, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(a.step(5).logits, b.step(5).logits, atol=1e-5, rtol=1e-5)


def test_stop_token_ends_generation_and_is_not_returned(model: Transformer) -> None:
    greedy = generate(fresh(model), PROMPT, max_new_tokens=12).tokens
    stop = greedy[4]
    first = greedy.index(stop)
    assert first > 0, "pick a model whose greedy tokens vary"
    r = generate(fresh(model), PROMPT, max_new_tokens=12, stop_token_ids=[stop, 100_000])
    assert r.stop_reason == "stop_token" and r.stop_token == stop
    assert r.tokens == greedy[:first]


def test_stop_string_cuts_the_text_and_is_never_streamed(model: Transformer, tok: Tokenizer) -> None:
    full = generate(fresh(model), PROMPT, max_new_tokens=24, tokenizer=tok)
    text = full.text
    stop = next(text[i : i + 2] for i in range(3, len(text) - 2) if "\ufffd" not in text[i : i + 2])
    streamed: list[str] = []
    r = generate(
        fresh(model), PROMPT, max_new_tokens=24, tokenizer=tok, stop_strings=[stop, "never appears \x00"],
        on_token=lambda _t, delta: streamed.append(delta),
    )  # fmt: skip
    assert r.stop_reason == "stop_string"
    assert r.text == text[: text.index(stop)]
    assert "".join(streamed) == r.text  # the stop string's start was held back, never shown
    assert r.tokens == full.tokens[: len(r.tokens)] and len(r.tokens) < 24


def test_streamed_text_equals_the_decoded_tokens(model: Transformer, tok: Tokenizer) -> None:
    seen: list[tuple[int, str]] = []
    r = generate(fresh(model), PROMPT, max_new_tokens=16, tokenizer=tok, on_token=lambda t, d: seen.append((t, d)))
    assert [t for t, _ in seen] == r.tokens
    assert r.text.startswith("".join(d for _, d in seen))
    assert r.text == tok.decode(r.tokens)


def test_stop_rule_sees_the_text_so_far(model: Transformer, tok: Tokenizer) -> None:
    texts: list[str] = []

    def rule(text: str) -> bool:
        texts.append(text)
        return len(texts) == 5

    r = generate(fresh(model), PROMPT, max_new_tokens=20, tokenizer=tok, stop_rule=rule)
    assert r.stop_reason == "stop_rule" and r.new_tokens == 5
    assert r.text.startswith(texts[-1])  # plus the bytes of a character left unfinished, as decode() writes them


def test_max_new_tokens_zero_only_prefills(model: Transformer) -> None:
    session = fresh(model)
    r = generate(session, PROMPT, max_new_tokens=0)
    assert r.tokens == [] and r.stop_reason == "max_tokens" and session.tokens == PROMPT


def cancel_after(n: int) -> Callable[[], bool]:
    calls = iter(range(10_000))
    return lambda: next(calls) >= n


def test_cancellation_is_checked_between_tokens(model: Transformer) -> None:
    # call 0 is before any work; call k follows the k-th new token
    r = generate(fresh(model), PROMPT, max_new_tokens=20, should_cancel=cancel_after(4))
    assert r.stop_reason == "cancelled" and r.new_tokens == 4
    session = fresh(model)
    r = generate(session, PROMPT, max_new_tokens=20, should_cancel=lambda: True)
    assert r.stop_reason == "cancelled" and r.tokens == [] and session.length == 0


def test_cancellation_between_prefill_chunks_leaves_a_valid_prefix(model: Transformer) -> None:
    session = fresh(model)
    # call 0 is before any work, call 1 between the first and the second chunk of 4 ids
    r = generate(session, PROMPT, max_new_tokens=5, chunk_size=4, should_cancel=cancel_after(1))
    assert r.stop_reason == "cancelled" and r.tokens == []
    assert session.tokens == PROMPT[:4] and r.prefilled_tokens == 4
    again = generate(session, PROMPT, max_new_tokens=6)  # the next request reuses what was computed
    assert again.reused_tokens == 4 and again.tokens == generate(fresh(model), PROMPT, max_new_tokens=6).tokens


class FakeClock:
    """Advances one second every time it is read."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def test_time_budget_on_a_fake_clock(model: Transformer) -> None:
    r = generate(fresh(model), PROMPT, max_new_tokens=50, time_budget_s=0)
    assert r.stop_reason == "time_budget" and r.new_tokens == 1  # the first token costs only a sample
    # reads: start (1), after prefill (2), then one after each token (3, 4, 5, 6): 6 is past 1 + 4.5
    r = generate(fresh(model), PROMPT, max_new_tokens=50, time_budget_s=4.5, clock=FakeClock())
    assert r.stop_reason == "time_budget" and r.new_tokens == 4
    r = generate(fresh(model), PROMPT, max_new_tokens=3, time_budget_s=1e9, clock=FakeClock())
    assert r.stop_reason == "max_tokens"


def test_context_full_and_prompt_too_long(model: Transformer) -> None:
    session = fresh(model, max_tokens=21)
    r = generate(session, PROMPT, max_new_tokens=50)
    assert r.stop_reason == "context_full" and r.new_tokens == 4  # 18 + 3 fed back fill 21; the 4th is sampled
    assert r.tokens == generate(fresh(model), PROMPT, max_new_tokens=4).tokens
    with pytest.raises(ValueError, match=r"prompt too long: 129 tokens, but the context holds 128"):
        generate(fresh(model), (PROMPT * 8)[:129], max_new_tokens=1)


def test_bad_arguments(model: Transformer) -> None:
    with pytest.raises(ValueError, match="tokenizer"):
        generate(fresh(model), PROMPT, max_new_tokens=4, stop_strings=["\n"])
    with pytest.raises(ValueError, match="top_p"):
        generate(fresh(model), PROMPT, max_new_tokens=4, temperature=1.0, top_p=0.0)
    with pytest.raises(ValueError, match="max_new_tokens"):
        generate(fresh(model), PROMPT, max_new_tokens=-1)


def test_seeded_sampling_is_reproducible(model: Transformer) -> None:
    def run(seed: int, **kw: float) -> list[int]:
        return generate(fresh(model), PROMPT, max_new_tokens=16, temperature=1.5, seed=seed, **kw).tokens

    assert run(7) == run(7)
    assert run(7, top_p=0.9) == run(7, top_p=0.9)
    assert len({tuple(run(s)) for s in range(4)}) > 1  # different seeds draw differently at this temperature
    assert run(3, top_p=1e-6) == generate(fresh(model), PROMPT, max_new_tokens=16).tokens  # nucleus of one = greedy


def test_sample_respects_the_nucleus() -> None:
    logits = torch.tensor([4.0, 3.9, -10.0, -10.0])
    g = torch.Generator().manual_seed(0)
    assert {sample(logits, temperature=1.0, top_p=0.9, generator=g) for _ in range(50)} == {0, 1}
    assert {sample(logits, temperature=1.0, top_p=0.5, generator=g) for _ in range(50)} == {0}  # 0 alone has 0.52
    assert sample(logits) == 0
