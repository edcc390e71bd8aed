"""Compare `waferline eval-editor --records` files of the same cases, paired, with 95% bootstrap intervals.

    python -m waferline.benchmarks.editor_compare BASE.json OTHER.json ... [--gate syntax/confidence.json
        --threshold 0.11]

Each file's records are one system's answers to the same cases in the same order (the same eval-editor arguments
but one option, or --workspace / --recent-edit: the context ablation of docs/benchmarks-quality.md). With --gate,
a suggestion is shown only where the calibration's confidence of its recorded features reaches --threshold: the
server's gate, applied afterwards to runs made with `--option minConfidence=0`, so that one run serves every
threshold. Per file it prints the figures of benchmarks/editor_scores.py and, for every file after the first, the
paired difference from the first in exact over all and in characters kept per 100 requests (word by word).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np


def load(path: Path, kinds: set[str]) -> list[dict[str, Any]]:
    try:
        records = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: not a records file: {e}") from None
    if not isinstance(records, list):
        raise ValueError(f"{path}: expected a list of records")
    return [r for r in records if isinstance(r, dict) and r.get("kind") in kinds]


def gated(records: list[dict[str, Any]], gate: Any, threshold: float) -> list[str | None]:
    """The suggestions the server would show with that calibration and threshold."""
    if gate is None:
        return [r.get("suggestion") for r in records]
    return [r.get("suggestion") if r.get("features") and gate.confidence(r["features"]) >= threshold else None
            for r in records]  # fmt: skip


def compare(files: list[Path], *, kinds: set[str], gate: Any = None, threshold: float = 0.0) -> dict[str, Any]:
    from waferline.benchmarks.editor_scores import columns, figures_of
    from waferline.training.bootstrap import Resampler
    from waferline.training.editor_cases import EditorCase

    runs = [load(p, kinds) for p in files]
    if not runs or not runs[0]:
        raise ValueError("no records of those kinds")
    first = runs[0]
    for path, run in zip(files[1:], runs[1:], strict=True):
        if [(r["path"], r["expected"]) for r in run] != [(r["path"], r["expected"]) for r in first]:
            raise ValueError(f"{path}: not the same cases as {files[0]} (make both with the same eval-editor cases)")
    boot = Resampler(len(first))
    cases = [EditorCase(r["kind"], r["path"], "", 0, r["expected"]) for r in first]
    cols = [columns(cases, gated(run, gate, threshold), tests=False) for run in runs]
    out: dict[str, Any] = {}
    for path, col in zip(files, cols, strict=True):
        row = figures_of(col, boot, tests=False)
        if col is not cols[0]:
            for name, key, scale in (("exact_over_all", "exact", 1.0), ("kept_words_per_100", "kept_words", 100.0)):
                point, low, high = boot.difference(col[key], cols[0][key])
                row[f"minus_first_{name}"], row[f"minus_first_{name}_ci"] = scale * point, [scale * low, scale * high]
        row["kept_words_per_100"] = 100 * float(np.mean(col["kept_words"]))
        out[str(path)] = row
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m waferline.benchmarks.editor_compare", description=__doc__)
    parser.add_argument("records", type=Path, nargs="+", help="records files of the same cases, the first the base")
    parser.add_argument("--gate", type=Path, help="a confidence calibration (confidence.json) to gate the records by")
    parser.add_argument("--threshold", type=float, default=0.0, help="with --gate: the minConfidence to apply")
    parser.add_argument("--kinds", default="line", help="record kinds (default: line)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    gate = None
    if args.gate is not None:
        from waferline.syntax.confidence import Calibration

        gate = Calibration.from_dict(json.loads(args.gate.read_text(encoding="utf-8")))
    try:
        result = compare(args.records, kinds=set(args.kinds.split(",")), gate=gate, threshold=args.threshold)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    names = ("shown_rate", "exact_when_shown", "exact_over_all", "kept_per_shown")
    for path, row in result.items():
        cells = "  ".join(f"{n} {row[n]:.3f} [{row[n + '_ci'][0]:.3f}, {row[n + '_ci'][1]:.3f}]" for n in names)
        diff = ""
        if "minus_first_exact_over_all" in row:
            d, (lo, hi) = row["minus_first_exact_over_all"], row["minus_first_exact_over_all_ci"]
            k, (klo, khi) = row["minus_first_kept_words_per_100"], row["minus_first_kept_words_per_100_ci"]
            diff = f"  | vs first: exact {d:+.3f} [{lo:+.3f}, {hi:+.3f}], kept/100 {k:+.1f} [{klo:+.1f}, {khi:+.1f}]"
        print(f"{path}: {cells}  kept/100 {row['kept_words_per_100']:.1f}{diff}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
