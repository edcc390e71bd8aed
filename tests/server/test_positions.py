"""LSP positions and incremental edits over arbitrary Unicode: TextDocument against a plain reference model; and
the layer that reads positions and offsets from a client's params (server/params.py)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

from waferline.server import params
from waferline.server.document import Document
from waferline.server.text import ENCODINGS, PositionError, TextDocument

_EOL = re.compile(r"\r\n|\r|\n")


def reference_lines(text: str) -> list[tuple[int, int]]:
    """[start, end) of every line without its break, computed from scratch."""
    spans, start = [], 0
    for m in _EOL.finditer(text):
        spans.append((start, m.start()))
        start = m.end()
    spans.append((start, len(text)))
    return spans


def units(s: str, encoding: str) -> int:
    """Code units through the codecs themselves, independent of the implementation."""
    if encoding == "utf-16":
        return len(s.encode("utf-16-le", "surrogatepass")) // 2
    if encoding == "utf-8":
        return len(s.encode("utf-8", "surrogatepass"))
    return len(s)


def reference_position(text: str, offset: int, encoding: str) -> tuple[int, int]:
    """An offset inside a line break belongs to the line it ends."""
    lines = reference_lines(text)
    for line, (start, end) in enumerate(lines):
        next_start = lines[line + 1][0] if line + 1 < len(lines) else len(text) + 1
        if offset < next_start:
            return line, units(text[start : min(offset, end)], encoding)
    raise AssertionError(f"offset {offset} past the end")


# Documents mixing ASCII, 2- and 3-byte characters, astral characters (surrogate pairs in UTF-16) and every line
# break the specification names.
chars = st.sampled_from(["a", "b", " ", "é", "ß", "中", "€", "😀", "𝄞", "🇫", "\n", "\r", "\r\n", "\t", "("])
documents = st.lists(chars, max_size=40).map("".join)


def is_boundary(text: str, offset: int) -> bool:
    """Not between the \\r and \\n of one line break (such an offset has no position of its own)."""
    return not (0 < offset < len(text) and text[offset - 1] == "\r" and text[offset] == "\n")


@settings(max_examples=300, deadline=None)
@given(documents, st.data(), st.sampled_from(ENCODINGS))
def test_position_round_trip(text: str, data: st.DataObject, encoding: str) -> None:
    doc = TextDocument(text, encoding=encoding)
    assert doc.line_count == len(reference_lines(text))
    offset = data.draw(st.integers(0, len(text)).filter(lambda o: is_boundary(text, o)))
    position = doc.position_at(offset)
    assert position == reference_position(text, offset, encoding)
    assert doc.offset_at(*position) == offset


@settings(max_examples=300, deadline=None)
@given(documents, st.lists(st.tuples(st.integers(0, 60), st.integers(0, 60), documents), max_size=6),
       st.sampled_from(ENCODINGS))  # fmt: skip
def test_edits_in_any_encoding_equal_string_splicing(text: str, edits: list, encoding: str) -> None:
    doc = TextDocument(text, encoding=encoding)
    expected = text
    for a, b, new in edits:
        start, end = sorted((min(a, len(expected)), min(b, len(expected))))
        if not (is_boundary(expected, start) and is_boundary(expected, end)):
            continue
        # the client's view: positions computed from the reference model, in the negotiated encoding
        rng = (reference_position(expected, start, encoding), reference_position(expected, end, encoding))
        change = doc.apply_change(rng, new)
        expected = expected[:start] + new + expected[end:]
        assert doc.text == expected
        assert (change.start, change.old_end, change.new_end) == (start, end, start + len(new))
        assert change.start_byte == len(expected[:start].encode())
        assert change.new_end_byte == change.start_byte + len(new.encode())
        fresh = TextDocument(expected, encoding=encoding)
        assert doc._line_starts == fresh._line_starts, "incremental line starts equal a fresh scan"
        for line in range(doc.line_count):
            assert doc.line_text(line) == fresh.line_text(line)


@pytest.mark.parametrize(
    ("encoding", "character", "expected"),
    [("utf-16", 1, 1), ("utf-16", 2, 1), ("utf-16", 3, 2), ("utf-8", 1, 1), ("utf-8", 3, 1), ("utf-8", 5, 2),
     ("utf-32", 2, 2)],
)  # fmt: skip
def test_inside_a_character_snaps_to_its_start(encoding: str, character: int, expected: int) -> None:
    # "a😀b": 😀 is 2 UTF-16 units and 4 UTF-8 bytes; positions inside it mean its start.
    doc = TextDocument("a😀b", encoding=encoding)
    assert doc.offset_at(0, character) == expected


def test_utf16_positions_count_surrogate_pairs() -> None:
    doc = TextDocument("x = '😀'\ny")
    assert doc.position_at(len("x = '😀")) == (0, 7)
    doc.apply_change(((0, 7), (0, 7)), "!")
    assert doc.text == "x = '😀!'\ny"


def test_character_past_line_end_means_line_end() -> None:
    doc = TextDocument("ab\r\ncd\rxy\n")
    assert doc.offset_at(0, 99) == 2
    assert doc.offset_at(1, 99) == 6
    assert [doc.line_text(i) for i in range(doc.line_count)] == ["ab", "cd", "xy", ""]
    doc.apply_change(((0, 50), (1, 0)), "-")  # joins the first two lines, replacing the \r\n
    assert doc.text == "ab-cd\rxy\n"


def test_bad_ranges_raise_and_leave_the_text_alone() -> None:
    doc = TextDocument("one\ntwo\n", version=3)
    for rng in [((5, 0), (5, 0)), ((3, 1), (3, 1)), ((1, 2), (0, 1)), ((-1, 0), (0, 0)), ((0, -2), (0, 0))]:
        with pytest.raises(PositionError):
            doc.apply_change(rng, "X")
        assert doc.text == "one\ntwo\n"
    doc.apply_change(((2, 0), (2, 0)), "three", version=4)  # the empty last line exists
    doc.apply_change(((2, 5), (9, 9)), "!")  # an end past the end of the document is clamped to it
    assert (doc.text, doc.version) == ("one\ntwo\nthree!", 4)
    doc.apply_change(((3, 0), (3, 0)), "?")  # (line count, 0) is the end of the document
    assert doc.text == "one\ntwo\nthree!?"


def test_full_replacement_and_unknown_encoding() -> None:
    doc = TextDocument("old")
    change = doc.apply_change(None, "new\ntext")
    assert (doc.text, doc.line_count, change.old_end) == ("new\ntext", 2, 3)
    with pytest.raises(ValueError, match="utf-7"):
        TextDocument("", encoding="utf-7")


def test_the_revision_counts_applied_edits_whatever_the_version_says() -> None:
    """ "Changed since" for a request is this count (docs/reliability.md, Text sync): versions may repeat."""
    doc = TextDocument("one\ntwo", version=1)
    doc.apply_change(((0, 0), (0, 0)), "zero\n", version=1)
    doc.apply_change(None, "new")
    with pytest.raises(PositionError):
        doc.apply_change(((9, 1), (9, 1)), "refused")
    assert (doc.text, doc.version, doc.revision) == ("new", 1, 2)


# -- reading a client's params (server/params.py) ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [{"line": -1, "character": 0}, {"line": 1.5, "character": 0}, {"line": 0}, {"line": True, "character": 0},
     {"line": 0, "character": "3"}, {"line": 2**31, "character": 0}, None, [0, 0], "0:0"],
)  # fmt: skip
def test_a_position_that_is_not_two_unsigned_integers_is_invalid_params(value: object) -> None:
    with pytest.raises(JsonRpcInvalidParams):
        params.position(value)


@pytest.mark.parametrize("value", [{"line": 1.5, "character": 0}, {"line": "3", "character": 0}, {"line": True}])
def test_typed_params_read_integers_strictly(value: dict) -> None:
    """pygls reads typed params with this converter: a non-integer line is refused, not truncated."""
    with pytest.raises(Exception, match="Position"):
        params.converter().structure({"character": 0, **value}, types.Position)
    caps = params.converter().structure({"configuration": True}, types.WorkspaceClientCapabilities)
    assert caps.configuration is True


def test_offsets_from_a_client_must_lie_in_the_document() -> None:
    doc = Document.open("file:///a.py", "python", "abc")
    assert params.span(doc, 1, 3) == (1, 3)
    for start, end in [(-1, 2), (0, 4), (2, 1), ("0", 1), (True, 2), (0, None)]:
        with pytest.raises(JsonRpcInvalidParams):
            params.span(doc, start, end)
    with pytest.raises(JsonRpcInvalidParams, match="past the end"):
        params.offset(doc, types.Position(line=5, character=0))


def test_consumers_read_lone_surrogates_as_replacement_characters() -> None:
    """The text stays as sent (positions, sha256); the snapshot and the syntax tree get U+FFFD, which has the
    same length in str offsets, UTF-16 units and UTF-8 bytes."""
    text = "x = '\ud800'\n"
    doc = Document.open("file:///a.py", "python", text)
    assert doc.text.text == text and doc.snapshot().text == "x = '\ufffd'\n"
    assert doc.syntax.source == "x = '\ufffd'\n".encode() and doc.syntax.root is not None
    doc.text.apply_change(((0, 6), (0, 6)), "\udc00")
    assert doc.readable_text == "x = '\ufffd\ufffd'\n" and len(doc.readable_text) == len(doc.text.text)
