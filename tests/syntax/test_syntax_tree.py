"""SyntaxTree: incremental re-parse equals a fresh parse, edits are recorded without parsing, plain-text fallbacks."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from waferline.syntax.languages import CONTEXT, load_query
from waferline.syntax.text import DocumentText
from waferline.syntax.tree import MAX_PARSE_BYTES, SyntaxTree

FIXTURES = Path(__file__).parents[1] / "server" / "fixtures"
SAMPLE = (FIXTURES / "sample.py").read_text(encoding="utf-8")

snippets = st.sampled_from(["x", " ", "\n", "    ", "(", ")", ":", "def ", "return ", "'", "é", "😀", "\r\n", "#", "1"])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(SAMPLE)), st.integers(0, 8), st.lists(snippets, max_size=4)),
                min_size=1, max_size=8))  # fmt: skip
def test_incremental_reparse_equals_fresh_parse(edits: list) -> None:
    doc = DocumentText(SAMPLE, language_id="python")
    tree = SyntaxTree.for_document(doc)
    assert tree.root is not None
    for at, length, pieces in edits:
        start = min(at, len(doc.text))
        end = min(start + length, len(doc.text))
        rng = (doc.position_at(start), doc.position_at(end))
        tree.apply(doc.apply_change(rng, "".join(pieces)))
        if len(pieces) % 2:  # read the tree after some edits only, so several edits land in one parse
            assert tree.root is not None
    fresh = SyntaxTree("python", doc.text)
    assert tree.source == doc.text.encode()
    assert tree.root is not None and fresh.root is not None
    assert str(tree.root) == str(fresh.root)
    assert tree.error_count() == fresh.error_count()


def test_edits_are_parsed_lazily_once() -> None:
    doc = DocumentText(SAMPLE, language_id="python")
    tree = SyntaxTree.for_document(doc)
    assert not tree.has_errors and tree.parses == 1
    line = doc.line_count - 1
    for ch in "def f(:":  # typing an unfinished header, key by key
        tree.apply(doc.apply_change(((line, 0), (line, 0)), ch))
    assert tree.parses == 1, "recording an edit does not parse"
    assert tree.has_errors and tree.parses == 2
    errors = tree.errors()
    assert errors and errors[0].start_byte >= len(SAMPLE.encode()) - 1, "the error is where the typing happened"
    assert tree.error_count(0, 100) == 0


def test_snapshot_is_unaffected_by_later_edits() -> None:
    doc = DocumentText("x = 1\n", language_id="python")
    tree = SyntaxTree.for_document(doc)
    snap = tree.snapshot()
    assert snap is not None
    tree.apply(doc.apply_change(((0, 4), (0, 5)), "(((("))
    assert tree.has_errors and not snap.errors()
    checked = snap.parse_with(4, 5, b"2 + 3")
    assert not checked.root_node.has_error and snap.source == b"x = 1\n"


def test_unknown_language_binary_and_huge_are_plain_text() -> None:
    for language_id, text in [(None, "a b"), ("cobol", "MOVE A TO B."), ("python", "x\0y"),
                              ("python", "x = 1\n" * (MAX_PARSE_BYTES // 6 + 1))]:  # fmt: skip
        tree = SyntaxTree(language_id, text)
        assert tree.is_plain_text and tree.root is None and tree.snapshot() is None
        assert tree.plain_reason and not tree.has_errors and tree.errors() == []
        doc = DocumentText(text[:10], language_id=language_id)
        tree = SyntaxTree.for_document(doc)
        tree.apply(doc.apply_change(((0, 0), (0, 0)), "é"))  # edits still keep the bytes current
        assert tree.source == doc.text.encode("utf-8", "surrogatepass")


def test_every_language_has_a_compiling_query() -> None:
    for language_id in ["python", "javascript", "javascriptreact", "typescript", "typescriptreact", "go", "rust",
                        "lua", "c", "cpp", "java"]:  # fmt: skip
        for captures in ((), ("import",), ("definition",), ("comment", "string", "code")):
            assert load_query(language_id, CONTEXT, captures) is not None, (language_id, captures)
    assert load_query("cobol", CONTEXT) is None
