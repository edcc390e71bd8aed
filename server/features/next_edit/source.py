"""One text and its tree as the candidates read them: `str` offsets (the server's) against UTF-8 bytes (tree-sitter's).

A candidate finds nodes by byte and proposes edits in `str` offsets; `Source` converts between the two once per
request (identity for ASCII text, the common case) and holds the small node helpers every candidate shares.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from tree_sitter import Node

from waferline.syntax.languages import parser_for

FUNCTION_TYPES = ("function_definition", "lambda")  # Python: the nodes that open a scope of their own
COMPREHENSION_TYPES = ("list_comprehension", "set_comprehension", "dictionary_comprehension", "generator_expression")
SCOPE_TYPES = (*FUNCTION_TYPES, "class_definition", *COMPREHENSION_TYPES)


@dataclass(frozen=True)
class Edit:
    """Replace `text[start:end]` with `new` (str offsets); `uri` None is the requesting document. An edit of another
    document carries what it was computed on: an open one's `version`, an unopened file's `digest` (SHA-256 of its
    bytes), checked again before the edit is offered (features/next_edit/elsewhere.py)."""

    start: int
    end: int
    new: str
    uri: str | None = None
    version: int | None = None
    digest: str | None = None


@dataclass
class Source:
    text: str
    root: Node
    data: bytes = b""
    _starts: list[int] = field(default_factory=list)  # byte offset of each character (non-ASCII texts only)

    @classmethod
    def parse(cls, text: str, language_id: str) -> Source | None:
        parser = parser_for(language_id)
        if parser is None:
            return None
        data = text.encode("utf-8", "surrogatepass")
        return cls(text, parser.parse(data).root_node, data)

    def __post_init__(self) -> None:
        if not self.data:
            self.data = self.text.encode("utf-8", "surrogatepass")
        if len(self.data) != len(self.text):
            pos, starts = 0, []
            for ch in self.text:
                starts.append(pos)
                pos += len(ch.encode("utf-8", "surrogatepass"))
            starts.append(pos)
            self._starts = starts

    def byte(self, offset: int) -> int:
        return self._starts[offset] if self._starts else offset

    def offset(self, byte: int) -> int:
        return bisect.bisect_left(self._starts, byte) if self._starts else byte

    def node_text(self, node: Node) -> str:
        return self.data[node.start_byte : node.end_byte].decode("utf-8", "replace")

    def span(self, node: Node) -> tuple[int, int]:
        return self.offset(node.start_byte), self.offset(node.end_byte)

    def node_at(self, start: int, end: int) -> Node | None:
        return self.root.descendant_for_byte_range(self.byte(start), self.byte(end))


def enclosing(node: Node | None, types: tuple[str, ...]) -> Node | None:
    """The nearest ancestor of `node` (not itself) of one of `types`."""
    node = node.parent if node is not None else None
    while node is not None and node.type not in types:
        node = node.parent
    return node


def walk(node: Node, skip: tuple[str, ...] = ()) -> list[Node]:
    """Every node under `node` in document order (`node` included), not descending into subtrees of `skip` types
    below `node` itself."""
    out, stack = [], [node]
    while stack:
        n = stack.pop()
        out.append(n)
        if n is node or n.type not in skip:
            stack.extend(reversed(n.children))
    return out
