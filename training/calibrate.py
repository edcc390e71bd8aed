"""Fit the server's confidence (syntax/confidence.py) to what was actually right, and draw its curve.

Input: the records `waferline eval-editor --records FILE --option minConfidence=0` writes, one per case, with the
features of every shown suggestion and whether it was exactly right. A logistic regression (Newton's method with a
small L2 penalty, numpy; a handful of features needs nothing more) maps the features to the probability of being
right. `curve` gives, for each threshold, the share of requests that would still be shown and how often those are
right: the trade the `minConfidence` option makes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from waferline.syntax.confidence import FEATURES, Calibration
from waferline.training.bootstrap import Resampler


def design(records: Sequence[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    """(features matrix, labels) of the records that carry features (shown suggestions)."""
    rows = [r for r in records if r.get("features")]
    x = np.array([[float(r["features"].get(name, 0.0)) for name in FEATURES] for r in rows], dtype=np.float64)
    y = np.array([1.0 if r.get("right") else 0.0 for r in rows], dtype=np.float64)
    return x.reshape(len(rows), len(FEATURES)), y


def fit(x: np.ndarray, y: np.ndarray, *, l2: float = 1e-3, iterations: int = 50) -> tuple[np.ndarray, float]:
    """Logistic regression weights and bias by Newton's method (IRLS); features are standardised inside."""
    if len(y) == 0 or y.min() == y.max():
        raise ValueError(f"cannot calibrate on {len(y)} suggestions that are all {'right' if y.any() else 'wrong'}")
    mu, sd = x.mean(axis=0), x.std(axis=0)
    sd[sd == 0] = 1.0
    z = np.hstack([(x - mu) / sd, np.ones((len(x), 1))])
    w = np.zeros(z.shape[1])
    penalty = np.diag([l2] * (z.shape[1] - 1) + [0.0]) * len(y)
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-np.clip(z @ w, -50, 50)))
        grad = z.T @ (p - y) + penalty @ w
        hess = (z * (p * (1 - p))[:, None]).T @ z + penalty + 1e-9 * np.eye(len(w))
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    weights = w[:-1] / sd
    bias = float(w[-1] - (w[:-1] * mu / sd).sum())
    return weights, bias


def calibrate(records: Sequence[dict[str, Any]], fitted_on: str) -> Calibration:
    x, y = design(records)
    weights, bias = fit(x, y)
    return Calibration(
        {name: float(v) for name, v in zip(FEATURES, weights, strict=True)},
        bias,
        f"{fitted_on}: {len(y)} shown suggestions, {int(y.sum())} right",
    )


def out_of_fold(records: Sequence[dict[str, Any]]) -> list[float | None]:
    """Each record's confidence from a calibration fitted without its distribution (the first folder of its path):
    leave-one-distribution-out, so that a threshold chosen on these confidences is chosen as it would carry to a
    distribution the fit never saw. A distribution whose held-out fit cannot be made (the others' suggestions all
    right or all wrong) gets None, as if not shown."""
    dists = [str(r.get("path", "")).split("/", 1)[0] for r in records]
    out: list[float | None] = [None] * len(records)
    for dist in sorted(set(dists)):
        train = [r for r, d in zip(records, dists, strict=True) if d != dist]
        try:
            cal = calibrate(train, f"all but {dist}")
        except ValueError:
            continue
        for i, (r, d) in enumerate(zip(records, dists, strict=True)):
            if d == dist and r.get("features"):
                out[i] = cal.confidence(r["features"])
    return out


def curve(
    confidences: Sequence[float | None],
    right: Sequence[bool],
    thresholds: Sequence[float],
    kept: Sequence[int] | None = None,
    *,
    intervals: bool = False,
) -> list[dict[str, float]]:
    """For each threshold: shown rate (over all requests), exact match when shown, exact match over all; with `kept`
    (characters a word-by-word accept keeps of each suggestion) also kept characters per shown suggestion and per
    100 requests: what users keep, which a gate may be chosen by as well as by exact match. With `intervals`, the
    lower ends of the 95% bootstrap intervals of shown rate and exact when shown (`shown_rate_low`,
    `exact_when_shown_low`; training/bootstrap.py) as well."""
    boot = Resampler(len(confidences)) if intervals and confidences else None
    n = max(len(confidences), 1)
    counted = kept is not None
    kept = [0] * len(confidences) if kept is None else kept
    out = []
    for t in thresholds:
        on = [(r, k) for c, r, k in zip(confidences, right, kept, strict=True) if c is not None and c >= t]
        shown = [r for r, _ in on]
        point = {"threshold": float(t), "shown_rate": len(shown) / n,
                 "exact_when_shown": sum(shown) / len(shown) if shown else 0.0,
                 "exact_over_all": sum(shown) / n}  # fmt: skip
        if counted:
            point["kept_per_shown"] = sum(k for _, k in on) / len(on) if on else 0.0
            point["kept_per_100"] = 100 * sum(k for _, k in on) / n
        if boot is not None:
            gate = np.array([1.0 if c is not None and c >= t else 0.0 for c in confidences])
            ok = gate * np.array([1.0 if r else 0.0 for r in right])
            point["shown_rate_low"] = boot.ratio(gate)[1]
            low = boot.ratio(ok, gate)[1]
            point["exact_when_shown_low"] = 0.0 if low != low else low  # nan: nothing shown
        out.append(point)
    return out


def choose_threshold(
    points: Sequence[dict[str, float]], *, min_exact_when_shown: float, min_shown: float
) -> dict[str, float] | None:
    """The point of a curve (thresholds ascending) a gate is chosen at: of those right when shown at least
    `min_exact_when_shown` and shown at least `min_shown` (by the lower ends of their 95% intervals when the curve
    has them: a choice that holds on other cases as well, not one met by a case's luck), the one whose users keep the
    most characters per 100
    requests (then exact over all, then the higher threshold: as much kept, less wrong on screen); None when no
    threshold meets both."""
    ok = [
        p for p in points
        if p.get("exact_when_shown_low", p["exact_when_shown"]) >= min_exact_when_shown
        and p.get("shown_rate_low", p["shown_rate"]) >= min_shown
    ]  # fmt: skip
    if not ok:
        return None
    return max(ok, key=lambda p: (p.get("kept_per_100", 0.0), p["exact_over_all"], p["threshold"]))


def write_calibration(cal: Calibration, path: Path) -> None:
    path.write_text(json.dumps(cal.to_dict(), indent=2) + "\n", encoding="utf-8")


def plot_curve(points: Sequence[dict[str, float]], png: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = [p for p in points if p["shown_rate"] > 0]  # nothing shown: exact match when shown is undefined
    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    ax.plot([p["shown_rate"] for p in points], [p["exact_when_shown"] for p in points], "o-", ms=3)
    for p in points[::2]:
        ax.annotate(f"{p['threshold']:.2f}", (p["shown_rate"], p["exact_when_shown"]), fontsize=7,
                    xytext=(4, 4), textcoords="offset points")  # fmt: skip
    ax.set_xlabel("shown rate (share of requests with a suggestion)")
    ax.set_ylabel("exact match when shown")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(png)
    plt.close(fig)
