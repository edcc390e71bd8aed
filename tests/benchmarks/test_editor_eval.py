"""`waferline eval-editor` on a tiny set: the scoring of shown, right, looping and empty suggestions, and a real run
of HumanEval masks through `waferline serve` with the shipped model (figures are whatever they are; their shape and
the baselines' presence are checked)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from waferline.benchmarks.editor_eval import records_path, server_options
from waferline.benchmarks.editor_scores import right, score, summarize
from waferline.cli.main import main
from waferline.training.editor_cases import EditorCase

ROOT = Path(__file__).resolve().parents[2]


def case(expected: str, kind: str = "line") -> EditorCase:
    return EditorCase(kind, "x.py", "def f(a):\n    return ", 20, expected)


def test_score_counts_shown_right_kept_and_loops() -> None:
    cases = [case("a + 1"), case("a * 2"), case("a - 3"), case("a"), case("g(a)")]
    suggestions = ["a + 1", "a * 3\nprint(a)", None, "", "g(a) + g(a) + g(a) + g(a) + g(a)"]
    f = score(cases, suggestions, tests=False)
    assert f["cases"] == 5 and f["shown_rate"] == 3 / 5
    assert f["exact_when_shown"] == 1 / 3 and f["exact_over_all"] == 1 / 5
    assert f["kept_chars_per_100"] == 100 * (5 + 4 + 4) / 5  # longest correct starts: "a + 1", "a * ", "g(a)"
    # word by word: "a + 1"; "a", " ", "* " ("3" wrong); "g", "(", "a" (") " goes past the expected end)
    assert f["kept_per_shown"] == (5 + 4 + 3) / 3
    assert f["loops_shown"] == 1
    for name in ("shown_rate", "exact_when_shown", "exact_over_all", "kept_per_shown", "kept_chars_per_100"):
        low, high = f[name + "_ci"]
        assert low <= f[name] <= high
    assert right(cases[0], "a + 1\nmore") and not right(cases[3], "")


def test_paired_comparisons_between_models_and_copy_line() -> None:
    class Tok:  # the n-gram baseline's tokenizer: characters
        vocab_size = 256

        def encode(self, text: str) -> list[int]:
            return list(text.encode())[-64:]

        def decode(self, ids: list[int]) -> str:
            return bytes(ids).decode(errors="replace")

    cases = [case("a + 1"), case("a * 2"), case("a - 3"), case("a")]
    first = [{"suggestion": s, "latency_ms": 1.0} for s in ("a + 1", None, None, "b")]
    second = [{"suggestion": s, "latency_ms": 2.0} for s in ("a + 1", "a * 2", None, "a")]
    figures = summarize(cases, {"old": first, "new": second}, Tok())
    row = figures["line"]
    assert row["old"]["exact_over_all"] == 1 / 4 and row["new"]["exact_over_all"] == 3 / 4
    assert row["second_minus_first"]["exact_over_all"] == pytest.approx(2 / 4)
    assert row["new"]["latency_ms_p50"] == 2.0 and {"copy_line", "ngram"} <= set(row)
    assert records_path(Path("r.json"), 1, 2) == Path("r-2.json") and records_path(Path("r.json"), 0, 1) == Path(
        "r.json"
    )


def test_options_are_json_or_strings() -> None:
    assert server_options(["minConfidence=0.2", "model=tiny", "precompute=false"]) == {
        "minConfidence": 0.2, "model": "tiny", "precompute": False,
    }  # fmt: skip
    with pytest.raises(ValueError, match="NAME=VALUE"):
        server_options(["nonsense"])


@pytest.mark.slow
def test_a_real_run_through_the_server(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = tmp_path / "records.json"
    model = str(ROOT / "engine" / "models" / "waferline-mini")
    argv = ["eval-editor", "--model", model, "--kinds", "he-line", "--humaneval", "3", "--json",
            "--option", "minConfidence=0", "--records", str(records)]  # fmt: skip
    assert main(argv) == 0
    figures = json.loads(capsys.readouterr().out)
    assert set(figures["he-line"]) == {"waferline", "copy_line", "ngram"}
    assert figures["he-line"]["waferline"]["cases"] == 3 and "pass_at_1" in figures["he-line"]["waferline"]
    rows = json.loads(records.read_text())
    assert len(rows) == 3 and all(r["kind"] == "he-line" for r in rows)
    assert all((r["confidence"] is None) == (r["suggestion"] is None) for r in rows)
