"""Code actions without a server: which targets a cursor offers in each language, the spans they rewrite, the
syntax check that refuses an edit, the missing-token repair, and the clean-up of what a model writes."""

from __future__ import annotations

import pytest

from waferline.server.features.actions.compute import clean_docstring, extract_code, insert_missing_tokens, reindent
from waferline.server.features.actions.targets import (
    COMPLETE_BODY,
    DOCSTRING,
    REGENERATE,
    REPAIR,
    REWRITE,
    Source,
    Target,
    find_targets,
)
from waferline.syntax.parse_check import new_syntax_error
from waferline.syntax.tree import SyntaxTree


def source(text: str, language_id: str = "python") -> Source:
    return Source(text, language_id, SyntaxTree(language_id, text))


def targets_at(text: str, needle: str, language_id: str = "python", end_needle: str | None = None) -> dict[str, Target]:
    src = source(text, language_id)
    start = text.index(needle)
    end = text.index(end_needle) + len(end_needle) if end_needle else start
    return {t.kind: t for t in find_targets(src, start, end)}


def replaced(text: str, t: Target) -> str:
    return text[t.start : t.end]


@pytest.mark.parametrize("body", ["pass", "...", "raise NotImplementedError", "# TODO: write it\n    pass"])
def test_python_placeholder_bodies_offer_complete_body(body: str) -> None:
    text = f"def add(a, b):\n    {body}\n\n\nx = add(1, 2)\n"
    found = targets_at(text, "add(a")
    t = found[COMPLETE_BODY]
    assert replaced(text, t) == body, "the placeholder, and only it, is replaced"
    assert (t.head, t.tail) == ("", "")
    assert text[t.node_start : t.node_end].startswith("def add") and t.node_start <= t.start <= t.end <= t.node_end


def test_python_real_body_offers_no_completion_but_a_docstring_and_regenerate() -> None:
    text = "def add(a, b):\n    return a + b\n"
    found = targets_at(text, "return")
    assert COMPLETE_BODY not in found
    assert replaced(text, found[REGENERATE]) == "return a + b" and found[REGENERATE].max_lines == 1
    doc = found[DOCSTRING]
    assert doc.start == doc.end == text.index("    return") and (doc.head, doc.tail) == ('    """', '"""\n')


def test_python_docstring_only_body_and_one_line_def() -> None:
    text = 'def f(x):\n    """Doc."""\n'
    t = targets_at(text, "f(x)")[COMPLETE_BODY]
    assert t.start == t.end == text.index('"""\n') + 3 and t.head == "\n    "
    assert DOCSTRING not in targets_at(text, "f(x)"), "it has a docstring already"
    text = "def f(x): pass\n"
    t = targets_at(text, "f(x)")[COMPLETE_BODY]
    assert replaced(text, t) == "pass" and t.head == "\n    "


@pytest.mark.parametrize(
    ("language_id", "text", "cursor"),
    [
        ("javascript", "function f(a) {\n  // TODO\n}\n", "f(a)"),
        ("typescript", "export function f(a: number): number {\n}\n", "f(a"),
        ("go", "package main\n\nfunc f(a int) int {\n\t// TODO\n}\n", "f(a"),
        ("rust", "fn f(a: i32) -> i32 {\n    todo!()\n}\n", "f(a"),
        ("java", "class C {\n  int f(int a) {\n  }\n}\n", "f(int"),
        ("c", "int f(int a) {\n  /* TODO */\n}\n", "f(int"),
        ("cpp", "int f(int a) {\n}\n", "f(int"),
    ],
)
def test_brace_languages_replace_the_inside_of_the_braces(language_id: str, text: str, cursor: str) -> None:
    t = targets_at(text, cursor, language_id)[COMPLETE_BODY]
    assert text[t.start - 1] == "{" and text[t.end] == "}"
    assert t.head.startswith("\n") and t.tail.startswith("\n")
    indent = "\t" if language_id == "go" else ""
    assert t.head[1:].startswith(indent) and len(t.head) > 1


def test_lua_function_without_body() -> None:
    text = "local function f(a)\nend\n"
    t = targets_at(text, "f(a)", "lua")[COMPLETE_BODY]
    assert text[t.start - 3 : t.start] == "(a)" and text[t.end : t.end + 3] == "end"


def test_doc_comment_goes_above_the_definition_and_its_export() -> None:
    text = "const x = 1;\n\nexport function f(a) {\n  return a;\n}\n"
    t = targets_at(text, "return", "typescript")[DOCSTRING]
    assert t.start == t.end == text.index("export") and (t.head, t.tail) == ("// ", "\n")
    documented = "// Returns a.\nfunction f(a) {\n  return a;\n}\n"
    assert DOCSTRING not in targets_at(documented, "return", "javascript")


def test_repair_finds_the_statement_around_an_error_on_the_cursor_line() -> None:
    text = "package main\n\nfunc f(x int) int {\n\treturn (x + 1\n}\n"
    t = targets_at(text, "return", "go")[REPAIR]
    assert replaced(text, t) == "return (x + 1"
    assert REGENERATE not in targets_at(text, "return", "go"), "a broken statement is repaired, not regenerated"
    fixed = insert_missing_tokens(source(text, "go"), t)
    assert fixed is not None and fixed.new_text == "return (x + 1)" and fixed.source == "missing tokens"


def test_repair_without_missing_tokens_needs_the_model() -> None:
    text = "x = = 2\ny = 3\n"
    t = targets_at(text, "x =")[REPAIR]
    assert replaced(text, t) == "x = = 2"
    assert insert_missing_tokens(source(text), t) is None
    assert REPAIR not in targets_at(text, "y = 3"), "the error is on another line"


def test_rewrite_widens_a_selection_to_whole_statements() -> None:
    text = "def f(x):\n    a = x + 1\n    b = a * 2\n    return b\n"
    t = targets_at(text, "+ 1", end_needle="b = a")[REWRITE]
    assert replaced(text, t) == "a = x + 1\n    b = a * 2"
    t = targets_at(text, "x + 1", end_needle="x + 1")[REWRITE]
    assert replaced(text, t) == "x + 1", "inside one expression: the smallest node covering it"


def test_no_targets_for_plain_text() -> None:
    assert find_targets(source("some words", "plaintext"), 0, 0) == []


def test_check_refuses_a_new_error_and_accepts_a_fix() -> None:
    text = "def f(x):\n    pass\n"
    start, end = text.index("pass"), text.index("pass") + 4
    assert new_syntax_error("python", text, start, end, "return x") is None
    reason = new_syntax_error("python", text, start, end, "return (x")
    assert reason is not None and "line 2" in reason
    broken = "x = = 2\ny = 3\n"
    assert new_syntax_error("python", broken, 0, 7, "x = 2") is None, "removing an error is fine"
    other = "x = = 2\ny = 3\n"
    assert new_syntax_error("python", other, 8, 13, "y = 4") is None, "an old error elsewhere does not count"
    reason = new_syntax_error("python", "def f():\n    pass\n", 9, 9, '    """Say "hi""""\n')
    assert reason is not None and "syntax error" in reason


def test_clean_docstring() -> None:
    assert clean_docstring('Add two numbers."""\n', True, "    ") == "Add two numbers."
    assert clean_docstring("Add.\n\n        Longer text.\n", True, "    ") == "Add.\n\n    Longer text."
    assert clean_docstring("  \n", True, "") == ""
    assert clean_docstring(" Returns a.\nnext line", False, "") == "Returns a."
    assert clean_docstring("!!!", False, "") == ""


def test_extract_code_and_reindent() -> None:
    assert extract_code("Sure:\n```python\nx = 1\ny = 2\n```\nDone.") == "x = 1\ny = 2"
    assert extract_code("x = 1") == "x = 1"
    assert reindent("if a:\n    b()", "    ") == "if a:\n        b()"
    assert reindent("if a:\n        b()", "    ") == "if a:\n        b()", "already indented as in the file"
