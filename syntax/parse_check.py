"""Parse checks: does a text put into a document add a syntax error? Two callers, two ways of asking.

`ParseCheck` (finish_completion, on every model suggestion): the errors of the document with a completion applied,
for cut points tried longest first, so it must be fast:
- the whole document, re-parsed incrementally from a copy of its tree (any language);
- for Python, only the whole statements around the cursor, parsed on their own. tree-sitter-python re-parses
  everything after an edit at the end of a block (its indentation scanner's state blocks subtree reuse): ~8 ms on a
  2,000-line file, where a region of a few statements takes well under a millisecond. Python parses indented
  statements on their own, so a method or a nested block is a valid region.
Errors are reported in document bytes either way.

`new_syntax_error` (the last check before a code action's edit goes out): the document with the edit applied may not
gain a syntax error. Errors are compared by place: none may touch the new text, and the rest of the document may not
have more than it had outside the replaced span. The whole document is parsed (on a helper thread), not a region: an
edit that closes a bracket or a block can change how everything after it parses.
"""

from __future__ import annotations

from functools import cached_property

from tree_sitter import Node

from waferline.syntax.languages import parser_for
from waferline.syntax.text import utf8_len
from waferline.syntax.tree import SyntaxError_, TreeSnapshot, collect_errors, first_child_after

REGION_MAX_BYTES = 16384  # a region bigger than this is narrowed to the block around the cursor, or not used


class ParseCheck:
    """Errors of the document, and of the document with one span replaced, for one cursor."""

    def __init__(self, snap: TreeSnapshot, cursor_byte: int, line_end_byte: int, *, whole: bool = False):
        """`whole`: parse the whole document even for Python (an edit the region cannot judge)."""
        self.snap = snap
        python = snap.language_id == "python" and not whole
        self.region = _python_region(snap, cursor_byte, line_end_byte) if python else None

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
        shift = self.region[0]
        errors = parse_errors(self.snap.language_id, region)
        return [SyntaxError_(e.start_byte + shift, e.end_byte + shift, e.missing) for e in errors]


def parse_errors(language_id: str, source: bytes) -> list[SyntaxError_]:
    """The syntax errors of `source` parsed from scratch."""
    parser = parser_for(language_id)
    assert parser is not None, f"no parser for {language_id}"
    return collect_errors(parser.parse(source).root_node, source)


def _touches(e: SyntaxError_, lo: int, hi: int) -> bool:
    if e.start_byte == e.end_byte:  # a zero-width MISSING token
        return lo <= e.start_byte <= hi
    return e.start_byte < hi and e.end_byte > lo


def new_syntax_error(language_id: str, text: str, start: int, end: int, new_text: str) -> str | None:
    """Why replacing text[start:end] with `new_text` is refused (the line of the syntax error it would leave), or
    None when the result has no syntax error the document did not already have elsewhere."""
    old_source = text.encode("utf-8", "surrogatepass")
    new_source = (text[:start] + new_text + text[end:]).encode("utf-8", "surrogatepass")
    lo = utf8_len(text[:start])
    old_hi, new_hi = lo + utf8_len(text[start:end]), lo + utf8_len(new_text)
    after = parse_errors(language_id, new_source)
    inside = [e for e in after if _touches(e, lo, new_hi)]
    if inside:
        line = new_source.count(b"\n", 0, inside[0].start_byte) + 1
        return f"the result would leave a syntax error at line {line}"
    before_outside = sum(1 for e in parse_errors(language_id, old_source) if not _touches(e, lo, old_hi))
    if len(after) > before_outside:
        first = after[0]
        line = new_source.count(b"\n", 0, first.start_byte) + 1
        return f"the result would add a syntax error at line {line}"
    return None


def _python_region(snap: TreeSnapshot, cursor: int, line_end: int) -> tuple[int, int] | None:
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
