"""Editor-shaped evaluation cases and the HumanEval scorer, on fixtures made here."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from waferline.training.data import SourceFile
from waferline.training.editor_cases import (
    blank_line_cases,
    code_line_cases,
    humaneval_cases,
    indent_line_cases,
    kept_chars,
    kept_words,
    passes_tests,
    read_humaneval,
    word_pieces,
)

PROBLEM = {
    "task_id": "Test/0",
    "prompt": 'def add_all(values, k):\n    """Add k to each value."""\n',
    "canonical_solution": "    out = []\n    for v in values:\n        out.append(v + k)\n    return out\n",
    "test": "def check(f):\n    assert f([1, 2], 3) == [4, 5]\n    assert f([], 1) == []\n",
    "entry_point": "add_all",
}


def test_line_cases_cut_the_rest_of_a_code_line(texts: list[str]) -> None:
    files = [SourceFile(f"f{i}.py", t) for i, t in enumerate(texts)]
    cases = code_line_cases(files, 30, seed=1)
    assert len(cases) == 30
    for c in cases:
        original = next(f.text for f in files if f.rel_path == c.path)
        line_start = c.document.rfind("\n", 0, c.offset) + 1
        typed = c.document[line_start : c.offset]
        assert typed.strip() and c.expected.strip()
        assert (typed + c.expected) in original.split("\n")  # the document's line plus the expected text is a line
        assert c.document[c.offset : c.offset + 1] in ("\n", "")  # the rest of the line is gone
        assert not typed.lstrip().startswith("#")


def test_blank_cases_empty_a_whole_line(texts: list[str]) -> None:
    files = [SourceFile(f"f{i}.py", t) for i, t in enumerate(texts)]
    for c in blank_line_cases(files, 10, seed=2):
        assert c.document[c.offset - 1 : c.offset] in ("\n", "") and c.document[c.offset : c.offset + 1] == "\n"
        original = next(f.text for f in files if f.rel_path == c.path)
        rebuilt = c.document[: c.offset] + c.expected + c.document[c.offset :]
        assert [x.rstrip() for x in rebuilt.split("\n")] == [x.rstrip() for x in original.split("\n")]
        assert c.expected.strip()


def test_indent_cases_leave_the_indentation_and_the_cursor_after_it(texts: list[str]) -> None:
    files = [SourceFile(f"f{i}.py", t) for i, t in enumerate(texts)]
    cases = indent_line_cases(files, 10, seed=2)
    assert cases and any(c.document[c.offset - 1 : c.offset] == " " for c in cases)  # indented lines among them
    for c in cases:
        line_start = c.document.rfind("\n", 0, c.offset) + 1
        assert c.document[line_start : c.offset].strip() == "" and c.document[c.offset : c.offset + 1] in ("\n", "")
        original = next(f.text for f in files if f.rel_path == c.path)
        rebuilt = c.document[: c.offset] + c.expected + c.document[c.offset :]
        assert [x.rstrip() for x in rebuilt.split("\n")] == [x.rstrip() for x in original.split("\n")]
        assert c.expected == c.expected.strip() and c.expected


def test_humaneval_masks_and_the_scorer(tmp_path: Path) -> None:
    cases = humaneval_cases([PROBLEM], seed=0)
    assert {c.kind for c in cases} == {"he-line", "he-multi"}
    for c in cases:
        assert passes_tests(c, c.expected), c  # the canonical solution passes
        assert not passes_tests(c, "return None"), c  # a wrong fill fails
        assert c.document[: c.offset].endswith(" ")  # the cursor sits after the indentation
    looping = cases[0]
    assert not passes_tests(looping, "while True: pass", timeout_s=1.0)  # a hang is a failure, not a hang
    path = tmp_path / "problems.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write(json.dumps(PROBLEM) + "\n")
    assert read_humaneval(path) == [PROBLEM]


def test_kept_chars_counts_the_correct_start() -> None:
    assert kept_chars("return a + b", "return a - b") == 9
    assert kept_chars("", "x") == 0
    assert kept_chars("abc", "abc") == 3


def test_word_pieces_are_what_accept_next_word_takes() -> None:
    assert word_pieces("return a + b") == ["return", " ", "a", " ", "+ ", "b"]
    assert word_pieces(") + b") == [") ", "+ ", "b"]
    assert word_pieces("  foo.bar(x, y)") == ["  ", "foo", ".", "bar", "(", "x", ", ", "y", ")"]
    assert "".join(word_pieces("x = {'a': [1, 2]}  # c")) == "x = {'a': [1, 2]}  # c"
    assert word_pieces("") == []


def test_kept_words_stops_at_the_first_wrong_word() -> None:
    assert kept_words("return a + b", "return a - b") == 9  # "return", " ", "a", " "; "+ " is wrong
    assert kept_words("self.items.pop()", "self.item") == 5  # "self", "."; "items" is not "item"
    assert kept_chars("self.items.pop()", "self.item") == 9  # to the character it would be more
    assert kept_words("abc", "abc") == 3 and kept_words("", "abc") == 0
    assert kept_words("ab", "abc") == 2  # a whole word the expected text starts with: kept, the user types on
