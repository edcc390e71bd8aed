"""Confidence intervals over evaluation cases, by the bootstrap: is a figure a margin, or one case's luck?

200 cases make 15.5% exact over all an estimate with a 95% interval of about ±5 points, and a target met "by one
case" is no evidence. Every figure the evaluation reports (training/evaluate.py's editor counterpart,
benchmarks/editor_eval.py) is a ratio of two sums over cases (right / shown, kept characters / shown, right /
copy-line's right), so one resampling serves them all: `Resampler` draws the cases with replacement `draws` times
(one multinomial count per case and draw) and each ratio is recomputed per draw; the interval is the percentile
one. The same draws serve every system of one set of cases, so a comparison between two systems (a ratio, or a
difference) is paired: it resamples cases, not each system's luck separately.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

DRAWS = 2000
LEVEL = 0.95


class Resampler:
    """`draws` bootstrap resamples of `n` cases, fixed by `seed` so that a rerun reports the same intervals."""

    def __init__(self, n: int, *, draws: int = DRAWS, seed: int = 0) -> None:
        if n < 1:
            raise ValueError("a bootstrap needs at least one case")
        rng = np.random.default_rng(seed)
        self.n = n
        self.counts = rng.multinomial(n, np.full(n, 1.0 / n), size=draws).astype(np.float64)

    def _column(self, values: Sequence[float] | np.ndarray) -> np.ndarray:
        column = np.asarray(values, dtype=np.float64)
        if column.shape != (self.n,):
            raise ValueError(f"expected {self.n} values, one per case, got shape {column.shape}")
        return column

    def ratio(
        self, numerator: Sequence[float] | np.ndarray, denominator: Sequence[float] | np.ndarray | None = None
    ) -> tuple[float, float, float]:
        """(estimate, low, high) of sum(numerator) / sum(denominator) (the mean when there is no denominator).
        Draws whose denominator is 0 are left out; with no draw left (or a 0 estimate's denominator) all are nan."""
        num = self._column(numerator)
        den = np.ones(self.n) if denominator is None else self._column(denominator)
        point = float(num.sum() / den.sum()) if den.sum() else float("nan")
        nums, dens = self.counts @ num, self.counts @ den
        ok = dens > 0
        if not ok.any():
            return point, float("nan"), float("nan")
        draws = nums[ok] / dens[ok]
        tail = (1.0 - LEVEL) / 2 * 100
        low, high = np.percentile(draws, [tail, 100 - tail])
        return point, float(low), float(high)

    def difference(
        self, a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray
    ) -> tuple[float, float, float]:
        """(estimate, low, high) of mean(a) - mean(b) over the same cases: a paired comparison."""
        return self.ratio(self._column(a) - self._column(b))
