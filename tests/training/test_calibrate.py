"""The confidence fit recovers a relation planted in synthetic records, and the curve counts what it should."""

from __future__ import annotations

import math
import random

import pytest

from waferline.syntax.confidence import FEATURES
from waferline.training.calibrate import calibrate, curve


def records(n: int, seed: int) -> list[dict[str, object]]:
    rng = random.Random(seed)
    out: list[dict[str, object]] = []
    for _ in range(n):
        mean = rng.uniform(-3, 0)
        p_right = 1 / (1 + math.exp(-(3 * mean + 2)))  # planted: likelier right when the tokens were likely
        feats = {name: 0.0 for name in FEATURES} | {"mean_logprob": mean, "log_tokens": rng.uniform(0, 3)}
        out.append({"features": feats, "right": rng.random() < p_right})
    out.append({"features": None, "right": False})  # not shown: left out of the fit
    return out


def test_fit_recovers_the_planted_relation() -> None:
    cal = calibrate(records(3000, 0), "synthetic")
    assert 2.0 < cal.weights["mean_logprob"] < 4.0
    assert abs(cal.weights["log_tokens"]) < 0.3
    assert abs(cal.bias - 2) < 0.6
    assert "3000 shown suggestions" in cal.fitted_on


def test_fit_refuses_labels_of_one_kind() -> None:
    with pytest.raises(ValueError, match="all wrong"):
        calibrate([{"features": {"mean_logprob": -1.0}, "right": False}] * 5, "x")


def test_curve_counts_shown_and_right() -> None:
    points = curve([0.9, 0.5, None, 0.1], [True, False, False, True], [0.0, 0.5, 0.95])
    assert points[0] == {"threshold": 0.0, "shown_rate": 0.75, "exact_when_shown": 2 / 3, "exact_over_all": 0.5}
    assert points[1]["shown_rate"] == 0.5 and points[1]["exact_when_shown"] == 0.5
    assert points[2]["shown_rate"] == 0.0 and points[2]["exact_when_shown"] == 0.0
