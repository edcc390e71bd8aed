"""Typing through a suggestion the confidence gate held back: the model is not asked again for what it already wrote,
and the rest is gated on its own tokens (server/features/suggestion_cache.py, confidence.Evidence)."""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field

import pytest
from idle_worker import IdleWorker  # tests/support (on sys.path: tests/conftest.py)

from waferline.engine.api import Completion
from waferline.server.background import Background
from waferline.server.document import Document
from waferline.server.features.inline import InlineCompletions
from waferline.server.features.suggestion_cache import SuggestionCache
from waferline.server.options import Options
from waferline.server.stats import Stats
from waferline.syntax import confidence
from waferline.syntax.confidence import Calibration, Evidence, features

DOC = "import math\n\n\ndef area(r):\n    return math.pi * "
SURE, UNSURE = math.log(0.97), math.log(0.05)


@pytest.fixture(autouse=True)
def mean_only_calibration(monkeypatch: pytest.MonkeyPatch) -> None:
    """Confidence from the mean token probability alone, so that the cases do not depend on the shipped fit."""
    monkeypatch.setattr(confidence, "load_calibration", lambda: Calibration({"mean_logprob": 4.0}, 0.5))


@dataclass
class Scripted(IdleWorker):
    """A worker answering with one text whose tokens (pieces) carry the given log-probabilities; counts its calls."""

    pieces: list[tuple[str, float]]
    stop_reason: str = "stop_token"
    calls: list[str] = field(default_factory=list)

    async def complete(self, request: object, **kw: object) -> Completion:
        self.calls.append(getattr(request, "prefix", ""))
        text, ends = "", []
        for piece, _ in self.pieces:
            text += piece
            ends.append(len(text))
        return Completion(
            text, self.stop_reason, token_logprobs=[lp for _, lp in self.pieces], stop_logprob=SURE, token_ends=ends
        )


def type_through(worker: Scripted, typed: str, *, explicit: bool = False, **options: float) -> list[str | None]:
    """Ask at the end of DOC, then after each character of `typed`: what is shown each time."""
    stats = Stats()
    inline = InlineCompletions(worker, stats, {}, Background())  # type: ignore[arg-type]
    shown: list[str | None] = []
    for n in range(len(typed) + 1):
        text = DOC + typed[:n]
        snapshot = Document.open("doc", "python", text).snapshot()
        s = asyncio.run(inline.suggest(snapshot, len(text), Options(**options), explicit=explicit))
        shown.append(None if s is None else s.text)
    worker.stats = stats  # type: ignore[attr-defined]
    return shown


def test_typing_the_start_of_a_held_back_suggestion_asks_the_model_no_more() -> None:
    worker = Scripted([("r", UNSURE), (" **", UNSURE), (" 2", UNSURE)])
    assert type_through(worker, "r *", min_confidence=0.5) == [None, None, None, None]
    assert len(worker.calls) == 1  # the three keystrokes were answered from the held-back text
    assert worker.stats.held_through == 3 and worker.stats.held_back == 1  # type: ignore[attr-defined]


def test_the_rest_is_shown_once_the_unsure_start_is_typed() -> None:
    # Only the first token was a guess; once the user typed it, what is left is sure enough to show.
    worker = Scripted([("radius", UNSURE), (" **", SURE), (" 2", SURE)])
    shown = type_through(worker, "radius", min_confidence=0.5)
    assert shown[0] is None and shown[1:6] == [None] * 5  # "r".."radiu": the unsure token is still being typed
    assert shown[6] == " ** 2"
    # Inside the guessed token the model is asked (typing its start could make it sure of it); at its end the rest is
    # answered from the cache.
    assert len(worker.calls) == 6


def test_typing_something_else_asks_the_model_again() -> None:
    worker = Scripted([("r", UNSURE), (" ** 2", UNSURE)])
    type_through(worker, "x", min_confidence=0.5)
    assert len(worker.calls) == 2


def test_a_shown_suggestion_is_not_hidden_halfway() -> None:
    # Sure at first, its last token a guess: once shown, typing through it keeps showing the rest, as before.
    worker = Scripted([("r", SURE), ("adi", SURE), ("us", SURE), (" ** 2", UNSURE)])  # mean log p -0.77: 0.07
    shown = type_through(worker, "radius", min_confidence=0.05)
    assert shown == ["radius ** 2", "adius ** 2", "dius ** 2", "ius ** 2", "us ** 2", "s ** 2", " ** 2"]
    assert len(worker.calls) == 1


def test_without_token_boundaries_a_held_back_suggestion_stays_held() -> None:
    cache = SuggestionCache()
    evidence = Evidence((UNSURE, SURE), (), SURE, "stop_token", "radius ** 2")
    cache.remember(DOC, len(DOC), "radius ** 2", len(DOC), 0.1, evidence)
    hit = cache.lookup(DOC + "radius", len(DOC) + 6, threshold=0.5)
    assert hit is not None and hit.source == "held" and hit.text == " ** 2" and hit.confidence is None
    assert cache.lookup(DOC + "radius", len(DOC) + 6, threshold=0.05) is not None  # it met that threshold
    assert cache.lookup(DOC + "rx", len(DOC) + 2, threshold=0.5) is None  # not its start: the model is asked


def test_the_rest_keeps_the_tokens_not_yet_typed_through() -> None:
    evidence = Evidence((-1.0, -2.0, -3.0), (2, 5, 9), -0.5, "stop_token", "ab cde fgh")
    assert evidence.features("ab cde fgh") == features(
        (-1.0, -2.0, -3.0), -0.5, "stop_token", "ab cde fgh", "ab cde fgh"
    )
    rest = evidence.features("ab cde fgh", 3)  # "ab " typed: the second token ("cde", partly typed) and the third
    assert rest == features((-2.0, -3.0), -0.5, "stop_token", "cde fgh", "cde fgh")
    assert evidence.features("ab cde fgh", 9) == features((), -0.5, "stop_token", "h", "h")


def test_inside_the_token_that_holds_it_back_the_model_is_asked() -> None:
    # "radius" was the guess; after "rad" the rest would be sure if "radius" is right: the model can tell.
    cache = SuggestionCache()
    evidence = Evidence((UNSURE, SURE, SURE), (6, 9, 11), SURE, "stop_token", "radius ** 2")
    cache.remember(DOC, len(DOC), "radius ** 2", len(DOC), 0.01, evidence)
    assert cache.lookup(DOC + "rad", len(DOC) + 3, threshold=0.5) is None
    done = cache.lookup(DOC + "radius", len(DOC) + 6, threshold=0.5)  # the guess typed whole: the rest is sure
    assert done is not None and done.source == "cache" and done.text == " ** 2"
    unsure = Evidence((UNSURE, UNSURE, UNSURE), (6, 9, 11), SURE, "stop_token", "radius ** 2")
    cache.remember(DOC, len(DOC), "radius ** 2", len(DOC), 0.01, unsure)  # newest first: unsure after "rad" too
    held = cache.lookup(DOC + "rad", len(DOC) + 3, threshold=0.5)
    assert held is not None and held.source == "held"
