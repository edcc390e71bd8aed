"""Hover's deterministic part (describe_symbol, render_hover_markdown) and ask's evidence, on the fixture repository."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from waferline.server.repository.evidence import evidence_prompt, gather_evidence, render_evidence_markdown
from waferline.server.repository.index import IndexOptions, WorkspaceIndex
from waferline.server.repository.lookup import describe_symbol, inline_code, is_test_path, render_hover_markdown
from waferline.server.repository.terms import identifiers

FIXTURE = Path(__file__).parent / "fixtures" / "repos" / "polyglot"


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> tuple[WorkspaceIndex, Path]:
    root = (tmp_path_factory.mktemp("hover") / "polyglot").resolve()
    shutil.copytree(FIXTURE, root)
    index = WorkspaceIndex(root, persist=False, options=IndexOptions(use_git=False, workers=0))
    index.build()
    return index, root


def test_describe_symbol_from_another_file(indexed: tuple[WorkspaceIndex, Path]) -> None:
    index, root = indexed
    info = describe_symbol(index, "apply_tax", root / "shop" / "checkout.py")
    assert info is not None and info.definition is not None
    assert info.definition.path == root / "shop" / "pricing.py"
    assert (info.usage_count, info.usage_files) == (5, 3)
    assert not info.needs_summary
    sites = [(s.reference.path.relative_to(root).as_posix(), s.reference.kind) for s in info.call_sites]
    # Other files than the definition's and the reader's first, calls before imports, non-test before test.
    assert sites[0] == ("tests/check_pricing.py", "call")
    assert ("shop/checkout.py", "call") not in sites[:1]
    assert all(s.line for s in info.call_sites)
    assert len(info.call_sites) == 3


def test_render_hover_markdown_links_and_text(indexed: tuple[WorkspaceIndex, Path]) -> None:
    index, root = indexed
    info = describe_symbol(index, "apply_tax", root / "shop" / "checkout.py")
    assert info is not None
    text = render_hover_markdown(info, root)
    assert text.startswith("```python\ndef apply_tax(amount: float) -> float\n```")
    assert "Add value-added tax to an amount." in text
    pricing_uri = (root / "shop" / "pricing.py").as_uri()
    assert f"defined at [shop/pricing.py:20]({pricing_uri}#L20)" in text
    assert "Used 5 times in 3 files, for example:" in text
    assert "`return round_cents(apply_tax(amount))`" in text or "`assert apply_tax(10.0) == 12.0`" in text
    assert "Generated" not in text


def test_hover_without_docstring_marks_the_generated_summary(indexed: tuple[WorkspaceIndex, Path]) -> None:
    index, root = indexed
    info = describe_symbol(index, "checkout", root / "shop" / "checkout.py")
    assert info is not None and info.needs_summary
    plain = render_hover_markdown(info, root)
    assert "No uses of `checkout` found" in plain and "Generated" not in plain
    with_summary = render_hover_markdown(info, root, generated_summary="Totals a list of priced items.")
    assert "*Generated summary (not from the source):* Totals a list of priced items." in with_summary


def test_hover_prefers_the_definition_in_the_hovered_file(indexed: tuple[WorkspaceIndex, Path]) -> None:
    index, root = indexed
    # transpose is declared in the class and defined out of line: both in matrix.cpp, the declaration first.
    info = describe_symbol(index, "transpose", root / "native" / "matrix.cpp")
    assert info is not None and info.definition is not None
    assert info.definition.docstring == "Returns the transposed matrix."
    assert len(info.other_definitions) == 1
    assert "Also defined at [native/matrix.cpp:15]" in render_hover_markdown(info, root)


def test_unknown_name_and_used_only_name(indexed: tuple[WorkspaceIndex, Path]) -> None:
    index, root = indexed
    assert describe_symbol(index, "no_such_thing", root / "shop" / "checkout.py") is None
    info = describe_symbol(index, "fetch", root / "web" / "api.ts")  # a browser global: used, never defined
    assert info is not None and info.definition is None and info.usage_count == 1
    assert not info.needs_summary
    assert render_hover_markdown(info, root).startswith("Used once in 1 file")


def test_inline_code_and_test_paths() -> None:
    assert inline_code("a`b") == "``a`b``"
    assert inline_code("plain") == "`plain`"
    assert is_test_path(Path("/r/tests/check_pricing.py")) and is_test_path(Path("/r/pkg/stock_test.go"))
    assert not is_test_path(Path("/r/pkg/latest.py"))


def test_gather_evidence_for_a_named_symbol(indexed: tuple[WorkspaceIndex, Path]) -> None:
    index, root = indexed
    evidence = gather_evidence(index, "Where is `round_cents` used and what does it do?", k=5)
    assert evidence[0].kind == "definition" and evidence[0].title == "function round_cents"
    assert evidence[0].path == root / "shop" / "pricing.py"
    assert "Round a price to whole cents." in evidence[0].text
    usages = [e for e in evidence if e.kind == "usage"]
    assert usages and all(e.path == root / "shop" / "checkout.py" for e in usages)
    assert len(evidence) <= 5


def test_evidence_locations_come_from_the_index(indexed: tuple[WorkspaceIndex, Path]) -> None:
    index, _ = indexed
    for question in ("how are prices formatted for display?", "which code reserves stock", "Basket add_item total"):
        evidence = gather_evidence(index, question, k=6)
        assert evidence, question
        for e in evidence:
            known = {d.range for d in index.definitions_in_file(e.path)}
            named = identifiers(question)
            known |= {r.range for name in named for r in index.references(name) if r.path == e.path}
            known |= {h.range for h in index.search(question, 50) if h.path == e.path}
            assert e.range in known, (question, e)
    first = gather_evidence(index, "how are prices formatted as euros for display?", k=3)[0]
    assert (first.path.name, first.title) == ("cart.js", "function formatPrice")


def test_evidence_rendering(indexed: tuple[WorkspaceIndex, Path]) -> None:
    index, root = indexed
    evidence = gather_evidence(index, "Where is `apply_tax` defined?", k=3)
    markdown = render_evidence_markdown(evidence, root)
    assert markdown.startswith("1. function apply_tax — [shop/pricing.py:20](")
    assert "```python" in markdown
    prompt = evidence_prompt(evidence, root)
    assert prompt.startswith("[1] function apply_tax (shop/pricing.py:20)\ndef apply_tax(amount: float) -> float")
    assert render_evidence_markdown([], root) == "The index has nothing that matches this question."


def test_plain_words_that_name_many_things_are_not_taken_as_the_subject(
    indexed: tuple[WorkspaceIndex, Path],
) -> None:
    index, root = indexed
    for i in range(3):  # three definitions named `total`: too ambiguous for a plain word, fine when quoted
        index.update_file(root / "shop" / f"extra_{i}.py", "def total():\n    pass\n")
    try:
        plain = gather_evidence(index, "what is the total", k=4)
        assert not [e for e in plain if e.kind == "definition"]
        quoted = gather_evidence(index, "what is the `total`", k=4)
        assert quoted[0].kind == "definition" and quoted[0].title.endswith("total")
    finally:
        for i in range(3):
            index.remove_file(root / "shop" / f"extra_{i}.py")
