"""Tag extraction per language on the polyglot fixture repository, and the text helpers behind search."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from waferline.server.repository.builder import make_record
from waferline.server.repository.discovery import file_language
from waferline.server.repository.tags import extract
from waferline.server.repository.terms import (
    clean_comment,
    clean_python_string,
    identifier_terms,
    match_expression,
    query_terms,
)
from waferline.syntax.languages import LANGUAGES, TAGS, load_query

REPO = Path(__file__).parent / "fixtures" / "repos" / "polyglot"


def tags_of(rel: str):
    language = file_language(rel)
    assert language is not None, rel
    return extract((REPO / rel).read_bytes(), language)


@pytest.mark.parametrize("language_id", sorted(LANGUAGES))
def test_every_query_compiles(language_id: str) -> None:
    assert load_query(language_id, TAGS) is not None


# (file, name, kind, container, a piece of the signature, a piece of the docstring)
DEFINITIONS = [
    ("shop/pricing.py", "apply_tax", "function", "", "def apply_tax(amount: float) -> float", "value-added tax"),
    ("shop/pricing.py", "add_item", "method", "Basket", "def add_item(self, name: str, price: float)", "one item"),
    ("shop/pricing.py", "Basket", "class", "", "class Basket", "basket of items"),
    ("shop/pricing.py", "TAX_RATE", "constant", "", "TAX_RATE = 0.2", ""),
    ("shop/pricing.py", "round_cents", "function", "", "def round_cents", "Round a price to whole cents."),
    ("web/cart.js", "formatPrice", "function", "", "export function formatPrice(cents)", "as euros for display"),
    ("web/cart.js", "render", "method", "CartView", "render(items)", ""),
    ("web/api.ts", "Product", "interface", "", "export interface Product", "catalogue API returns"),
    ("web/api.ts", "fetchProduct", "function", "", "fetchProduct(id: number): Promise<Product>", "by its id"),
    ("inventory/stock.go", "Stock", "struct", "", "type Stock struct", "units of each product"),
    ("inventory/stock.go", "Reserve", "method", "Stock", "func (s *Stock) Reserve(product string, n int)", "too few"),
    ("ledger/src/lib.rs", "split_evenly", "function", "", "pub fn split_evenly(total: u64", "nearly equal shares"),
    ("ledger/src/lib.rs", "record", "method", "Ledger", "pub fn record(&mut self, cents: i64)", "one entry"),
    ("scripts/greet.lua", "greet", "function", "M", "function M.greet(name)", "Greets a customer"),
    ("native/checksum.c", "adler32", "function", "", "unsigned long adler32(const unsigned char *data", "Adler-32"),
    ("native/matrix.cpp", "Matrix", "class", "", "class Matrix", "row-major matrix"),
    ("native/matrix.cpp", "transpose", "method", "Matrix", "Matrix transpose() const", "transposed matrix"),
    ("android/src/com/example/Receipt.java", "printLine", "method", "Receipt", "public String printLine(", "one line"),
]  # fmt: skip


@pytest.mark.parametrize(("rel", "name", "kind", "container", "signature", "doc"), DEFINITIONS)
def test_definition_found_with_signature_and_doc(
    rel: str, name: str, kind: str, container: str, signature: str, doc: str
) -> None:
    found = [d for d in tags_of(rel).definitions if d.name == name]
    assert found, f"{name} not found in {rel}"
    d = found[0]
    assert (d.kind, d.container) == (kind, container)
    assert signature in d.signature
    assert doc in d.doc if doc else d.doc == ""


# (file, name, kind, enclosing definition's name or None)
REFERENCES = [
    ("shop/checkout.py", "round_cents", "call", "checkout"),
    ("shop/checkout.py", "apply_tax", "import", None),
    ("shop/checkout.py", "add_item", "call", "checkout"),
    ("shop/pricing.py", "apply_tax", "call", "total"),
    ("web/cart.js", "formatPrice", "call", "render"),
    ("web/api.ts", "Product", "type", "fetchProduct"),
    ("inventory/stock.go", "Errorf", "call", "Reserve"),
    ("ledger/src/lib.rs", "push", "call", "record"),
    ("scripts/greet.lua", "greet", "call", "greet_all"),
    ("android/src/com/example/Receipt.java", "formatCents", "call", "printLine"),
]


@pytest.mark.parametrize(("rel", "name", "kind", "enclosing"), REFERENCES)
def test_reference_found_with_enclosing_definition(rel: str, name: str, kind: str, enclosing: str | None) -> None:
    tags = tags_of(rel)
    found = [r for r in tags.references if r.name == name and r.kind == kind]
    assert found, f"no {kind} reference to {name} in {rel}: {tags.references}"
    names = {None if r.enclosing < 0 else tags.definitions[r.enclosing].name for r in found}
    assert enclosing in names


def test_definition_names_are_not_references() -> None:
    tags = tags_of("native/matrix.cpp")
    name_starts = {d.name_range[0] for d in tags.definitions}
    assert not [r for r in tags.references if r.range[0] in name_starts]


def test_local_declaration_in_cpp_is_not_a_function() -> None:
    names = [d.name for d in tags_of("native/matrix.cpp").definitions]
    assert "out" not in names, names


def test_nesting_and_parents() -> None:
    tags = tags_of("shop/pricing.py")
    by_name = {d.name: i for i, d in enumerate(tags.definitions)}
    assert tags.definitions[by_name["total"]].parent == by_name["Basket"]
    assert tags.definitions[by_name["apply_tax"]].parent == -1
    starts = [d.range[0] for d in tags.definitions]
    assert starts == sorted(starts)


def test_columns_are_utf16() -> None:
    source = 's = "é😀"; helper()\n'.encode()
    (ref,) = [r for r in extract(source, "python").references if r.name == "helper"]
    # 's = "' is 5 units, é is 1, 😀 is 2 (a surrogate pair), '"; ' is 3: helper starts at UTF-16 column 11.
    assert ref.range == ((0, 11), (0, 17))


def test_broken_source_still_yields_what_parses() -> None:
    source = b"def good(a):\n    return a\n\ndef broken(:\n    pass\n"
    names = [d.name for d in extract(source, "python").definitions]
    assert "good" in names


def test_unknown_language_gives_nothing() -> None:
    tags = extract(b"# Title\n", "markdown")
    assert tags.definitions == [] and tags.references == []


def test_clean_comment_markers() -> None:
    assert clean_comment(["/**", " * Fetch one.", " * Then stop.", " */"]) == "Fetch one.\nThen stop."
    assert clean_comment(["/// Splits a total."]) == "Splits a total."
    assert clean_comment(["-- Greets."]) == "Greets."
    assert clean_comment(["# Round it."]) == "Round it."
    assert clean_comment(["/* Adler-32 checksum. */"]) == "Adler-32 checksum."


def test_clean_python_string() -> None:
    assert clean_python_string('"""Add tax.\n\n    Details.\n    """') == "Add tax.\n\nDetails."
    assert clean_python_string("r'raw'") == "raw"


def test_identifier_terms_split_case_styles() -> None:
    assert identifier_terms("parseConfig") == ("parse", "config", "parseconfig")
    assert identifier_terms("parse_config") == ("parse", "config", "parseconfig")
    assert identifier_terms("HTTPServer") == ("http", "server", "httpserver")
    assert identifier_terms("x") == ("x",)


def test_query_terms_drop_stop_words_and_quote() -> None:
    assert query_terms("Where is apply_tax used?") == ["applytax", "apply", "tax"]
    assert match_expression("how does it work?") is None
    assert match_expression('say "OR" NEAR(x)') == '"say" OR "near"'


@settings(max_examples=60, deadline=None)
@given(text=st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=200))
def test_any_editor_text_extracts_within_bounds(text: str) -> None:
    """Whatever an editor sends, extraction answers, and every range lies inside the text (UTF-16 columns)."""
    source = "def f(a):\n    return g(a)\n" + text + "\nclass K:\n    x = h()\n"
    lines = source.split("\n")
    widths = [len(line.encode("utf-16-le")) // 2 for line in lines]
    tags = extract(source.encode(), "python")
    spans = [d.range for d in tags.definitions] + [d.name_range for d in tags.definitions]
    for (l1, c1), (l2, c2) in spans + [r.range for r in tags.references]:
        assert 0 <= l1 <= l2 < len(lines)
        assert c1 <= widths[l1] and c2 <= widths[l2]


def test_form_feeds_do_not_shift_lines() -> None:
    source = b"def a():\n    pass\n\x0c\ndef b():\n    '''Bee.'''\n"
    record = make_record("m.py", source)
    (b,) = [d for d in record.tags.definitions if d.name == "b"]
    assert b.range[0][0] == 3
    (doc,) = [d for d in record.documents if d.definition >= 0 and record.tags.definitions[d.definition].name == "b"]
    assert doc.body.startswith("def b():")
