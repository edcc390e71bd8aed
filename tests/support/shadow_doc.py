"""The fuzzing client's own copy of a document, edited as LSP says and as docs/reliability.md says the server does.

Written apart from the server's syntax/text.py on purpose (a second reading of the same rules): lines end at
"\\r\\n", "\\r" or "\\n"; a character past a line's end is the line's end; a position inside a character of several
code units snaps to the character's start; `(line_count, 0)` is the end of the document; a range whose start is
not in the document, whose end is negative or before its start is refused; an end past the last line is the end
of the document. The changes of a `didChange` apply in order, each to the text the one before left; a change that is
refused puts the document out of sync: it and every later ranged change are skipped until a whole-text change (in
the same notification or a later one) sets the text and brings it back in sync; the version is the notification's
in every case.
A lone surrogate (one Python code point) is one UTF-16 unit, three UTF-8 bytes, one UTF-32 unit.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

_EOL = re.compile(r"\r\n|\r|\n")


def as_sent(text: str) -> str:
    """The text the server reads from our JSON: adjacent surrogates written apart become one pair in the JSON."""
    return json.loads(json.dumps(text, ensure_ascii=True))


def units(ch: str, encoding: str) -> int:
    o = ord(ch)
    if encoding == "utf-16":
        return 2 if o > 0xFFFF else 1
    if encoding == "utf-8":
        return 1 if o < 0x80 else 2 if o < 0x800 else 3 if o < 0x10000 else 4
    return 1


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class Refused(ValueError):
    """A position or range the server refuses."""


@dataclass
class ShadowDocument:
    uri: str
    text: str
    version: int
    encoding: str = "utf-16"
    in_sync: bool = True  # False once a change was refused, until a whole-text change

    def lines(self) -> list[tuple[int, int]]:
        """(start, end) offsets of each line without its line break."""
        out, start = [], 0
        for m in _EOL.finditer(self.text):
            out.append((start, m.start()))
            start = m.end()
        out.append((start, len(self.text)))
        return out

    @property
    def line_count(self) -> int:
        return len(self.lines())

    def line_units(self, line: int) -> int:
        start, end = self.lines()[line]
        return sum(units(ch, self.encoding) for ch in self.text[start:end])

    def offset(self, line: int, character: int) -> int:
        lines = self.lines()
        if line < 0 or character < 0:
            raise Refused(f"negative position ({line}, {character})")
        if line >= len(lines):
            if line == len(lines) and character == 0:
                return len(self.text)
            raise Refused(f"({line}, {character}) past the end")
        start, end = lines[line]
        count = 0
        for i in range(start, end):
            if count >= character:
                return i
            count += units(self.text[i], self.encoding)
            if count > character:
                return i
        return end

    def range_offsets(self, rng: Any) -> tuple[int, int]:
        (sl, sc), (el, ec) = position(rng["start"]), position(rng["end"])
        start = self.offset(sl, sc)
        if el < 0 or ec < 0:
            raise Refused("negative end")
        end = self.offset(el, ec) if el < self.line_count else len(self.text)
        if end < start:
            raise Refused("end before start")
        return start, end

    def apply(self, changes: list[dict[str, Any]], version: int) -> bool:
        """Apply one didChange's changes by the rule above; False when one of them is refused."""
        refused = False
        for change in changes:
            new = as_sent(change["text"])
            if "range" not in change:
                self.text, self.in_sync = new, True
                continue
            if not self.in_sync:
                continue
            try:
                s, e = self.range_offsets(change["range"])
            except Refused:
                refused, self.in_sync = True, False
                continue
            self.text = self.text[:s] + new + self.text[e:]
        self.version = version
        return not refused

    def inside(self, pos: Any) -> bool:
        """A position a shown range may use: on a line of the document, at most at its end."""
        line, character = position(pos)
        return 0 <= line < self.line_count and 0 <= character <= self.line_units(line)

    def state(self) -> dict[str, Any]:
        """What `waferline/document` should report."""
        return {
            "version": self.version,
            "length": len(self.text),
            "lines": self.line_count,
            "sha256": sha256(self.text),
            "inSync": self.in_sync,
        }


def position(pos: Any) -> tuple[int, int]:
    return pos["line"], pos["character"]
