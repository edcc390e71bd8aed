"""One document's tree-sitter tree, kept current edit by edit and re-parsed incrementally when it is read.

Every `didChange` calls `apply(change)`, which only records the edit in the old tree (`Tree.edit`, no parsing); the
next reader of `.tree` pays one incremental `parser.parse(new_source, old_tree)` that reuses every unchanged subtree,
so a burst of keystrokes costs one parse, and a keystroke in a 2,000-line file costs well under a millisecond.

A document without a grammar (unknown language), a binary file or one too big to parse quickly is plain text:
`tree` is None and everything built on it falls back to text rules.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from tree_sitter import Node, Parser, Tree

from waferline.syntax.languages import language, parser_for
from waferline.syntax.text import DocumentText, TextChange

log = logging.getLogger(__name__)

MAX_PARSE_BYTES = 4 << 20  # 4 MiB: beyond this a document is completed as plain text (a parse would take ~1 s)


@dataclass(frozen=True)
class SyntaxError_:
    """One ERROR or MISSING node: where the parser had to recover."""

    start_byte: int
    end_byte: int
    missing: bool  # a zero-width token the parser invented (for example a `)` never typed)


def point_at(source: bytes, byte: int) -> tuple[int, int]:
    """tree-sitter's (row, column in bytes) of a byte offset: rows count "\\n" only."""
    row = source.count(b"\n", 0, byte)
    return row, byte - (source.rfind(b"\n", 0, byte) + 1)


def collect_errors(root: Node, source: bytes, limit: int = 1000) -> list[SyntaxError_]:
    """The outermost ERROR nodes and every MISSING node, in document order, visiting only subtrees with errors.

    A MISSING token of a hidden rule (Python's `_newline`, JavaScript's `_automatic_semicolon`) is not among any
    node's children; a node whose error no child explains reports it between those of its children that share a
    line (where such a token goes), or over its whole span.
    """
    found: list[SyntaxError_] = []
    stack = [root]
    while stack and len(found) < limit:
        node = stack.pop()
        if node.is_error or node.is_missing:
            found.append(SyntaxError_(node.start_byte, node.end_byte, node.is_missing))
            continue
        if not node.has_error:
            continue
        children = node.children
        if any(c.has_error or c.is_missing for c in children):
            stack.extend(reversed(children))
        else:
            found.extend(_hidden_errors(node, children, source))
    return found


def _hidden_errors(node: Node, children: list[Node], source: bytes) -> list[SyntaxError_]:
    edges = [node.start_byte, *(b for c in children for b in (c.start_byte, c.end_byte)), node.end_byte]
    gaps = [(edges[i], edges[i + 1]) for i in range(0, len(edges), 2)]  # before, between and after the children
    same_line = [(a, b) for a, b in gaps if b"\n" not in source[a:b] and 0 < a < len(source)]
    return [SyntaxError_(a, b, True) for a, b in same_line] or [SyntaxError_(node.start_byte, node.end_byte, True)]


def first_child_after(node: Node, byte: int) -> int:
    """Index of the first child of node that ends after `byte` (child_count when none does), by binary search.

    Not `Node.first_child_for_byte`: py-tree-sitter 0.26.1 crashes (SIGSEGV) when no child qualifies.
    """
    lo, hi = 0, node.child_count
    while lo < hi:
        mid = (lo + hi) // 2
        child = node.child(mid)
        assert child is not None, "an index below child_count has a child"
        if child.end_byte > byte:
            hi = mid
        else:
            lo = mid + 1
    return lo


def plain_text_reason(language_id: str | None, source: bytes) -> str | None:
    """Why a document is completed as plain text, or None when it gets a tree."""
    if language_id is None or language(language_id) is None:
        return f"no grammar for language {language_id!r}"
    if len(source) > MAX_PARSE_BYTES:
        return f"{len(source)} bytes is over the parse limit of {MAX_PARSE_BYTES}"
    if b"\0" in source[:8192]:
        return "binary content (NUL bytes)"
    return None


class SyntaxTree:
    """The tree of one document. Build it with the document's text; feed it every `TextChange`."""

    def __init__(self, language_id: str | None, text: str):
        self.language_id = language_id
        self._reset(text)

    def _reset(self, text: str) -> None:
        language_id = self.language_id
        self.source = text.encode("utf-8", "surrogatepass")
        self.plain_reason = plain_text_reason(language_id, self.source)
        self._parser: Parser | None = None
        if self.plain_reason is None and language_id is not None:
            self._parser = parser_for(language_id)
        else:
            log.debug("plain text: %s", self.plain_reason)
        self._tree: Tree | None = None
        self._dirty = self._parser is not None
        self.parses = 0  # parses done so far (incremental or not): a figure for stats and tests

    @classmethod
    def for_document(cls, doc: DocumentText) -> SyntaxTree:
        return cls(doc.language_id, doc.text)

    @property
    def is_plain_text(self) -> bool:
        return self._parser is None

    @property
    def tree(self) -> Tree | None:
        """The current tree, parsed now if edits arrived since the last parse; None for plain text."""
        if self._dirty and self._parser is not None:
            old = self._tree
            self._tree = self._parser.parse(self.source, old) if old is not None else self._parser.parse(self.source)
            self._dirty = False
            self.parses += 1
        return self._tree

    @property
    def root(self) -> Node | None:
        tree = self.tree
        return tree.root_node if tree is not None else None

    def apply(self, change: TextChange) -> None:
        """Record one edit (as `DocumentText.apply_change` returned it); the parse waits for the next reader."""
        old = self.source
        new_bytes = change.new_text.encode("utf-8", "surrogatepass")
        assert change.new_end_byte - change.start_byte == len(new_bytes), "change bytes disagree with its text"
        self.source = old[: change.start_byte] + new_bytes + old[change.old_end_byte :]
        if self._parser is None:
            return
        if len(self.source) > MAX_PARSE_BYTES:  # grew past the limit: stop parsing rather than stall typing
            self.plain_reason = f"grew past {MAX_PARSE_BYTES} bytes"
            self._parser, self._tree, self._dirty = None, None, False
            return
        if self._tree is not None:
            self._tree.edit(
                change.start_byte,
                change.old_end_byte,
                change.new_end_byte,
                point_at(old, change.start_byte),
                point_at(old, change.old_end_byte),
                point_at(self.source, change.new_end_byte),
            )
        self._dirty = True

    def replace(self, text: str) -> None:
        """Start over from a whole new text (a full-document change): the next read parses from scratch."""
        self._reset(text)

    @property
    def has_errors(self) -> bool:
        root = self.root
        return root is not None and root.has_error

    def errors(self) -> list[SyntaxError_]:
        root = self.root
        return collect_errors(root, self.source) if root is not None else []

    def error_count(self, start_byte: int = 0, end_byte: int | None = None) -> int:
        """ERROR and MISSING nodes that overlap [start_byte, end_byte) (the whole document by default)."""
        end = len(self.source) if end_byte is None else end_byte
        return sum(1 for e in self.errors() if e.start_byte <= end and e.end_byte >= start_byte)

    def node_at(self, byte: int) -> Node | None:
        """The smallest node that spans a byte offset."""
        root = self.root
        return root.descendant_for_byte_range(byte, byte) if root is not None else None

    def snapshot(self) -> TreeSnapshot | None:
        """The tree and bytes as they are now, safe to read on another thread while typing goes on."""
        tree = self.tree
        if tree is None or self.language_id is None:
            return None
        return TreeSnapshot(self.language_id, tree.copy(), self.source)


@dataclass(frozen=True)
class TreeSnapshot:
    """A document's tree and bytes at one moment; checking a completion parses a copy, never the document."""

    language_id: str
    tree: Tree
    source: bytes

    def errors(self) -> list[SyntaxError_]:
        return collect_errors(self.tree.root_node, self.source)

    def parse_with(self, start_byte: int, old_end_byte: int, new_bytes: bytes) -> Tree:
        """The tree of this text with `[start_byte, old_end_byte)` replaced by `new_bytes`, parsed incrementally
        from a copy of the snapshot's tree (its own parser: the document's may be busy on another thread)."""
        old = self.source
        source = old[:start_byte] + new_bytes + old[old_end_byte:]
        candidate = self.tree.copy()
        new_end = start_byte + len(new_bytes)
        candidate.edit(
            start_byte,
            old_end_byte,
            new_end,
            point_at(old, start_byte),
            point_at(old, old_end_byte),
            point_at(source, new_end),
        )
        parser = parser_for(self.language_id)
        assert parser is not None, "a snapshot's language has a parser"
        return parser.parse(source, candidate)
