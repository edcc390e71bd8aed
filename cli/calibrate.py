"""`waferline calibrate`: fit the server's confidence to eval-editor records, and print or plot its curve.

Fitted, and its threshold chosen, on the evaluation's choosing part only (training/eval-parts.txt); the kept-aside
part is only reported on (docs/benchmarks-quality.md):

    waferline eval-editor --part choose --kinds line --cases 400 --humaneval 0 --option minConfidence=0 \\
        --records choose.json
    waferline calibrate choose.json --write syntax/confidence.json --curve --choose
    waferline eval-editor --part kept-aside --kinds line --cases 400 --humaneval 0 --option minConfidence=0 \\
        --records kept.json
    waferline calibrate kept.json --curve --plot docs/images/confidence-curve.png
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("records", type=Path, help="the --records file of `waferline eval-editor`")
    parser.add_argument("--write", type=Path, help="fit on the records and write the calibration here")
    parser.add_argument("--curve", action="store_true", help="print shown rate and exact match per threshold")
    parser.add_argument("--plot", type=Path, help="draw the curve as a PNG")
    parser.add_argument("--kinds", default="line", help="record kinds to fit on (default: line)")
    parser.add_argument(
        "--curve-kinds",
        help="record kinds the curve and --choose read (default: --kinds): fit on line,indent, choose "
        "the threshold on line",
    )
    parser.add_argument(
        "--choose", action="store_true", help="name the threshold that keeps the most characters per request "
        "among those whose 95%% intervals' lower ends meet --min-right and --min-shown",
    )  # fmt: skip
    parser.add_argument(
        "--cross-validate", action="store_true", help="the curve of confidences each fitted without the record's "
        "own distribution (leave-one-distribution-out): how a threshold carries to code the fit never saw",
    )  # fmt: skip
    parser.add_argument("--min-right", type=float, default=0.35, help="--choose: exact when shown at least this")
    parser.add_argument("--min-shown", type=float, default=0.25, help="--choose: shown rate at least this")


def run(args: argparse.Namespace) -> int:
    from waferline.syntax.confidence import Calibration, load_calibration
    from waferline.training.calibrate import (
        calibrate,
        choose_threshold,
        curve,
        out_of_fold,
        plot_curve,
        write_calibration,
    )
    from waferline.training.editor_cases import first_line, kept_words

    try:
        records = json.loads(args.records.read_text(encoding="utf-8"))
    except ValueError as e:
        raise ValueError(f"{args.records}: not a records file: {e}") from None
    if not isinstance(records, list):
        raise ValueError(f"{args.records}: expected a list of records")
    kinds = set(args.kinds.split(","))
    records = [r for r in records if isinstance(r, dict) and r.get("kind") in kinds]
    if args.write is not None:
        cal = calibrate(records, args.records.name)
        write_calibration(cal, args.write)
        print(json.dumps(cal.to_dict(), indent=2))
    if args.curve or args.plot is not None or args.choose:
        cal = Calibration.from_dict(json.loads(args.write.read_text())) if args.write else load_calibration()
        confidences = [cal.confidence(r["features"]) if r.get("features") else None for r in records]
        if args.cross_validate:
            confidences = out_of_fold(records)
        if args.curve_kinds:  # fitted on every kind of --kinds, read on these
            on = set(args.curve_kinds.split(","))
            picked = [i for i, r in enumerate(records) if r.get("kind") in on]
            records, confidences = [records[i] for i in picked], [confidences[i] for i in picked]
        kept = [kept_words(first_line(r.get("suggestion") or "").rstrip(), str(r.get("expected", ""))) for r in records]
        thresholds = [i / 100 for i in range(0, 60, 1)] if args.choose else [i / 20 for i in range(20)]
        points = curve(confidences, [bool(r.get("right")) for r in records], thresholds, kept, intervals=args.choose)
        print(f"{'threshold':>9} {'shown':>7} {'exact|shown':>11} {'exact':>7} {'kept/shown':>10} {'kept/100':>8}")
        for p in points:
            print(f"{p['threshold']:9.2f} {p['shown_rate']:7.3f} {p['exact_when_shown']:11.3f} "
                  f"{p['exact_over_all']:7.3f} {p['kept_per_shown']:10.2f} {p['kept_per_100']:8.1f}")  # fmt: skip
        if args.choose:
            best = choose_threshold(points, min_exact_when_shown=args.min_right, min_shown=args.min_shown)
            bounds = "the lower ends of their 95% intervals"
            print(f"chosen (by {bounds}): none meets both" if best is None else
                  f"chosen (by {bounds}): minConfidence {best['threshold']:.2f}")  # fmt: skip
        if args.plot is not None:
            title = f"{args.records.name}: shown rate and exact match per minConfidence threshold"
            every_05 = [p for p in points if abs(p["threshold"] * 20 - round(p["threshold"] * 20)) < 1e-9]
            plot_curve(every_05, args.plot, title)
    return 0
