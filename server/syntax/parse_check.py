"""The parse check of a completion: the syntax errors of the document with the completion applied.

Two ways, same answer for the question asked (does the completion add an error):
- the whole document, re-parsed incrementally from a copy of its tree (any language);
- for Python, only the whole statements around the cursor, parsed on their own. tree-sitter-python re-parses
  everything after an edit at the end of a block (its indentation scanner's state blocks subtree reuse): ~8 ms on a
  2,000-line file, where a region of a few statements takes well under a millisecond. Python parses indented
  statements on their own, so a method or a nested block is a valid region.
Errors are reported in document bytes either way.
"""

from __future__ import annotations

from functools import cached_property

from tree_sitter import Node

from waferline.server.syntax.languages import parser_for
from waferline.server.syntax.tree import Snapshot, SyntaxError_, collect_errors, first_child_after

REGION_MAX_BYTES = 16384  # a region bigger than this is narrowed to the block around the cursor, or not used


class ParseCheck:
    """Errors of the document, and of the document with one span replaced, for one cursor."""

    def __init__(self, snap: Snapshot, cursor_byte: int, line_end_byte: int):
        self.snap = snap
        self.region = _python_region(snap, cursor_byte, line_end_byte) if snap.language_id == "python" else None

    @cached_property
    def base(self) -> list[SyntaxError_]:
        if self.region is None:
            return self.snap.errors()
        start, end = self.region
        return self._parse_region(self.snap.source[start:end])

    def errors_with(self, start_byte: int, old_end_byte: int, new_bytes: bytes) -> list[SyntaxError_]:
        """Errors of the document with `[start_byte, old_end_byte)` replaced by `new_bytes`."""
        if self.region is None:
            src = self.snap.source
            new_source = src[:start_byte] + new_bytes + src[old_end_byte:]
            return collect_errors(self.snap.parse_with(start_byte, old_end_byte, new_bytes).root_node, new_source)
        start, end = self.region
        src = self.snap.source
        end = max(end, old_end_byte)
        return self._parse_region(src[start:start_byte] + new_bytes + src[old_end_byte:end])

    def _parse_region(self, region: bytes) -> list[SyntaxError_]:
        assert self.region is not None, "only a region check parses a region"
        parser = parser_for(self.snap.language_id)
        assert parser is not None, "a snapshot's language has a parser"
        shift = self.region[0]
        errors = collect_errors(parser.parse(region).root_node, region)
        return [SyntaxError_(e.start_byte + shift, e.end_byte + shift, e.missing) for e in errors]


def _python_region(snap: Snapshot, cursor: int, line_end: int) -> tuple[int, int] | None:
    """[start, end) bytes of the whole statements around the cursor (from their first line's start), narrowed into
    the body of a big definition; None when no small region holds the cursor (then the whole document is used)."""
    node = snap.tree.root_node
    while True:
        kids = _overlapping(node, max(cursor - 1, 0), line_end + 1)
        if not kids:
            return None
        start, end = kids[0].start_byte, kids[-1].end_byte
        if end - start <= REGION_MAX_BYTES:
            break
        body = _body(kids[0]) if len(kids) == 1 else None
        if body is None or body.start_byte >= cursor:
            return None
        node = body
    line_start = snap.source.rfind(b"\n", 0, min(start, cursor)) + 1  # whole lines, the cursor's included
    return line_start, max(end, line_end)


def _overlapping(node: Node, lo: int, hi: int) -> list[Node]:
    """Children of node overlapping [lo, hi]; when none does (a blank line), the ones on either side."""
    count = node.child_count
    first = first_child_after(node, lo)
    i = first
    kids: list[Node] = []
    while i < count and (child := node.child(i)) is not None and child.start_byte <= hi:
        kids.append(child)
        i += 1
    if kids:
        return kids
    around = (node.child(first - 1) if first > 0 else None, node.child(first) if first < count else None)
    return [k for k in around if k is not None]


def _body(node: Node) -> Node | None:
    if node.type == "decorated_definition":
        inner = node.child_by_field_name("definition")
        node = inner if inner is not None else node
    return node.child_by_field_name("body")
