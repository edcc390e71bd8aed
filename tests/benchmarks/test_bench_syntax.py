"""`waferline bench-syntax`: types into a generated file and prints a line per step of a keystroke's syntax work."""

from __future__ import annotations

import pytest

from waferline.benchmarks.syntax import make_file
from waferline.cli.main import main


def test_the_generated_file_has_the_lines_asked_for() -> None:
    assert make_file(2000).count("\n") >= 2000


def test_bench_syntax_reports_every_step(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench-syntax", "--lines", "200", "--keys", "30"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("30 keystrokes; ")
    assert [line.split(":")[0].strip() for line in lines[2:]] == ["edit", "parse", "plan", "finish"]
