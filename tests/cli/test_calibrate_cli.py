"""`waferline calibrate`: which records the fit reads and which the curve reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from waferline.cli.main import main
from waferline.syntax.confidence import FEATURES


def record(kind: str, shown: bool, right: bool, dist: str) -> dict[str, object]:
    feats = {name: 0.0 for name in FEATURES}
    feats["mean_logprob"] = -0.1 if right else -2.0
    return {"kind": kind, "path": f"{dist}/m.py", "expected": "x = 1", "right": right,
            "suggestion": ("x = 1" if right else "y = 2") if shown else None,
            "confidence": 0.5 if shown else None, "features": feats if shown else None}  # fmt: skip


def shown_at_zero(out: str) -> float:
    row = next(line for line in out.splitlines() if line.split()[:1] == ["0.00"])
    return float(row.split()[1])


def test_the_curve_reads_only_the_curve_kinds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = [record("line", True, i % 2 == 0, f"d{i % 2}") for i in range(8)]
    records += [record("indent", False, False, f"d{i % 2}") for i in range(8)]
    path = tmp_path / "r.json"
    path.write_text(json.dumps(records))
    assert main(["calibrate", str(path), "--kinds", "line,indent", "--curve"]) == 0
    assert shown_at_zero(capsys.readouterr().out) == 0.5  # every record of both kinds
    assert main(["calibrate", str(path), "--kinds", "line,indent", "--curve-kinds", "line", "--curve"]) == 0
    assert shown_at_zero(capsys.readouterr().out) == 1.0  # the line records alone
    written = tmp_path / "c.json"
    assert main(["calibrate", str(path), "--kinds", "line,indent", "--curve-kinds", "indent", "--write", str(written),
                 "--curve"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "8 shown suggestions" in written.read_text() and shown_at_zero(out) == 0.0  # fitted on the 8 shown
