"""`waferline calibrate`: fit the server's confidence to eval-editor records, and print or plot its curve.

    waferline eval-editor --corpus runs/corpus --splits held_out_file --kinds line --option minConfidence=0 \\
        --records fit.json
    waferline calibrate fit.json --write syntax/confidence.json
    waferline eval-editor --kinds line --option minConfidence=0 --records eval.json
    waferline calibrate eval.json --curve --plot docs/images/confidence-curve.png
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
    parser.add_argument("--kinds", default="line", help="record kinds to use (default: line)")


def run(args: argparse.Namespace) -> int:
    from waferline.syntax.confidence import Calibration, load_calibration
    from waferline.training.calibrate import calibrate, curve, plot_curve, write_calibration

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
    if args.curve or args.plot is not None:
        cal = Calibration.from_dict(json.loads(args.write.read_text())) if args.write else load_calibration()
        confidences = [cal.confidence(r["features"]) if r.get("features") else None for r in records]
        points = curve(confidences, [bool(r.get("right")) for r in records], [i / 20 for i in range(20)])
        print(f"{'threshold':>9} {'shown':>7} {'exact|shown':>11} {'exact':>7}")
        for p in points:
            print(
                f"{p['threshold']:9.2f} {p['shown_rate']:7.3f} {p['exact_when_shown']:11.3f} {p['exact_over_all']:7.3f}"
            )
        if args.plot is not None:
            title = f"{args.records.name}: shown rate and exact match per minConfidence threshold"
            plot_curve(points, args.plot, title)
    return 0
