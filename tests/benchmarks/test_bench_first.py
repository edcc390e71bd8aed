"""`waferline bench-first`: its cases, and the benchmark's plumbing on a tiny run (the tiny preset; no timing
asserted)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from waferline.benchmarks.first import LINES, make_cases
from waferline.cli.main import main


def module(tmp_path: Path, lines: int = LINES + 20) -> Path:
    body = "".join(
        f"def f{i}(values, factor):\n    total = sum(v * factor for v in values) + {i}\n" for i in range(lines)
    )
    path = tmp_path / "module.py"
    path.write_text(body)
    return path


def test_each_case_is_the_files_first_thousand_lines_with_one_line_cut_at_the_cursor(tmp_path: Path) -> None:
    path = module(tmp_path)
    cases = make_cases([path], 3, seed=1)
    original = path.read_text().splitlines(keepends=True)[:LINES]
    assert len(cases) == 3 and len({c.line for c in cases}) == 3
    for case in cases:
        lines = case.text.splitlines(keepends=True)
        assert len(lines) == LINES and lines[: case.line] == original[: case.line]
        assert lines[case.line + 1 :] == original[case.line + 1 :]
        kept = lines[case.line].rstrip("\n")
        assert original[case.line].startswith(kept) and len(kept) == case.character < len(original[case.line]) - 2
    assert make_cases([path], 3, seed=1) == cases  # the same seed, the same cases


def test_a_file_shorter_than_a_thousand_lines_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="1000"):
        make_cases([module(tmp_path, 100)], 1, seed=0)


@pytest.mark.slow  # starts the server twice: ~13 s
def test_bench_first_runs_both_modes_and_reports_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["bench-first", "--model", "tiny", "--files", str(module(tmp_path)), "--cursors", "2", "--open-s", "0.5"]
    assert main([*argv, "--json"]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["cases"] == 2 and len(report["loadavg_before"]) == 3
    for mode in ("warm", "cold"):
        assert report[mode]["p50_ms"] > 0 and report[mode]["prefilled_tokens_mean"] >= 1
    # A warm-up (finished, or cut short by the request on a slow machine) only ever leaves less to prefill.
    assert report["warm"]["prefilled_tokens_mean"] <= report["cold"]["prefilled_tokens_mean"]
    server = report["server"]
    assert server["warmups"] + server["warmups_cancelled"] == 2 and "tiny" in server["engine"], server
