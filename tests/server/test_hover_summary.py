"""Where the model writes a hover summary (the docstring position) and how its text is cleaned."""

from __future__ import annotations

from pathlib import Path

from waferline.server.features.hover import clean_summary, summary_key, summary_prompt
from waferline.server.repository.symbols import Definition


def definition(text: str, name: str, language: str, kind: str = "function") -> Definition:
    line = next(i for i, row in enumerate(text.split("\n")) if name in row)
    col = text.split("\n")[line].index(name)
    return Definition(
        name, kind, Path("/w/f"), ((line, 0), (line + 1, 0)), ((line, col), (line, col + len(name))), "", "", "",
        language,
    )  # fmt: skip


def test_python_summary_goes_between_docstring_quotes() -> None:
    text = "import os\n\n\nclass Shop:\n    def total(self, items):\n        return sum(items)\n"
    prefix, suffix, closer = summary_prompt(definition(text, "total", "python", "method"), text) or ("", "", "")
    assert prefix.endswith('    def total(self, items):\n        """') and closer == '"""'
    assert suffix == '"""\n        return sum(items)\n'


def test_one_line_python_def_and_other_languages_get_a_comment_above() -> None:
    text = "x = 1\ndef f(a): return a\n"
    prefix, suffix, closer = summary_prompt(definition(text, "f(", "python"), text) or ("", "", "")
    assert prefix == "x = 1\n# " and suffix.startswith("\ndef f(a)") and closer == "\n"
    go = "package main\n\n\tfunc Add(a, b int) int {\n\treturn a + b\n}\n"
    prefix, suffix, _ = summary_prompt(definition(go, "Add", "go"), go) or ("", "", "")
    assert prefix.endswith("\n\n\t// ") and suffix.startswith("\n\tfunc Add")
    rust = "fn add(a: i32) -> i32 {\n    a\n}\n"
    assert (summary_prompt(definition(rust, "add", "rust"), rust) or ("",))[0] == "/// "


def test_summary_key_follows_the_definition_text() -> None:
    text = "def f(a):\n    return a\n"
    d = definition(text, "f(", "python")
    assert summary_key(d, text) == summary_key(d, text + "\n# later code\n")
    assert summary_key(d, text) != summary_key(d, text.replace("return a", "return -a"))


def test_clean_summary() -> None:
    assert clean_summary(' Sum the items."""\n more') == "Sum the items."
    assert clean_summary("// Adds two numbers. */") == "Adds two numbers."
    assert clean_summary("   ") == "" and clean_summary("()") == ""
    assert len(clean_summary("word " * 100)) <= 160
