"""Speculative decoding: drafts from n-gram lookup and from the caller, verified k tokens per step, never changing
what generation writes (greedy token for token; sampling in distribution)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from waferline.engine.generate import generate, sample
from waferline.engine.hf import from_hf, init_random
from waferline.engine.kvcache import Session
from waferline.engine.loader import load
from waferline.engine.model import ModelArgs, Transformer
from waferline.engine.speculate import STEP_WINDOW, Drafter, DraftPolicy, sample_draft
from waferline.hardware import open_backend

ARGS = ModelArgs(
    model_type="qwen2", vocab_size=64, dim=64, n_layers=2, n_heads=4, n_kv_heads=2, intermediate_size=128,
    max_seq_len=256, qkv_bias=True, tie_embeddings=False, norm_eps=1e-6,
)  # fmt: skip


def build(weights: str, *, fuse: bool, monkeypatch: pytest.MonkeyPatch) -> Transformer:
    monkeypatch.setenv("WAFERLINE_FUSED", "1" if fuse else "0")
    m = Transformer(ARGS, open_backend("cpu", weights))
    state = init_random(ARGS, seed=11)
    m.load(from_hf(ARGS, ((k, v if k.endswith("norm.weight") else v * 5) for k, v in state.items())))
    return m


@pytest.fixture(scope="module", params=["float32", "int8"])
def model(request: Any) -> Transformer:
    with pytest.MonkeyPatch.context() as mp:
        return build(request.param, fuse=True, monkeypatch=mp)


def both(
    model: Transformer, prompt: list[int], n: int, caller: list[int], policy: DraftPolicy | None = None, **kw: Any
) -> tuple[Any, Any, Session]:
    """(plain result, speculative result, the speculative session) for one prompt; the speculative session holds
    exactly the tokens the plain one does."""
    plain_session = Session(model, "p")
    plain = generate(plain_session, prompt, max_new_tokens=n, **kw)
    session = Session(model, "s")
    drafter = Drafter(prompt, policy or DraftPolicy(), caller=caller)
    spec = generate(session, prompt, max_new_tokens=n, drafter=drafter, **kw)
    assert session.tokens == plain_session.tokens and session.kv.length == session.length
    return plain, spec, session


repeating = st.lists(st.integers(0, ARGS.vocab_size - 1), min_size=2, max_size=12).flatmap(
    lambda unit: st.integers(1, 6).map(lambda times: (unit * times)[:120])
)  # prompts that repeat a unit, so that n-gram lookup drafts (and is often wrong)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    prompt=st.one_of(repeating, st.lists(st.integers(0, ARGS.vocab_size - 1), min_size=1, max_size=60)),
    caller=st.lists(st.integers(0, ARGS.vocab_size - 1), max_size=20),
    n=st.integers(0, 40),
    stop=st.sampled_from([(), (3,), (3, 17, 40)]),
)
def test_greedy_speculative_equals_plain_token_for_token(
    model: Transformer, prompt: list[int], caller: list[int], n: int, stop: tuple[int, ...]
) -> None:
    plain, spec, _ = both(model, prompt, n, caller, stop_token_ids=stop)
    assert spec.tokens == plain.tokens
    assert spec.token_logprobs == plain.token_logprobs  # the fused k-token step's rows equal one-token steps exactly
    assert (spec.stop_reason, spec.stop_token) == (plain.stop_reason, plain.stop_token)
    assert spec.decoded_tokens == plain.decode_steps and spec.decode_steps <= plain.decode_steps
    assert spec.accepted_tokens <= spec.drafted_tokens
    assert sum(c[0] for c in spec.draft_sources.values()) == spec.drafted_tokens


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    prompt=st.one_of(repeating, st.lists(st.integers(0, ARGS.vocab_size - 1), min_size=1, max_size=60)),
    typed=st.integers(0, 10),
    n=st.integers(1, 30),
)
def test_greedy_with_the_previous_texts_tail_as_the_draft_equals_plain(
    model: Transformer, prompt: list[int], typed: int, n: int
) -> None:
    """The server's draft: the previous request's text less what the user typed of it since, in the same session
    (which holds the previous prompt and text). The tokens and log-probabilities are plain decoding's, from a session
    with the same history decoded without drafts."""
    policy = DraftPolicy()
    session, plain_session = Session(model, "s"), Session(model, "p")
    before = generate(session, prompt, max_new_tokens=16, drafter=Drafter(prompt, policy))
    assert before.tokens == generate(plain_session, prompt, max_new_tokens=16).tokens
    k = min(typed, len(before.tokens))
    follow, tail = prompt + before.tokens[:k], before.tokens[k:]
    spec = generate(session, follow, max_new_tokens=n, drafter=Drafter(follow, policy, caller=tail))
    plain = generate(plain_session, follow, max_new_tokens=n)
    assert spec.tokens == plain.tokens and spec.token_logprobs == plain.token_logprobs
    assert session.tokens == plain_session.tokens and session.kv.length == session.length
    assert spec.decoded_tokens == plain.decode_steps


def test_caller_draft_of_the_true_continuation_is_accepted_whole(model: Transformer) -> None:
    prompt = [5, 9, 2, 33, 7]
    truth = generate(Session(model, "t"), prompt, max_new_tokens=12).tokens
    policy = DraftPolicy()
    policy.stats["caller"].accepted = 100  # a source that has held: the policy drafts all it can
    plain, spec, _ = both(model, prompt, 12, truth, policy)  # the first token comes from prefill, the rest drafted
    assert spec.tokens == plain.tokens == truth
    assert spec.draft_sources["caller"] == [10, 10] and spec.decode_steps == 1  # 11 predictions in one step


def test_rejected_tokens_are_rolled_back_so_the_next_request_is_exact(model: Transformer) -> None:
    prompt = [1, 2, 3, 4, 1, 2, 3, 4, 1, 2]
    session = Session(model, "s")
    policy = DraftPolicy()
    wrong = [60, 61, 62, 63] * 3  # a caller draft that never holds
    first = generate(session, prompt, max_new_tokens=10, drafter=Drafter(prompt, policy, caller=wrong))
    assert session.tokens == prompt + first.tokens[:-1] and session.kv.length == session.length  # max_tokens
    more = prompt + first.tokens + [7, 8]
    again = generate(session, more, max_new_tokens=10, drafter=Drafter(more, policy))
    assert again.reused_tokens == len(prompt) + len(first.tokens) - 1
    assert again.tokens == generate(Session(model, "fresh"), more, max_new_tokens=10).tokens


def test_per_op_path_verifies_exactly_where_its_products_are_row_independent(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the fused step (a model past its size cap, another backend), verification is the per-op forward over
    all k rows with attention token by token: with torch's int8 CPU kernel, whose rows do not depend on each other,
    the same tokens and log-probabilities as plain decoding; float32 GEMM sums in another order than GEMV, which
    `exact_verify` says, so the local engine does not speculate there."""
    model = build("int8", fuse=False, monkeypatch=monkeypatch)
    assert model.fused is None and model.exact_verify()
    for seed in range(6):
        g = torch.Generator().manual_seed(seed)
        unit = torch.randint(0, ARGS.vocab_size, (int(torch.randint(3, 9, (1,), generator=g)),), generator=g)
        prompt = unit.tolist() * 4
        plain, spec, _ = both(model, prompt, 24, [])
        assert spec.tokens == plain.tokens and spec.token_logprobs == plain.token_logprobs
        assert spec.drafted_tokens > 0
    assert not build("float32", fuse=False, monkeypatch=monkeypatch).exact_verify()
    assert build("float32", fuse=True, monkeypatch=monkeypatch).exact_verify()


@pytest.mark.slow  # thousands of sampled tokens: 8-26 s on the 2-core machine
@pytest.mark.parametrize("top_p", [1.0, 0.7])
def test_sampling_with_a_draft_keeps_the_distribution(top_p: float) -> None:
    """sample_draft against sample on a 6-token vocabulary, 40,000 draws each, fixed seeds: total variation within
    0.02 of each other and of the exact distribution (its expected size here is about 0.005)."""
    logits = torch.tensor([2.0, 1.5, 0.3, -0.5, 1.0, -2.0])
    probs = torch.softmax(logits, -1)
    if top_p < 1.0:
        sorted_p, order = probs.sort(descending=True)
        keep = (sorted_p.cumsum(-1) - sorted_p) < top_p
        probs = torch.zeros_like(probs).scatter_(0, order, sorted_p * keep)
        probs /= probs.sum()
    n = 40_000
    for draft in (0, 2, 5):
        g = torch.Generator().manual_seed(100 + draft)
        with_draft = torch.bincount(
            torch.tensor([sample_draft(logits, draft, temperature=1.0, top_p=top_p, generator=g) for _ in range(n)]),
            minlength=6,
        ).float()
        g = torch.Generator().manual_seed(200 + draft)
        plain = torch.bincount(
            torch.tensor([sample(logits, temperature=1.0, top_p=top_p, generator=g) for _ in range(n)]), minlength=6
        ).float()
        assert 0.5 * float((with_draft / n - probs).abs().sum()) < 0.02, draft
        assert 0.5 * float((with_draft / n - plain / n).abs().sum()) < 0.02, draft
        if probs[draft] == 0:  # outside the nucleus: never drawn, draft or not
            assert with_draft[draft] == 0


def test_sampled_generation_with_drafts_keeps_the_distribution(model: Transformer) -> None:
    """Sampled generation end to end, 1,500 runs, every one drafting by n-gram lookup (the prompt holds every id
    once, so any token has a continuation): the 2nd token, which the draft decides, follows the exact marginal
    (summed over the first token) within a generous total-variation bound. Plain sampling's own distance in the same
    setting is about 0.07 (a flat distribution over 64 ids); always keeping the draft would be far off."""
    prompt = torch.randperm(ARGS.vocab_size, generator=torch.Generator().manual_seed(3)).tolist()
    temperature, n = 0.5, 1500
    with torch.inference_mode():
        s = Session(model, "exact")
        first = torch.softmax(s.forward(prompt)[-1] / temperature, -1)
        exact = torch.zeros(ARGS.vocab_size)
        for t in range(ARGS.vocab_size):
            s.truncate(len(prompt))
            exact += first[t] * torch.softmax(s.forward([t])[-1] / temperature, -1)
    counts = torch.zeros(ARGS.vocab_size)
    drafted = 0
    for i in range(n):
        drafter = Drafter(prompt, DraftPolicy())
        drafter.policy.stats["ngram"].accepted = 100  # trusted, so that it drafts every time
        r = generate(Session(model, "x"), prompt, max_new_tokens=3, temperature=temperature, seed=i, drafter=drafter)
        counts[r.tokens[1]] += 1
        drafted += r.drafted_tokens
    assert drafted >= n  # every run verified a draft
    tv = 0.5 * float((counts / n - exact).abs().sum())
    assert tv < 0.12, tv


def test_prompt_lookup_proposes_what_followed_the_last_occurrence() -> None:
    policy = DraftPolicy()
    policy.stats["ngram"].accepted = 100  # trusted: long drafts pay
    d = Drafter([1, 2, 3, 4, 5, 6, 9, 2, 3], policy)
    assert d.propose(3) == ("ngram", [4, 5, 6])  # the suffix [2, 3] occurred at 1..2
    d.push(7)
    assert d.propose(4) == ("", [])  # [3, 7], [7] never occurred before
    d = Drafter([8, 1, 2, 9, 1, 2, 5, 1, 2], policy)
    assert d.propose(2) == ("ngram", [5, 1])  # the latest occurrence wins
    assert Drafter([256, 1], policy).propose(2) == ("", [])  # a byte of 256 is not the id 1


def test_other_expected_text_is_searched_first_but_never_followed_from_its_start() -> None:
    """EditRequest.lookup (the model's previous text where the user typed something else): pieces of it are
    proposed after the same ids, never its start by position; a caller's draft, when there is one, takes its place."""
    policy = DraftPolicy()
    policy.stats["ngram"].accepted = 100
    d = Drafter([1, 2, 7], policy, also=[40, 7, 41, 42, 43])
    assert d.propose(3) == ("ngram", [41, 42, 43])  # [7] occurred in it: what followed there
    assert Drafter([1, 2, 3], policy, also=[40, 41]).propose(2) == ("", [])  # nothing of it follows [3]
    d = Drafter([1, 2, 7], policy, caller=[9], also=[40, 7, 41])  # with a caller's draft, `also` is not searched
    assert d.propose(2) == ("caller", [9])
    d.push(7)
    assert d.propose(2) == ("ngram", [7])  # [7] found in the prompt (after 2), not in `also` (41)


def test_caller_draft_is_followed_while_generation_agrees() -> None:
    policy = DraftPolicy()
    policy.stats["caller"].accepted = 100
    d = Drafter([1, 2], policy, caller=[10, 11, 12, 13])
    assert d.propose(2) == ("caller", [10, 11])
    d.push(10)
    assert d.propose(8) == ("caller", [11, 12, 13])
    d.push(99)  # generation parted from the caller's text: only n-gram lookup (over it too) remains
    assert d.propose(8) == ("", [])


def test_policy_stops_drafting_where_it_does_not_pay_and_still_probes() -> None:
    policy = DraftPolicy()
    for t in range(1, 17):
        policy.observe_step(t, 1e-3 * t)  # a step of t tokens costs t one-token steps: no draft can pay
    policy.stats["ngram"].rejections = 50
    lengths = [policy.length("ngram", 8) for _ in range(16)]
    assert lengths.count(0) == 14 and lengths.count(2) == 2  # probes every PROBE_EVERY-th time
    cheap = DraftPolicy()
    for t in range(1, 17):
        cheap.observe_step(t, 1e-3 * (1 + 0.05 * (t - 1)))
    cheap.stats["ngram"].accepted = 90
    cheap.stats["ngram"].rejections = 10
    assert cheap.length("ngram", 15) >= 8  # flat cost and 90% acceptance: draft long
    cheap.stats["ngram"].rejections = 200
    assert 0 < cheap.length("ngram", 15) < 8  # rarely right: shorter


def test_one_length_timed_on_a_bad_moment_does_not_stop_drafting() -> None:
    """Step times only ever gain from a shared machine (a wait for a core): each length keeps its least recent
    time, and the cost of a length is one slope over all of them, so a length timed once while the process waited,
    and never drafted again, does not hold its cost for good."""
    policy = DraftPolicy()
    for _ in range(8):
        policy.observe_step(1, 1e-4)
    for t in (2, 4, 8):
        for _ in range(3):
            policy.observe_step(t, 1e-4 * (1 + 0.2 * (t - 1)))
    policy.observe_step(6, 1e-2)  # preempted: a hundred one-token steps
    assert policy.cost(6) == pytest.approx(2.0)  # the slope the other lengths show
    policy.stats["ngram"].accepted, policy.stats["ngram"].rejections = 90, 10
    assert policy.length("ngram", 15) >= 4
    policy.observe_step(4, 1e-2)  # a slow step does not replace a length's best time
    assert policy.step_s[4] == pytest.approx(1e-4 * 1.6)
    for _ in range(STEP_WINDOW):  # ... until it is all the window holds
        policy.observe_step(4, 3e-4)
    assert policy.step_s[4] == pytest.approx(3e-4)


def test_shipped_model_copy_heavy_prompts_are_exact_and_drafted() -> None:
    lm = load(None, backend="cpu", weights="int8")
    prompts = [
        "class Vec:\n    def add(self, other):\n        return Vec(self.x + other.x, self.y + other.y)\n\n"
        "    def sub(self, other):\n        return Vec(",
        "COLORS = {\n    'red': (255, 0, 0),\n    'green': (0, 255, 0),\n    'blue': (0, 0, 255),\n    'red2': (",
        "def test_add():\n    assert add(1, 2) == 3\n\n\ndef test_sub():\n    assert sub(1, 2) == -1\n\n\ndef test_",
    ]
    policy = DraftPolicy()
    accepted = 0
    for text in prompts:
        ids = lm.tokenizer.encode(text)
        plain = generate(Session(lm.model, "p"), ids, max_new_tokens=48)
        spec = generate(Session(lm.model, "s"), ids, max_new_tokens=48, drafter=Drafter(ids, policy))
        assert spec.tokens == plain.tokens
        accepted += spec.accepted_tokens
    assert accepted > 0


def test_a_draft_kept_past_the_first_greedy_miss_still_gets_its_row(model: Transformer) -> None:
    """Greedy verification reads rows only up to the first draft the argmax misses; a token chosen under a mask
    (token healing) can still keep that draft, and its row is then scored on demand instead of failing."""
    from waferline.engine.generate import prefill
    from waferline.engine.speculate import Verifier

    prompt = [5, 9, 2, 33, 7]
    policy = DraftPolicy()
    policy.stats["caller"].accepted = 100  # the policy drafts all it can
    session = Session(model, "m")
    prefill(session, prompt)
    v = Verifier(session, Drafter(prompt, policy, caller=[60, 61, 62, 63]), greedy=True)
    assert not v.resolve(60)
    first = v.step(60, room=3)
    assert v.draft == [61, 62, 63] and first.top != 61  # the argmax misses the first draft: no stats after this row
    assert v.resolve(61)
    row = v.take()
    assert row.top == int(row.logits.argmax()) and row.lse == pytest.approx(float(torch.logsumexp(row.logits, 0)))
    assert session.length == len(prompt) + 1 + 3 and v.left == 2
