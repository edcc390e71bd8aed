"""Post-processing's golden suite: one folder per rule of finish_completion, one file per case (as Tabby keeps its
post-processing cases), each a document with its cursor, what the model wrote, and what the editor shows.

A case file (postprocess_golden/<rule>/<case>.txt):

    language: python                      (or "none": plain text)
    why: one line: what the case shows
    === document
    print(‸)                              (‸ marks the cursor)
    === completion
    "hi")
    === shown
    print("hi")‸                          (the document after accepting, ‸ after the inserted text; "(not shown)")

`WAFERLINE_UPDATE_GOLDEN=1 pytest tests/syntax/test_postprocess_golden.py` rewrites each "=== shown" from what the code
does now: read the diff before committing it, it is the change in behaviour.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from waferline.syntax.plan import plan_completion
from waferline.syntax.postprocess import finish_completion
from waferline.syntax.tree import SyntaxTree

CASES = Path(__file__).parent / "postprocess_golden"
CURSOR = "‸"
NOT_SHOWN = "(not shown)"
SECTIONS = ("document", "completion", "shown")


def parse_case(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    """(header fields, sections) of a case file; a section's text is its lines, the last newline dropped."""
    head, _, body = path.read_text(encoding="utf-8").partition("=== ")
    fields = dict(line.split(": ", 1) for line in head.splitlines() if line.strip())
    sections: dict[str, str] = {}
    for chunk in ("=== " + body).split("\n=== "):
        name, _, text = chunk.removeprefix("=== ").partition("\n")
        sections[name.strip()] = text.removesuffix("\n")
    if set(fields) != {"language", "why"} or tuple(sections) != SECTIONS:
        raise ValueError(f"{path}: wants `language:` and `why:` lines, then sections {SECTIONS}")
    if sections["document"].count(CURSOR) != 1:
        raise ValueError(f"{path}: the document marks its cursor with one {CURSOR}")
    return fields, sections


def shown(fields: dict[str, str], sections: dict[str, str]) -> str:
    marked = sections["document"] + "\n"
    offset = marked.index(CURSOR)
    text = marked[:offset] + marked[offset + 1 :]
    language = None if fields["language"] == "none" else fields["language"]
    plan = plan_completion(text, offset, language, SyntaxTree(language, text) if language else None)
    done = finish_completion(text, offset, language, sections["completion"], plan)
    if done is None:
        return NOT_SHOWN
    return (text[:offset] + done.insert_text + CURSOR + text[done.replace_end_offset :]).removesuffix("\n")


def all_cases() -> list[Path]:
    return sorted(CASES.glob("*/*.txt"))


def test_every_rule_has_cases() -> None:
    rules = {p.name for p in CASES.iterdir() if p.is_dir()}
    assert rules and all(any((CASES / r).glob("*.txt")) for r in rules), "a rule's folder holds at least one case"


@pytest.mark.parametrize("path", all_cases(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_golden(path: Path) -> None:
    fields, sections = parse_case(path)
    got = shown(fields, sections)
    if os.environ.get("WAFERLINE_UPDATE_GOLDEN"):
        head, _, _ = path.read_text(encoding="utf-8").rpartition("=== shown\n")
        path.write_text(f"{head}=== shown\n{got}\n", encoding="utf-8")
        return
    assert got == sections["shown"], f"{path.relative_to(CASES)}: {fields['why']}"


def test_a_case_file_that_breaks_the_format_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text("language: python\nwhy: no cursor\n=== document\nx = 1\n=== completion\n2\n=== shown\nx\n")
    with pytest.raises(ValueError, match="cursor"):
        parse_case(bad)
    bad.write_text("language: python\n=== document\n‸\n")
    with pytest.raises(ValueError, match="sections"):
        parse_case(bad)
