"""Context for a completion from the document itself: imports above the window, headers of the enclosing
definitions the window cut off, and the nearest sibling definitions before it (queries/<name>.context.scm say what
is what).

Everything chosen here depends on the document outside the prefix/suffix window, so it stays the same while the
user types inside the window, and the engine's cached prompt stays valid.
"""

from __future__ import annotations

from dataclasses import dataclass

from tree_sitter import Node, QueryCursor

from waferline.syntax.languages import CONTEXT, load_query
from waferline.syntax.text import utf8_len
from waferline.syntax.tree import TreeSnapshot

SIBLING_BAND = 4096  # bytes before the window searched for sibling definitions


@dataclass(frozen=True)
class Snippet:
    """A piece of context the model sees before the prefix."""

    kind: str  # "imports", "scope" (headers of enclosing definitions cut off the prefix), "sibling"; the server adds
    # "recent_edit" (recently edited regions of other open documents) and "definition" (cross-file definitions)
    text: str
    path: str | None = None  # None: the document being completed; otherwise the path or uri it comes from
    start_line: int = 0


def select_context(
    text: str, snap: TreeSnapshot, root: Node, offset: int, b: int, prefix_start: int, suffix_end: int, room: int
) -> list[Snippet]:
    """Imports above the window, headers of the enclosing definitions it cut off, and the nearest sibling
    definitions outside it; in document order, within `room` characters."""
    lang = snap.language_id
    src = snap.source
    lo_byte, hi_byte = b - utf8_len(text[prefix_start:offset]), b + utf8_len(text[offset:suffix_end])
    budget = room
    out: list[Snippet] = []

    def node_text(node: Node, end_byte: int | None = None) -> str:
        return src[node.start_byte : node.end_byte if end_byte is None else end_byte].decode("utf-8", "replace")

    imports = load_query(lang, CONTEXT, ("import",))
    if imports is not None and lo_byte > 0:
        cursor = QueryCursor(imports)
        cursor.set_max_start_depth(1)
        cursor.set_byte_range(0, lo_byte)
        nodes = sorted((n for ns in cursor.captures(root).values() for n in ns), key=lambda n: n.start_byte)
        parts = [node_text(n).strip() for n in nodes if n.end_byte <= lo_byte]
        joined = "\n".join(parts)
        if parts and len(joined) <= budget:
            out.append(Snippet("imports", joined, start_line=nodes[0].start_point[0]))
            budget -= len(joined)
    definitions = load_query(lang, CONTEXT, ("definition",))
    if definitions is None:
        return out
    found: dict[int, Node] = {}
    # two small ranges instead of one big one: around the cursor (the enclosing definitions) and a band before the
    # window (the nearest siblings); a query only visits the nodes that overlap its range
    ranges = ((max(b - 1, 0), b + 1), (max(lo_byte - SIBLING_BAND, 0), lo_byte))
    for lo, hi in ranges:
        cursor = QueryCursor(definitions)
        cursor.set_byte_range(lo, hi)
        found.update((n.id, n) for ns in cursor.captures(root).values() for n in ns)
    defs = sorted(found.values(), key=lambda n: (n.start_byte, -n.end_byte))
    enclosing = [n for n in defs if n.start_byte < lo_byte and n.end_byte > b]
    for node in enclosing:  # headers of definitions the window cut the start off, outermost first
        header = node_text(node, _body_start(node, src)).rstrip()
        if len(header) <= budget:
            out.append(Snippet("scope", header, start_line=node.start_point[0]))
            budget -= len(header)
    outermost: list[Node] = []  # definitions outside the window that no other one outside it contains
    for node in defs:
        if (node.end_byte <= lo_byte or node.start_byte >= hi_byte) and (
            not outermost or node.end_byte > outermost[-1].end_byte
        ):
            outermost.append(node)
    # Only siblings before the window: the code after the cursor re-parses differently while the line being typed
    # is incomplete (an open bracket swallows what follows), and the context must not flicker with it; the suffix
    # shows what follows anyway.
    before = [n for n in outermost if n.end_byte <= lo_byte][-3:]
    siblings: list[Snippet] = []
    for node in reversed(before):  # nearest first, so the budget goes to them
        whole = node_text(node)
        piece = whole if len(whole) <= budget // 2 else node_text(node, _body_start(node, src)).rstrip()
        if piece and len(piece) <= budget:
            siblings.append(Snippet("sibling", piece, start_line=node.start_point[0]))
            budget -= len(piece)
    out += sorted(siblings, key=lambda s: s.start_line)
    return out


def _body_start(node: Node, source: bytes) -> int:
    """Where a definition's body starts (its header ends), or the end of its first line."""
    inner = node.child_by_field_name("definition") or node  # Python's decorated_definition
    body = inner.child_by_field_name("body")
    if body is not None:
        return body.start_byte
    end = source.find(b"\n", node.start_byte, node.end_byte)
    return node.end_byte if end < 0 else end
