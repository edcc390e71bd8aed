"""Choose `nextEditMinConfidence` from one `waferline eval-nes --records` run made with the threshold at 0.

    python -m waferline.benchmarks.nes_threshold --records R.json [--cases DIR] --part choose

The model's edit is shown when its confidence (recorded with each suggestion) reaches the threshold, and the model
is asked only when no structural edit is found, so the run at 0 tells what every higher threshold would show: a
model edit under it becomes silence. Per threshold: exact next hunk, edits shown and how many of them are right,
silent when it should be and when it should not. The threshold chosen is the lowest at which the model's shown edits
are right at least as often as `--precision` (default 0.5: as often right as wrong), on the part given (choose: the
part options are chosen on; training/eval-parts.txt).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from waferline.benchmarks.nes_eval import DATA, after_user, apply, intended, read_cases

THRESHOLDS = (0.0, 0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)


def sweep(cases: list[dict[str, Any]], answers: list[dict[str, Any]], thresholds: tuple[float, ...] = THRESHOLDS
          ) -> list[dict[str, Any]]:  # fmt: skip
    by_id = {a["id"]: a for a in answers}
    rows = []
    for t in thresholds:
        right = shown = model_shown = model_right = silent_ok = silent_bad = 0
        goes_on = sum(c["next"] is not None for c in cases)
        for c in cases:
            s = [x for x in by_id[c["id"]]["suggested"][:1] if x["kind"] != "model" or (x["confidence"] or 0) >= t]
            text = apply(after_user(c), s[0]) if s else after_user(c)
            ok = text == intended(c)
            shown += bool(s)
            if s and s[0]["kind"] == "model":
                model_shown += 1
                model_right += ok and c["next"] is not None
            if c["next"] is not None:
                right += ok
                silent_bad += not s
            else:
                silent_ok += not s
        ends = len(cases) - goes_on
        rows.append({"threshold": t, "exact_next_hunk": round(right / max(goes_on, 1), 4), "shown": shown,
                     "model_shown": model_shown, "model_right": model_right,
                     "silent_when_should": round(silent_ok / max(ends, 1), 4),
                     "silent_when_should_not": round(silent_bad / max(goes_on, 1), 4)})  # fmt: skip
    return rows


def choose(rows: list[dict[str, Any]], precision: float) -> float | None:
    for r in rows:
        if r["model_shown"] and r["model_right"] / r["model_shown"] >= precision:
            return float(r["threshold"])
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=Path, required=True, help="eval-nes --records of a run at threshold 0")
    parser.add_argument("--cases", type=Path, default=DATA)
    parser.add_argument("--part", default="choose", choices=("all", "kept-aside", "choose"))
    parser.add_argument("--precision", type=float, default=0.5)
    args = parser.parse_args(argv)
    cases = read_cases(args.cases, ["model"], part=args.part)
    answers = json.loads(args.records.read_text(encoding="utf-8"))
    ids = {c["id"] for c in cases}
    rows = sweep(cases, [a for a in answers if a["id"] in ids])
    for r in rows:
        print(json.dumps(r))
    print(json.dumps({"part": args.part, "precision": args.precision, "chosen": choose(rows, args.precision)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
