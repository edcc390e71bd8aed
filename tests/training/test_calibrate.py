"""The confidence fit recovers a relation planted in synthetic records, and the curve counts what it should."""

from __future__ import annotations

import math
import random

import pytest

from waferline.syntax.confidence import FEATURES
from waferline.training.calibrate import calibrate, choose_threshold, curve, out_of_fold


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


def test_curve_counts_kept_characters_and_the_choice_follows_them() -> None:
    confidences = [0.9, 0.6, 0.4, 0.2, None]
    right = [True, False, True, False, False]
    kept = [10, 6, 8, 0, 0]
    points = curve(confidences, right, [0.0, 0.3, 0.5, 0.8], kept)
    assert points[0]["kept_per_shown"] == 24 / 4 and points[0]["kept_per_100"] == 100 * 24 / 5
    assert points[2]["kept_per_shown"] == 16 / 2
    # 60% right when shown and 40% shown: only 0.3 (2/3 right, 60% shown) meets both
    best = choose_threshold(points, min_exact_when_shown=0.6, min_shown=0.4)
    assert best is not None and best["threshold"] == 0.3
    # half right: 0.0 keeps as much as 0.3 (the 0.2 suggestion keeps nothing) and is as often right over all; the
    # higher threshold wins the tie, with less that is wrong on screen
    best = choose_threshold(points, min_exact_when_shown=0.5, min_shown=0.4)
    assert best is not None and best["threshold"] == 0.3
    assert choose_threshold(points, min_exact_when_shown=0.99, min_shown=0.5) is None


def test_out_of_fold_confidences_ignore_their_own_distribution() -> None:
    rows = [dict(r, path=f"{'ab'[i % 2]}/x.py") for i, r in enumerate(records(600, 3))]
    flipped = [dict(r, right=not r["right"]) if r["path"].startswith("a/") else r for r in rows]
    own = [c for c, r in zip(out_of_fold(rows), rows, strict=True) if r["path"].startswith("a/")]
    again = [c for c, r in zip(out_of_fold(flipped), rows, strict=True) if r["path"].startswith("a/")]
    assert own == again  # a's labels changed, a's confidences did not: they come from b's fit alone
    assert own[-1] is None and all(c is not None for c in own[:-1])  # the record without features is not shown


def test_choice_by_the_intervals_lower_ends() -> None:
    """20 cases: 60% right when shown is not evidence of 50%; 2,000 cases at the same rates are."""
    few = curve([0.9] * 10 + [None] * 10, [True] * 6 + [False] * 14, [0.5], [1] * 20, intervals=True)
    assert few[0]["exact_when_shown"] == 0.6 and few[0]["exact_when_shown_low"] < 0.5
    assert choose_threshold(few, min_exact_when_shown=0.5, min_shown=0.3) is None
    many = curve([0.9] * 1000 + [None] * 1000, [True] * 600 + [False] * 1400, [0.5], [1] * 2000, intervals=True)
    assert 0.55 < many[0]["exact_when_shown_low"] < 0.6
    assert choose_threshold(many, min_exact_when_shown=0.5, min_shown=0.3) is not None
