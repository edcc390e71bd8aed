"""Definitions and references of one file, found with the tree-sitter tag queries (syntax/queries/<name>.tags.scm).

A query file names what to find (capture conventions are written at the top of python.tags.scm); this module adds
what a query cannot say: which definition encloses each reference, which functions are methods, the signature
(the definition's text up to its body), and the docstring or leading comment.

Positions are zero-based (line, column) with columns in UTF-16 code units, the unit LSP uses by default, so that
the server can hand them to an editor unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from tree_sitter import Node, QueryCursor

from waferline.server.repository.terms import clean_comment, clean_python_string
from waferline.syntax.languages import TAGS, load_query, parser_for

Point = tuple[int, int]  # (line, UTF-16 column), zero-based
Range = tuple[Point, Point]

# A function defined directly inside one of these is a method of it.
CLASS_KINDS = frozenset({"class", "struct", "interface", "enum", "scope"})
# When one node matches several patterns the more specific kind wins over these catch-alls.
WEAK_KINDS = frozenset({"variable", "type"})
# Nodes that wrap a definition without naming it: its leading comment sits before the wrapper.
WRAPPERS = frozenset(
    {
        "decorated_definition",
        "export_statement",
        "template_declaration",
        "lexical_declaration",
        "variable_declaration",
        "expression_statement",
        "type_declaration",
        "const_declaration",
        "var_declaration",
    }
)
# Wrappers whose text belongs in the signature even when they hold several children (decorators, templates).
SIGNATURE_WRAPPERS = frozenset({"decorated_definition", "template_declaration", "export_statement"})
COMMENT_TYPES = frozenset({"comment", "line_comment", "block_comment"})
SKIPPED_BEFORE_DEFINITION = frozenset({"attribute_item", "decorator", "annotation", "marker_annotation"})
MAX_SIGNATURE_LINES = 8


class DefTag(NamedTuple):
    """A definition in one file. `parent` indexes the enclosing definition in the same FileTags (-1: top level).

    NamedTuples rather than dataclasses: a large build makes hundreds of thousands, and they cross process pipes.
    """

    name: str
    kind: str
    range: Range
    name_range: Range
    signature: str
    doc: str
    container: str
    parent: int
    head_line: int  # first line of the definition with its leading comment, decorators and wrappers


class RefTag(NamedTuple):
    """A use of a name. `enclosing` indexes the innermost definition that contains it (-1: top level)."""

    name: str
    kind: str
    range: Range
    enclosing: int


@dataclass(frozen=True, slots=True)
class FileTags:
    definitions: list[DefTag]
    references: list[RefTag]


class _Columns:
    """Converts tree-sitter byte columns to UTF-16 columns; free for ASCII files, per line otherwise."""

    def __init__(self, source: bytes) -> None:
        self.lines = None if source.isascii() else source.split(b"\n")

    def point(self, point: tuple[int, int]) -> Point:
        row, col = point
        if self.lines is None or col == 0 or row >= len(self.lines):
            return (row, col)
        prefix = self.lines[row][:col]
        if prefix.isascii():
            return (row, col)
        return (row, len(prefix.decode("utf-8", "replace").encode("utf-16-le")) // 2)

    def range(self, node: Node) -> Range:
        return (self.point(node.start_point), self.point(node.end_point))


@dataclass(slots=True)
class _RawDef:
    node: Node
    name_node: Node
    kind: str
    receiver: str


def extract(source: bytes, language_id: str) -> FileTags:
    """Parse `source` and return its definitions (in document order) and references."""
    query = load_query(language_id, TAGS)
    parser = parser_for(language_id)
    if query is None or parser is None:
        return FileTags([], [])
    tree = parser.parse(source)
    defs: dict[tuple[int, int], _RawDef] = {}
    refs: dict[int, tuple[Node, str]] = {}
    for _, captures in QueryCursor(query).matches(tree.root_node):
        for capture, nodes in captures.items():
            if capture.startswith("definition.") or capture == "scope":
                kind = "scope" if capture == "scope" else capture.split(".", 1)[1]
                receiver = captures.get("receiver")
                raw = _RawDef(nodes[0], captures["name"][0], kind, _text(receiver[0]) if receiver else "")
                key = (raw.node.start_byte, raw.node.end_byte)
                old = defs.get(key)
                if old is None or (old.kind in WEAK_KINDS and kind not in WEAK_KINDS):
                    defs[key] = raw
            elif capture.startswith("reference."):
                refs.setdefault(nodes[0].start_byte, (nodes[0], capture.split(".", 1)[1]))
    return _assemble(source, language_id, list(defs.values()), refs)


def _assemble(source: bytes, language_id: str, raw: list[_RawDef], refs: dict[int, tuple[Node, str]]) -> FileTags:
    raw.sort(key=lambda d: (d.node.start_byte, -d.node.end_byte))
    parents = _nesting([(d.node.start_byte, d.node.end_byte) for d in raw])
    # Scopes (Rust impl blocks) name a container but are not definitions: map each index past them.
    kept = [i for i, d in enumerate(raw) if d.kind != "scope"]
    new_index = {old: new for new, old in enumerate(kept)}

    def visible(i: int) -> int:
        while i >= 0 and raw[i].kind == "scope":
            i = parents[i]
        return new_index.get(i, -1)

    columns = _Columns(source)
    names = [_text(d.name_node) for d in raw]
    definitions = []
    for i in kept:
        d, parent = raw[i], parents[i]
        kind = d.kind
        if kind == "function" and parent >= 0 and raw[parent].kind in CLASS_KINDS:
            kind = "method"
        elif kind == "variable" and len(names[i]) > 1 and names[i].isupper():
            kind = "constant"
        chain = []
        while parent >= 0:
            chain.append(names[parent])
            parent = parents[parent]
        container = d.receiver or ".".join(reversed(chain))
        doc, head_line = docstring(d.node, language_id)
        definitions.append(
            DefTag(
                name=names[i],
                kind=kind,
                range=columns.range(d.node),
                name_range=columns.range(d.name_node),
                signature=signature(d.node, source),
                doc=doc,
                container=container,
                parent=visible(parents[i]),
                head_line=head_line,
            )
        )
    def_names = {d.name_node.start_byte for d in raw if d.kind != "scope"}
    ref_items = sorted((start, node, kind) for start, (node, kind) in refs.items() if start not in def_names)
    enclosing = _enclosing([(d.node.start_byte, d.node.end_byte) for d in raw], [r[0] for r in ref_items])
    references = [
        RefTag(_text(node), kind, columns.range(node), visible(enc))
        for (_, node, kind), enc in zip(ref_items, enclosing, strict=True)
    ]
    return FileTags(definitions, references)


def _nesting(spans: list[tuple[int, int]]) -> list[int]:
    """For spans sorted by (start, -end) that nest like a tree, the index of each one's innermost container."""
    parents: list[int] = []
    stack: list[int] = []
    for start, end in spans:
        while stack and spans[stack[-1]][1] <= start:
            stack.pop()
        if stack and spans[stack[-1]][1] < end:  # overlap without nesting: treat as a sibling
            stack.clear()
        parents.append(stack[-1] if stack else -1)
        stack.append(len(parents) - 1)
    return parents


def _enclosing(spans: list[tuple[int, int]], positions: list[int]) -> list[int]:
    """For sorted byte positions, the innermost span (sorted by (start, -end)) containing each one, or -1."""
    out: list[int] = []
    stack: list[int] = []
    j = 0
    for pos in positions:
        while j < len(spans) and spans[j][0] <= pos:
            while stack and spans[stack[-1]][1] <= spans[j][0]:
                stack.pop()
            stack.append(j)
            j += 1
        while stack and spans[stack[-1]][1] <= pos:
            stack.pop()
        out.append(stack[-1] if stack else -1)
    return out


def _text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "replace")


def _anchor(node: Node) -> tuple[Node, int]:
    """The outermost wrapper of a definition (where its comment sits) and the byte where its signature starts."""
    anchor, sig_start = node, node.start_byte
    while anchor.parent is not None and anchor.parent.type in WRAPPERS:
        anchor = anchor.parent
        if anchor.type in SIGNATURE_WRAPPERS or anchor.named_child_count == 1:
            sig_start = anchor.start_byte
    return anchor, sig_start


def signature(node: Node, source: bytes) -> str:
    """The definition's text up to its body (`def f(a) -> int`), or its first line when it has no body."""
    _, start = _anchor(node)
    body = node.child_by_field_name("body")
    value = node.child_by_field_name("value")
    if body is None and value is not None:
        body = value.child_by_field_name("body")
    if body is not None and body.start_byte > start:
        text = source[start : body.start_byte].decode("utf-8", "replace")
    else:
        first_line_end = source.find(b"\n", node.start_byte)
        end = node.end_byte if first_line_end < 0 else min(node.end_byte, first_line_end)
        text = source[start:end].decode("utf-8", "replace")
    lines = [line.rstrip() for line in text.strip().splitlines()]
    if len(lines) > MAX_SIGNATURE_LINES:
        lines = [*lines[:MAX_SIGNATURE_LINES], "…"]
    joined = "\n".join(lines).rstrip()
    return joined.removesuffix(";").removesuffix("{").removesuffix(":").rstrip() if joined else ""


def docstring(node: Node, language_id: str) -> tuple[str, int]:
    """A Python docstring, or else the comment lines directly above the definition (or its decorators); and the
    first line of the definition counting that comment, its decorators and wrappers."""
    anchor, _ = _anchor(node)
    lines: list[str] = []
    top_row = anchor.start_point[0]
    sibling = anchor.prev_sibling
    while sibling is not None and sibling.type in SKIPPED_BEFORE_DEFINITION:
        top_row, sibling = sibling.start_point[0], sibling.prev_sibling
    while sibling is not None and sibling.type in COMMENT_TYPES and sibling.end_point[0] + 1 >= top_row:
        before = sibling.prev_sibling
        if before is not None and before.end_point[0] == sibling.start_point[0]:
            break  # a trailing comment of the code on the line before, not a description of this definition
        lines.insert(0, _text(sibling))
        top_row, sibling = sibling.start_point[0], before
    if language_id == "python":
        body = node.child_by_field_name("body")
        first = body.named_children[0] if body is not None and body.named_child_count else None
        if first is not None and first.type == "expression_statement" and first.named_child_count:
            literal = first.named_children[0]
            if literal.type == "string":
                return clean_python_string(_text(literal)), top_row
    return (clean_comment(lines) if lines else ""), top_row
