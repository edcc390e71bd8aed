"""Warm-ups (`Engine.warm`): the prompt of the next request prefilled into its session without decoding, so that the
request only prefills what changed since; never a different completion, cut short between chunks to a valid prefix,
and routed to the engine that would answer (engine/local.py, engine/fallback.py)."""

from __future__ import annotations

import concurrent.futures
from typing import Any

import pytest

from waferline.engine.api import Completion, EditRequest, EngineInfo
from waferline.engine.fallback import FallbackEngine
from waferline.engine.local import WARM_CHUNK, LocalEngine

PREFIX = (
    "import math\n\n\nclass Circle:\n    def __init__(self, radius):\n        self.radius = radius\n\n"
    "    def area(self):\n        return math.pi * self.radius ** 2\n\n    def circumference(self):\n        return "
)
SUFFIX = "\n\n\ndef unit():\n    return Circle(1.0)\n"


@pytest.fixture(scope="module")
def engine() -> LocalEngine:
    return LocalEngine.load(None, weights="int8")


def request(session: str, prefix: str = PREFIX, **kw: Any) -> EditRequest:
    return EditRequest(session_id=session, prefix=prefix, suffix=SUFFIX, max_new_tokens=12, time_budget_s=None, **kw)


def never() -> bool:
    return False


def test_a_warmed_session_prefills_one_token_and_completes_the_same(engine: LocalEngine) -> None:
    cold = engine.complete(request("cold"), never)
    warm = engine.warm(request("warm"), never)
    assert warm.stop_reason == "prefilled" and warm.text == "" and warm.new_tokens == 0
    assert warm.prefilled_tokens == warm.prompt_tokens - 1 == cold.prompt_tokens - 1  # all but the last token
    after = engine.complete(request("warm"), never)
    # The same text; the log-probabilities to bfloat16's rounding (int8 weights, bfloat16 activations): the prompt
    # went in as 64-token chunks and its last token alone through the one-token step, as a prompt typed key by key
    # does, so its sums run in another order than one pass over the whole prompt.
    assert after.text == cold.text and after.token_logprobs == pytest.approx(cold.token_logprobs, abs=0.1)
    assert after.prefilled_tokens == 1 and after.reused_tokens == after.prompt_tokens - 1
    again = engine.warm(request("warm"), never)  # the session holds the prompt (and the completion after it)
    assert again.stop_reason == "prefilled" and again.prefilled_tokens == 0


def test_a_keystroke_after_a_warm_up_only_prefills_what_was_typed(engine: LocalEngine) -> None:
    engine.warm(request("typed"), never)
    typed = engine.complete(request("typed", PREFIX + "2 * math.pi"), never)
    fresh = engine.complete(request("fresh", PREFIX + "2 * math.pi"), never)
    assert typed.text == fresh.text
    assert typed.prefilled_tokens < 10 and typed.prefilled_tokens < fresh.prefilled_tokens / 10


def test_a_cancelled_warm_up_stops_between_chunks_and_leaves_a_valid_prefix(engine: LocalEngine) -> None:
    asks = iter([False, False, True])  # before starting, after the first chunk, after the second: stop
    cut = engine.warm(request("cut", PREFIX * 3), lambda: next(asks))
    assert cut.stop_reason == "cancelled" and cut.prefilled_tokens == 2 * WARM_CHUNK < cut.prompt_tokens - 1
    session = engine.pool.get("cut")
    assert session.length == 2 * WARM_CHUNK and session.kv.length == session.length
    later = engine.complete(request("cut", PREFIX * 3), never)
    assert later.reused_tokens == 2 * WARM_CHUNK
    assert later.text == engine.complete(request("cut-fresh", PREFIX * 3), never).text
    assert engine.warm(request("gone"), lambda: True).stop_reason == "cancelled"
    assert "gone" not in engine.pool or engine.pool.get("gone").length == 0  # cancelled before any chunk: nothing


def test_the_local_engine_says_it_can_warm(engine: LocalEngine) -> None:
    assert engine.describe().can_warm


class Remote:
    """A remote engine as FallbackEngine sees it: it answers, and it cannot warm."""

    def __init__(self) -> None:
        self.warmed = 0

    def warm(self, request: EditRequest, should_cancel: Any) -> Completion:
        self.warmed += 1
        return Completion(text="", stop_reason="unsupported")

    def describe(self) -> EngineInfo:
        return EngineInfo("remote", can_chat=False)


def test_the_fallback_engine_warms_where_the_next_request_would_go(engine: LocalEngine) -> None:
    remote = Remote()
    up = FallbackEngine(remote, engine)
    assert not up.describe().can_warm  # the remote engine answers: warming the local cache would be wasted
    assert up.warm(request("f"), never).stop_reason == "unsupported" and remote.warmed == 1
    up._down = True  # the remote engine failed a moment ago: the local model answers until a probe says it is back
    remote.check = lambda: concurrent.futures.Future()  # type: ignore[attr-defined]  # a probe that never answers
    assert up.warm(request("f"), never).stop_reason == "prefilled" and remote.warmed == 1
    down = FallbackEngine(None, engine, reason="unreachable")
    assert down.describe().can_warm and down.warm(request("g"), never).stop_reason == "prefilled"
