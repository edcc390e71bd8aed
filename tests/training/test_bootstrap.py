"""Bootstrap intervals over cases: they hold the estimate, narrow with more cases, and pair two systems."""

from __future__ import annotations

import math

import numpy as np
import pytest

from waferline.training.bootstrap import Resampler


def test_interval_of_a_rate_holds_the_estimate_and_narrows_with_cases() -> None:
    few = Resampler(20, seed=1).ratio([1.0] * 4 + [0.0] * 16)
    many = Resampler(2000, seed=1).ratio([1.0] * 400 + [0.0] * 1600)
    assert few[0] == many[0] == 0.2
    assert few[1] < 0.2 < few[2] and many[1] < 0.2 < many[2]
    assert (many[2] - many[1]) < (few[2] - few[1]) / 5  # 100x the cases: about a tenth of the width
    # the normal approximation of a proportion's interval, for 2000 cases: +-1.96 * sqrt(.2 * .8 / 2000) = +-0.0175
    assert abs((many[2] - many[1]) / 2 - 1.96 * math.sqrt(0.16 / 2000)) < 0.004


def test_ratio_of_sums_and_draws_without_a_denominator() -> None:
    shown = [1.0, 1.0, 0.0, 0.0]
    right = [1.0, 0.0, 0.0, 0.0]
    point, low, high = Resampler(4, seed=0).ratio(right, shown)
    assert point == 0.5 and 0.0 <= low <= 0.5 <= high <= 1.0
    nothing = Resampler(3, seed=0).ratio([0.0, 0.0, 0.0], [0.0, 0.0, 0.0])
    assert all(math.isnan(x) for x in nothing)
    with pytest.raises(ValueError, match="one per case"):
        Resampler(3).ratio([1.0, 0.0])
    with pytest.raises(ValueError, match="at least one case"):
        Resampler(0)


def test_paired_difference_is_tighter_than_the_two_intervals() -> None:
    """Two systems right on nearly the same cases: the paired difference resamples cases, not each one's luck."""
    rng = np.random.default_rng(0)
    a = (rng.random(400) < 0.3).astype(float)
    b = a.copy()
    b[np.flatnonzero(a == 0)[:12]] = 1.0  # b is right on every case a is, and on 12 more
    boot = Resampler(400, seed=0)
    diff, low, high = boot.difference(b, a)
    assert diff == pytest.approx(12 / 400) and low > 0  # always better: the interval excludes 0
    _, a_low, a_high = boot.ratio(a)
    assert high - low < (a_high - a_low) / 2
