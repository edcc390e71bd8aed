"""The text of one open document, and LSP positions <-> string offsets in the negotiated encoding.

LSP positions are (line, character) where `character` counts code units of the position encoding the client and
server agreed on: UTF-16 (the default, what JavaScript editors count), UTF-8 (bytes) or UTF-32 (code points). Python
strings index code points, so every position the server receives is converted here, in one place, and the rest of
the server works with plain `str` offsets. Lines end at "\\n", "\\r\\n" or "\\r" (and nothing else, unlike
`str.splitlines`), as the specification says.

Bad input never corrupts the text: a range that starts past the end of the document raises `PositionError`; a
character past the end of its line means the end of the line (the specification's rule); a position inside a
multi-unit character (half a surrogate pair, the middle of a UTF-8 sequence) snaps to the start of that character.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass

ENCODINGS = ("utf-16", "utf-8", "utf-32")
_EOL = re.compile(r"\r\n|\r|\n")

Position = tuple[int, int]  # (line, character), character in code units of the document's encoding
Range = tuple[Position, Position]


class PositionError(ValueError):
    """A position or range the document cannot contain (negative, past the last line, end before start)."""


@dataclass(frozen=True)
class TextChange:
    """What one edit did, in both the `str` offsets the server uses and the UTF-8 bytes tree-sitter uses.

    `new_text` is what was inserted; `[start, old_end)` of the old text became `[start, new_end)` of the new one.
    """

    start: int
    old_end: int
    new_end: int
    start_byte: int
    old_end_byte: int
    new_end_byte: int
    new_text: str


def utf8_len(s: str) -> int:
    """Bytes of `s` in UTF-8 (lone surrogates, which JSON can carry, count as their 3-byte encoding)."""
    return len(s) if s.isascii() else len(s.encode("utf-8", "surrogatepass"))


def _units(ch: str, encoding: str) -> int:
    """Code units one code point takes in the encoding."""
    if encoding == "utf-16":
        return 2 if ord(ch) > 0xFFFF else 1
    if encoding == "utf-8":
        o = ord(ch)
        return 1 if o < 0x80 else 2 if o < 0x800 else 3 if o < 0x10000 else 4
    return 1


def units_len(s: str, encoding: str) -> int:
    """Length of `s` in code units of the encoding."""
    if s.isascii() or encoding == "utf-32":
        return len(s)
    if encoding == "utf-8":
        return utf8_len(s)
    return len(s) + sum(1 for ch in s if ord(ch) > 0xFFFF)


def column_to_index(line: str, character: int, encoding: str) -> int:
    """Index into `line` (no line ending) of a character offset in code units: clamped to the line's end, and
    snapped back to the start of a character when it points inside one."""
    if character < 0:
        raise PositionError(f"negative character {character}")
    if line.isascii() or encoding == "utf-32":
        return min(character, len(line))
    units = 0
    for i, ch in enumerate(line):
        if units >= character:
            return i
        units += _units(ch, encoding)
        if units > character:  # inside a multi-unit character: snap to its start
            return i
    return len(line)


class DocumentText:
    """The text of one open document, kept as `str`, with its line starts kept current edit by edit.

    `apply_change` takes LSP ranges; `offset_at`/`position_at` convert between positions and `str` offsets. (Not
    pygls' `TextDocument`: the server keeps its own copy and bypasses pygls' workspace, server/protocol.py.)
    """

    def __init__(self, text: str, *, version: int = 0, encoding: str = "utf-16", language_id: str | None = None):
        if encoding not in ENCODINGS:
            raise ValueError(f"unknown position encoding {encoding!r}; expected one of {', '.join(ENCODINGS)}")
        self.encoding = encoding
        self.version = version
        self.language_id = language_id
        self.text = text
        self._line_starts = [0] + [m.end() for m in _EOL.finditer(text)]
        # Counts the edits applied: unlike `version` (the client's number, which may repeat or go back) it moves with
        # every change of the text, so "the text changed since" is one comparison.
        self.revision = 0

    # -- lines -------------------------------------------------------------------------------------------------------

    @property
    def line_count(self) -> int:
        """Lines in the document; text ending in a line break has an empty last line."""
        return len(self._line_starts)

    def line_start(self, line: int) -> int:
        """Offset of the first character of a line."""
        self._check_line(line)
        return self._line_starts[line]

    def line_end(self, line: int) -> int:
        """Offset just past the last character of a line, before its line break."""
        self._check_line(line)
        if line + 1 == len(self._line_starts):
            return len(self.text)
        end = self._line_starts[line + 1] - 1
        if self.text[end] == "\n" and end > self._line_starts[line] and self.text[end - 1] == "\r":
            end -= 1
        return end

    def line_text(self, line: int) -> str:
        """The text of a line without its line break."""
        return self.text[self.line_start(line) : self.line_end(line)]

    def line_of(self, offset: int) -> int:
        """The line that contains a `str` offset (an offset inside a line break belongs to the line it ends)."""
        if not 0 <= offset <= len(self.text):
            raise PositionError(f"offset {offset} outside the document (length {len(self.text)})")
        return bisect_right(self._line_starts, offset) - 1

    def _check_line(self, line: int) -> None:
        if not 0 <= line < len(self._line_starts):
            raise PositionError(f"line {line} outside the document ({len(self._line_starts)} lines)")

    # -- positions ---------------------------------------------------------------------------------------------------

    def offset_at(self, line: int, character: int) -> int:
        """The `str` offset of an LSP position. A character past the line's end means the line's end; a position
        on the line just past the last one, at character 0, is the end of the document (clients send it)."""
        if line < 0 or character < 0:
            raise PositionError(f"negative position ({line}, {character})")
        if line >= len(self._line_starts):
            if line == len(self._line_starts) and character == 0:
                return len(self.text)
            raise PositionError(f"position ({line}, {character}) is past the end ({len(self._line_starts)} lines)")
        start = self._line_starts[line]
        return start + column_to_index(self.text[start : self.line_end(line)], character, self.encoding)

    def position_at(self, offset: int) -> Position:
        """The LSP position of a `str` offset; an offset inside a "\\r\\n" maps to the end of its line."""
        line = self.line_of(offset)
        start = self._line_starts[line]
        offset = min(offset, self.line_end(line))
        return line, units_len(self.text[start:offset], self.encoding)

    def byte_offset(self, offset: int) -> int:
        """UTF-8 byte offset of a `str` offset (what tree-sitter counts)."""
        return utf8_len(self.text[:offset])

    # -- edits -------------------------------------------------------------------------------------------------------

    def apply_change(self, range: Range | None, new_text: str, version: int | None = None) -> TextChange:
        """Apply one `didChange` content change: replace `range` (None: the whole document) by `new_text`.

        Raises PositionError (and leaves the text untouched) when the range starts past the end of the document
        or ends before it starts; an end past the end of the document is clamped to the end.
        """
        if range is None:
            start, old_end = 0, len(self.text)
        else:
            (sl, sc), (el, ec) = range
            start = self.offset_at(sl, sc)
            if el < 0 or ec < 0:
                raise PositionError(f"negative range end ({el}, {ec})")
            old_end = self.offset_at(el, ec) if el < len(self._line_starts) else len(self.text)
            if old_end < start:
                raise PositionError(f"range end ({el}, {ec}) is before its start ({sl}, {sc})")
        old = self.text
        start_byte = utf8_len(old[:start])
        old_end_byte = start_byte + utf8_len(old[start:old_end])
        self.text = old[:start] + new_text + old[old_end:]
        new_end = start + len(new_text)
        self._splice_line_starts(start, old_end, new_end)
        self.revision += 1
        if version is not None:
            self.version = version
        return TextChange(start, old_end, new_end, start_byte, old_end_byte, start_byte + utf8_len(new_text), new_text)

    def _splice_line_starts(self, start: int, old_end: int, new_end: int) -> None:
        """Update the line starts after `[start, old_end)` became `[start, new_end)`.

        Whether offset q starts a line depends only on the characters at q-1 and q, so starts below `start` and
        starts above `old_end` (shifted) are unchanged; only `[start, new_end]` of the new text is scanned.
        """
        starts = self._line_starts
        keep_head = bisect_right(starts, start - 1)  # starts < start
        keep_tail = bisect_right(starts, old_end)  # starts > old_end
        delta = new_end - old_end
        lo, hi = max(start - 1, 0), min(new_end + 1, len(self.text))
        middle = [q for m in _EOL.finditer(self.text, lo, hi) if start <= (q := m.end()) <= new_end]
        self._line_starts = starts[:keep_head] + middle + [q + delta for q in starts[keep_tail:]]
        if not self._line_starts or self._line_starts[0] != 0:
            self._line_starts.insert(0, 0)
