"""Golden cases for what the server shows: (document, cursor, model output, its token probabilities) -> shown text
or nothing. The model is a stub that answers with the given text, so these cases test the server's choice alone."""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass
from pathlib import Path

import pytest
from idle_worker import IdleWorker  # tests/support (on sys.path: tests/conftest.py)

from waferline.engine.api import Completion
from waferline.server.background import Background
from waferline.server.document import Document
from waferline.server.features.inline import InlineCompletions
from waferline.server.options import Options
from waferline.server.stats import Stats
from waferline.syntax.confidence import PRIOR, Calibration, features, load_calibration

CIRCLE = """from dataclasses import dataclass
import math


@dataclass
class Circle:
    center: Point
    radius: float

    def area(self) -> float:
        return math.pi * self.
"""
SCALE = 'def scale(values, factor):\n    """Multiply each value by factor."""\n    '  # the cursor after the indent
SURE, UNSURE = math.log(0.95), math.log(0.2)


@dataclass
class StubWorker(IdleWorker):
    text: str
    logprob: float

    async def complete(self, request: object, **kw: object) -> Completion:
        n = max(len(self.text) // 3, 1)
        return Completion(self.text, "stop_token", token_logprobs=[self.logprob] * n, stop_logprob=self.logprob)


def shown(document: str, cursor_marker: str | None, output: str, logprob: float, *, explicit: bool = False,
          **options: float) -> str | None:  # fmt: skip
    offset = len(document) if cursor_marker is None else document.index(cursor_marker)
    inline = InlineCompletions(StubWorker(output, logprob), Stats(), {}, Background())  # type: ignore[arg-type]
    snapshot = Document.open("doc", "python", document).snapshot()
    s = asyncio.run(inline.suggest(snapshot, offset, Options(**options), explicit=explicit))
    return None if s is None else s.text


def test_a_loop_is_never_shown() -> None:
    doc = CIRCLE.rstrip("\n")
    assert shown(doc, None, "_x - other._x - other._x - other._x - other._x", SURE) is None


def test_the_part_before_a_loop_needs_confidence_to_be_shown() -> None:
    out = "return 1, 0, 0, 0, 0, 0, 00000000000000"
    assert shown(SCALE, None, out, UNSURE, min_confidence=0.3) is None
    assert shown(SCALE, None, out, SURE, min_confidence=0.0) == "return 1"


def test_a_sure_right_suggestion_is_shown_an_unsure_one_only_when_asked() -> None:
    doc = CIRCLE.rstrip("\n")
    assert shown(doc, None, "radius ** 2", SURE, min_confidence=0.3) == "radius ** 2"
    assert shown(doc, None, "radius ** 2", math.log(0.01), min_confidence=0.3) is None
    assert shown(doc, None, "radius ** 2", math.log(0.01), explicit=True, min_confidence_invoked=0.3) is None
    assert (
        shown(doc, None, "radius ** 2", math.log(0.01), explicit=True, min_confidence=0.9, min_confidence_invoked=0.0)
        == "radius ** 2"
    )


def test_single_line_mode_stops_at_the_end_of_the_line() -> None:
    doc = "def f(x):\n    return g(x"
    assert shown(doc, None, ") + 1\n    print(x)\n", SURE, min_confidence=0.0) == ") + 1"


def test_text_that_repeats_what_follows_the_cursor_is_not_shown() -> None:
    doc = "def f(x):\n    y = \n    return y\n"
    assert shown(doc, "\n    return y", "\n    return y", SURE) is None


def test_an_engine_without_token_probabilities_is_not_gated() -> None:
    doc = CIRCLE.rstrip("\n")

    class Silent(StubWorker):
        async def complete(self, request: object, **kw: object) -> Completion:
            return Completion(self.text, "stop_token")  # no token_logprobs: the engine cannot tell

    inline = InlineCompletions(Silent("radius ** 2", 0.0), Stats(), {}, Background())  # type: ignore[arg-type]
    snapshot = Document.open("d", "python", doc).snapshot()
    s = asyncio.run(inline.suggest(snapshot, len(doc), Options(min_confidence=0.99), explicit=False))
    assert s is not None and s.text == "radius ** 2" and s.confidence is None


def test_confidence_is_monotone_in_the_token_probabilities() -> None:
    cal = load_calibration()
    low = cal.confidence(features([math.log(0.3)] * 5, math.log(0.3), "stop_token", "abcdef", "abcdef"))
    high = cal.confidence(features([math.log(0.9)] * 5, math.log(0.9), "stop_token", "abcdef", "abcdef"))
    assert 0.0 <= low < high <= 1.0


def test_calibration_files_are_checked() -> None:
    with pytest.raises(ValueError, match="unknown confidence features"):
        Calibration.from_dict({"weights": {"nonsense": 1.0}, "bias": 0.0})
    with pytest.raises(ValueError, match="needs 'weights'"):
        Calibration.from_dict({"bias": 0.0})
    with pytest.raises(ValueError, match="a JSON object"):
        Calibration.from_dict([1, 2])


def test_a_broken_calibration_file_falls_back_to_the_prior(tmp_path: Path) -> None:
    for text in ("{not json", "[1, 2]", '{"weights": {"mean_logprob": "x"}, "bias": 0}'):
        path = tmp_path / "confidence.json"
        path.write_text(text)
        load_calibration.cache_clear()
        assert load_calibration(path) is PRIOR, text
    load_calibration.cache_clear()
    assert Calibration.from_dict(PRIOR.to_dict()).confidence({"mean_logprob": -1.0}) == PRIOR.confidence(
        {"mean_logprob": -1.0}
    )


def test_held_back_and_copied_suggestions_are_counted() -> None:
    doc = CIRCLE.rstrip("\n")
    stats = Stats()

    class Copying(StubWorker):
        async def complete(self, request: object, **kw: object) -> Completion:
            done = await super().complete(request)
            done.chosen = "candidate"
            return done

    for worker, minimum in ((StubWorker("radius ** 2", math.log(0.01)), 0.3), (Copying("radius ** 2", SURE), 0.0)):
        inline = InlineCompletions(worker, stats, {}, Background())  # type: ignore[arg-type]
        snapshot = Document.open("doc", "python", doc).snapshot()
        asyncio.run(inline.suggest(snapshot, len(doc), Options(min_confidence=minimum), explicit=False))
    assert stats.held_back == 1 and stats.copied == 1
    assert {"held_back": 1, "copied": 1}.items() <= stats.snapshot().items()


def test_document_features_say_whether_the_names_and_the_line_are_the_documents_own() -> None:
    from waferline.syntax.confidence import document_features

    doc = (
        "class A:\n    def __init__(self, radius):\n        self.radius = radius\n\n"
        "    def area(self):\n        return self.rad\n"
    )
    cursor = doc.index("self.rad\n") + len("self.rad")
    known = document_features(doc, cursor, "ius ** 2")  # the word typed before the cursor counts: "radius"
    assert known["known_names"] == 1.0 and known["in_document"] == 0.0
    assert known["log_chars"] == pytest.approx(math.log1p(8))
    assert document_features(doc, cursor, "ix * qq")["known_names"] == 0.0  # "radix", "qq": neither is there
    assert document_features(doc, cursor, "ius * 2 + volume")["known_names"] == pytest.approx(0.5)
    copied = "x = foo(a, b)\ny = 1\nx = foo(\n"
    assert document_features(copied, len(copied) - 1, "a, b)")["in_document"] == 1.0  # the line is there already
    assert document_features(copied, len(copied) - 1, "b, a)")["in_document"] == 0.0
    assert document_features("", 0, "")["known_names"] == 1.0  # nothing named: nothing unknown


def test_inside_a_string_as_the_user_types_only_with_complete_in_strings() -> None:
    doc = 'VERSIONS = {"stable": "1.4.0", "beta": "1.5.0'
    assert shown(doc, None, 'rc1"}', SURE, min_confidence=0.0) == 'rc1"}'
    assert shown(doc, None, 'rc1"}', SURE, min_confidence=0.0, complete_in_strings=False) is None
    assert shown(doc, None, 'rc1"}', SURE, min_confidence=0.0, complete_in_strings=False, explicit=True) == 'rc1"}'
    assert shown(doc, None, 'rc1"}', math.log(0.01), min_confidence=0.3) is None, "gated there as anywhere"
    comment = "x = 1  # the default "
    assert shown(comment, None, "value", SURE, min_confidence=0.0) is None
