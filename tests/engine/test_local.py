"""The local engine (engine/local.py) on the shipped model: FIM prompts with token healing, and what it says it is."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from waferline.engine.api import ChatRequest, ChatUnsupported, EditRequest
from waferline.engine.local import LocalEngine


@pytest.fixture(scope="module")
def engine() -> LocalEngine:
    return LocalEngine.load(None, weights="float32")


def test_local_engine_heals_a_prefix_cut_inside_a_word(engine: LocalEngine) -> None:
    """The shipped model prompts suffix-prefix-middle, so a cut word is healed: the prompt goes in one token shorter
    (generate() with healing is tested in test_healing.py); an empty prefix has nothing to heal."""
    assert engine.healer is not None
    tk = engine.loaded.tokenizer
    request = EditRequest(session_id="doc", prefix="import os\nbase = os.path.basen", suffix="\n", max_new_tokens=4,
                          time_budget_s=None)  # fmt: skip
    ids = engine.prompt_ids(request, 512)
    healing = engine.healer.heal(ids)
    assert healing is not None and tk.decode(ids).endswith(healing.text)
    done = engine.complete(request, lambda: False)
    assert done.prompt_tokens == len(ids) - 1
    plain = engine.complete(
        EditRequest(session_id="doc2", prefix="", suffix="x = 1\n", max_new_tokens=2), lambda: False
    )
    assert plain.prompt_tokens == len(engine.prompt_ids(EditRequest(session_id="d", prefix="", suffix="x = 1\n"), 512))


def test_after_indentation_the_shipped_model_writes_code_not_a_line_end(engine: LocalEngine) -> None:
    """The cursor an editor leaves after Enter: the prompt ends in the indentation, a token the shipped model only saw
    before a line end (it spelt `    if` as `   `, ` if`). Healed to a shorter run of spaces and on, it writes the
    line's code; healed to "a token that starts with the indentation" it wrote an empty line (36 of 40 HumanEval
    single lines)."""
    prompts = [
        ("def mean(numbers):\n    total = 0\n    for x in numbers:\n        ", "\n    return total / len(numbers)\n"),
        ("def is_even(n):\n    ", "\n"),
        ("class Point:\n    def __init__(self, x, y):\n        self.x = x\n        ", "\n"),
        ("def clamp(v, lo, hi):\n    if v < lo:\n        return lo\n    ", "\n    return v\n"),
    ]
    lines = []
    for n, (prefix, suffix) in enumerate(prompts):
        done = engine.complete(EditRequest(session_id=f"indent{n}", prefix=prefix, suffix=suffix, max_new_tokens=16,
                                           time_budget_s=None, stop_strings=("\n",)), lambda: False)  # fmt: skip
        lines.append(done.text)
    assert all(line.strip() and not line.startswith((" ", "\n")) for line in lines), lines


def test_describe_says_what_was_placed_and_that_it_cannot_chat(engine: LocalEngine) -> None:
    info = engine.describe()
    assert " on cpu float32, FIM waferline" in info.description and not info.can_chat
    with pytest.raises(ChatUnsupported, match="no chat template"):
        engine.chat(ChatRequest(session_id="c", messages=[{"role": "user", "content": "hi"}]), lambda: False)


def test_candidates_are_scored_by_teacher_forcing_and_leave_the_prompt_alone(engine: LocalEngine) -> None:
    """score_candidates' log-probabilities equal a fresh forward pass over prompt + candidate, and the session holds
    the prompt alone afterwards (typing still only appends)."""
    import torch

    from waferline.engine.candidates import score_candidates

    tk = engine.loaded.tokenizer
    request = EditRequest(session_id="cand", prefix="def area(r):\n    return 3.14 * r", suffix="\n")
    prompt = engine.prompt_ids(request, 512)
    session = engine.pool.get("cand")
    session.forward(prompt)
    (scored,) = score_candidates(session, prompt, [" * r"], tk, stop_ids=engine.fim.stop_ids)
    assert session.tokens == prompt
    ids = tk.encode(" * r")
    fresh = engine.pool.get("fresh")
    with torch.inference_mode():
        logits = fresh.forward([*prompt, *ids], last_only=False).float()
    lp = torch.log_softmax(logits, dim=-1)
    want = [float(lp[len(prompt) - 1 + j, t]) for j, t in enumerate(ids)]
    assert scored.token_logprobs == pytest.approx(want, abs=1e-3)
    stops = torch.tensor(list(engine.fim.stop_ids))
    assert scored.stop_logprob == pytest.approx(float(torch.logsumexp(lp[-1, stops], 0)), abs=1e-3)


def test_the_engine_keeps_its_own_text_unless_a_candidate_is_plausible(engine: LocalEngine) -> None:
    base = dict(prefix="def area(r):\n    return 3.14 * r", suffix="\n", max_new_tokens=8, time_budget_s=None)
    own = engine.complete(EditRequest(session_id="a", **base), lambda: False)  # type: ignore[arg-type]
    nonsense = engine.complete(
        EditRequest(session_id="b", candidates=(" zq}{ xx ))) ¤¤",), **base),  # type: ignore[arg-type]
        lambda: False,
    )
    assert nonsense.chosen == "model" and nonsense.text == own.text
    same = engine.complete(EditRequest(session_id="c", candidates=(own.text,), **base), lambda: False)  # type: ignore[arg-type]
    assert same.chosen == "model" and same.text == own.text
    # A candidate the model finds plausible is taken, with its own log-probabilities.
    probable = [t for t in (" * r", " * r * r", "") if t]
    chosen = engine.complete(EditRequest(session_id="d", candidates=tuple(probable), **base), lambda: False)  # type: ignore[arg-type]
    assert chosen.chosen in ("model", "candidate")
    if chosen.chosen == "candidate":
        assert chosen.text in probable and chosen.new_tokens == len(chosen.token_logprobs) >= 1


def test_the_first_plausible_candidate_wins() -> None:
    from waferline.engine.candidates import Scored, preferred

    weak, good, better = Scored("a", [-4.0], -4.0), Scored("b", [-1.0, -2.0], -1.0), Scored("c", [-0.1], -0.1)
    assert preferred([weak, good, better]) is good  # the server's order, not the best score
    assert preferred([weak]) is None and preferred([]) is None  # implausible, or nothing to copy


def test_a_lone_surrogate_in_the_document_still_completes(engine: LocalEngine) -> None:
    """Editors can send "\\ud800" in JSON; the tokenizer takes it as U+FFFD instead of failing the request."""
    request = EditRequest(session_id="sur", prefix='s = "\ud800"\nx = ', suffix="\n", max_new_tokens=4)
    done = engine.complete(request, lambda: False)
    assert done.stop_reason in ("max_tokens", "stop_token", "stop_rule") and done.prompt_tokens > 0
    tk = engine.loaded.tokenizer
    assert tk.encode("\ud800") == tk.encode("\ufffd") and tk.encode("\U0001f600") != tk.encode("\ufffd")


def test_speculation_changes_speed_not_text_and_reports_drafts() -> None:
    """The same requests with speculation on and off (the shipped model, int8 as the server runs it): the same
    text; a request whose `draft` is the text the model writes verifies it in few steps, and says so."""
    on = LocalEngine.load(None, weights="int8")
    off = LocalEngine.load(None, weights="int8", speculate=False)
    assert on.draft_policy is not None and off.draft_policy is None
    prefix = (
        "COLORS = {\n    'red': (255, 0, 0),\n    'green': (0, 255, 0),\n    'blue': (0, 0, 255),\n}\n"
        "SHADES = {\n    'red': (255, 0, 0),\n    'green': ("
    )
    request = EditRequest(session_id="a", prefix=prefix, suffix="\n", max_new_tokens=24, time_budget_s=None)
    plain = off.complete(request, lambda: False)
    fast = on.complete(request, lambda: False)
    assert fast.text == plain.text and plain.drafted_tokens == 0
    assert fast.decode_steps + fast.accepted_tokens == plain.decode_steps
    told = EditRequest(session_id="b", prefix=prefix, suffix="\n", max_new_tokens=24, time_budget_s=None,
                       draft=plain.text)  # fmt: skip
    done = on.complete(told, lambda: False)
    assert done.text == plain.text
    assert done.draft_sources["caller"][1] >= 4 and done.tokens_per_step > 1.5


SOURCE = """import math


class Vector:
    def __init__(self, x, y):
        self.x = x
        self.y = y

    def __add__(self, other):
        return Vector(self.x + other.x, self.y + other.y)

    def __sub__(self, other):
        return Vector(self.x - other.x, self.y - other.y)

    def length(self):
        return math.sqrt(self.x * self.x + self.y * self.y)
"""


@pytest.fixture(scope="module")
def on_and_off() -> tuple[LocalEngine, LocalEngine]:
    return LocalEngine.load(None, weights="int8"), LocalEngine.load(None, weights="int8", speculate=False)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(20, len(SOURCE) - 1), typed=st.integers(0, 12))
def test_the_previous_texts_tail_as_a_draft_changes_no_token(
    on_and_off: tuple[LocalEngine, LocalEngine], cut: int, typed: int
) -> None:
    """What the server does: a completion at a cursor, the user types the start of it, and the next request carries
    the rest as its draft, in the same session (healing re-chooses the last token of the prefix, the healed text
    goes before the draft). With speculation the text is the same as without, with or without that draft."""
    on, off = on_and_off
    prefix, suffix = SOURCE[:cut], SOURCE[cut:]
    first = EditRequest(session_id="doc", prefix=prefix, suffix=suffix, max_new_tokens=16, time_budget_s=None)
    before = on.complete(first, lambda: False)
    assert before.text == off.complete(first, lambda: False).text
    k = min(typed, len(before.text))
    follow = dataclasses.replace(first, prefix=prefix + before.text[:k])
    drafted = on.complete(dataclasses.replace(follow, draft=before.text[k:]), lambda: False)
    plain = off.complete(follow, lambda: False)
    assert drafted.text == plain.text and drafted.stop_reason == plain.stop_reason
    assert drafted.decode_steps + drafted.accepted_tokens == plain.decode_steps


@pytest.mark.parametrize("prefix", ["def area(r):\n    return 3.14 * r", "import os\nbase = os.path.basen"])
def test_each_token_says_where_its_text_ends(engine: LocalEngine, prefix: str) -> None:
    """token_ends, beside token_logprobs: the text of the first i + 1 tokens (healed text left out) ends there, so
    the server can tell which tokens' probabilities are left once the user typed the start of a suggestion."""
    request = EditRequest(session_id="ends", prefix=prefix, suffix="\n", max_new_tokens=12, time_budget_s=None)
    done = engine.complete(request, lambda: False)
    assert len(done.token_ends) == len(done.token_logprobs) == done.new_tokens > 0
    assert done.token_ends == sorted(done.token_ends) and done.token_ends[-1] >= len(done.text)
    from waferline.engine.generate import generate

    tk = engine.loaded.tokenizer
    prompt = engine.prompt_ids(request, 512)
    result = generate(engine.pool.get("ends2"), prompt, max_new_tokens=12, tokenizer=tk)
    assert [len(tk.decode(result.tokens[: i + 1])) for i in range(len(result.tokens))] == result.token_ends
