"""`waferline eval-lookup` on a corpus of two small files: every figure is present and consistent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from waferline.benchmarks.lookup_eval import sweep
from waferline.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
CODE = """class Point:
    def __init__(self, x, y):
        self.x = x
        self.y = y

    def moved(self, dx, dy):
        return Point(self.x + dx, self.y + dy)

    def scaled(self, k):
        return Point(self.x * k, self.y * k)
"""


def test_sweep_counts_rules_against_the_model() -> None:
    def row(expected: str, own: str, own_mean: float, text: str, mean: float) -> dict[str, object]:
        candidate = {"text": text, "mean": mean, "total": 2 * mean}
        return {"expected": expected, "own": own, "own_mean": own_mean, "own_total": 2 * own_mean,
                "candidates": [candidate]}  # fmt: skip

    rows = [row("a", "a", -0.1, "b", -0.5), row("c", "x", -1.0, "c", -2.2)]
    figures = sweep(rows)
    assert figures["model_alone"] == 1 and figures["oracle"] == 1 and figures["with_candidates"] == 2
    assert figures["first_mean_at_least_-2.5"] == 1  # takes "b" (wrong) in the first case, "c" in the second
    assert figures["first_mean_at_least_-2.0"] == 0  # takes "b", keeps the wrong "x"
    assert figures["total_beats_greedy"] == 1  # neither candidate beats the greedy total: the model's own answers


@pytest.mark.slow
def test_a_real_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    with (corpus / "corpus.jsonl").open("w") as f:
        for i in range(2):
            row = {"dist": "d", "version": "1", "licence": "MIT", "path": f"m{i}.py", "split": "train", "text": CODE}
            f.write(json.dumps(row) + "\n")
    model = str(ROOT / "engine" / "models" / "waferline-mini")
    argv = ["eval-lookup", "--model", model, "--corpus", str(corpus), "--splits", "", "--cases", "4", "--json"]
    assert main(argv) == 0
    figures = json.loads(capsys.readouterr().out)
    assert 1 <= figures["cases"] <= 4 and figures["oracle"] <= figures["with_candidates"] <= figures["cases"]
    assert all(figures[k] <= figures["cases"] for k in figures)
