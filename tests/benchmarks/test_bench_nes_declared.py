"""benchmarks/nes_declared.py: its generated files parse, and each timed chain does the work it names (a rename
that made no edit would time a silent answer)."""

from __future__ import annotations

import argparse

import pytest

from waferline.benchmarks.nes_declared import make_file, run
from waferline.syntax.languages import parser_for


@pytest.mark.parametrize("language", ["rust", "java", "c", "cpp"])
@pytest.mark.parametrize("shape", ["units", "long"])
def test_the_generated_files_parse_and_have_the_lines_asked_for(language: str, shape: str) -> None:
    text, needle = make_file(language, 300, shape)
    parser = parser_for(language)
    assert parser is not None and not parser.parse(text.encode()).root_node.has_error
    assert 295 <= text.count("\n") <= 310 and text.count(needle) == 1


def test_every_chain_makes_its_edits(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(argparse.Namespace(lines=120, repeat=1, chain=5)) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[1:]]
    made = {(r[0], r[1], r[2]): int(r[4]) for r in rows}
    assert len(made) == 16
    assert all(
        made[(lang, shape, "rename")] >= 3 for lang in ("rust", "java", "c", "cpp") for shape in ("units", "long")
    )
    # the units' signature: the one caller's call follows (C++'s too, a free function); a long file has no call
    assert [made[(lang, "units", "signature")] for lang in ("rust", "java", "c", "cpp")] == [1, 1, 1, 1]
