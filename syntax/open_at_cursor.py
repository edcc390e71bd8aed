"""Which brackets are open at the cursor, and whether the text after it closes each, read from the document's tree
(syntax/plan.py asks, for the completion's stop rules): the bracket tokens of every node around the cursor, ERROR
nodes included, and the cursor line's own text where error recovery made a pairing up."""

from __future__ import annotations

from tree_sitter import Node

from waferline.syntax.brackets import CLOSERS, OPENERS, open_brackets
from waferline.syntax.text import utf8_len
from waferline.syntax.tree import SyntaxError_, TreeSnapshot, collect_errors, first_child_after


def tree_brackets(root: Node, b: int) -> tuple[str, tuple[int | None, ...]]:
    """Brackets open at byte b (outermost first) and where the text after b closes each (the closer's byte, None
    where it does not), read from the tokens of every node around the cursor (brackets are direct children of the
    node they delimit, ERROR nodes included)."""
    opened: list[tuple[str, int | None]] = []
    frontier = [root]
    while frontier:
        node = frontier.pop()
        stack: list[str] = []
        closed_after: list[int] = []
        inner: list[Node] = []
        depth_after = 0  # brackets opened after the cursor at this level
        for child in children_near(node, b):
            s, e = child.start_byte, child.end_byte
            kind = "{" if child.type == "${" else child.type
            if s < b < e or (s < b == e and child.child_count):  # around (or ending at) the cursor: visit it too
                inner.append(child)
            elif child.is_missing:
                continue
            elif e <= b and kind in OPENERS:
                stack.append(kind)
            elif e <= b and kind in CLOSERS and stack and stack[-1] == CLOSERS[kind]:
                stack.pop()
            elif s >= b and kind in OPENERS:
                depth_after += 1
            elif s >= b and kind in CLOSERS and depth_after:
                depth_after -= 1
            elif s >= b and kind in CLOSERS and len(closed_after) < len(stack):
                if stack[len(stack) - 1 - len(closed_after)] != CLOSERS[kind]:
                    break
                closed_after.append(s)
        first_closed = len(stack) - len(closed_after)  # closed_after holds the innermost's closer first
        opened += [(ch, closed_after[len(stack) - 1 - i] if i >= first_closed else None) for i, ch in enumerate(stack)]
        frontier.extend(reversed(inner))
    return "".join(ch for ch, _ in opened), tuple(c for _, c in opened)


def distrust_error_line(
    opened: str,
    closers: tuple[int | None, ...],
    root: Node,
    snap: TreeSnapshot,
    cursor_byte: int,
    text: str,
    offset: int,
    line_start: int,
) -> tuple[str, tuple[bool, ...]]:
    """Whether the suffix closes each open bracket, from the tree, unless error recovery made that up.

    Where the document does not parse between the cursor's line and a closer, the tree may pair a bracket opened on
    the cursor's line with a closer lines below (`def f(se` over a body that calls something: "the suffix closes
    it", so a completion `lf):` was cut to `lf`), or drop the bracket (`pmap({k: v for k, v ` read as nothing open,
    so the completion's `})` closed "what it did not open"). The brackets the line itself opens before the cursor are
    certain: when the tree's list does not end with them and the line has an error, the text's brackets are used (as
    for plain text); and the suffix is taken to close one of them only when no error lies between the line's start
    and that closer."""
    closed = tuple(c is not None for c in closers)
    if not root.has_error:
        return opened, closed
    on_line = open_brackets(text[line_start:offset], snap.language_id)
    if not on_line:
        return opened, closed
    line_byte = cursor_byte - utf8_len(text[line_start:offset])
    errors = collect_errors(root, snap.source, 64)
    if not opened.endswith(on_line):
        if not errors_on_line(errors, line_byte, cursor_byte):
            return opened, closed
        opened = open_brackets(text[max(line_start - 2000, 0) : offset], snap.language_id)
        if not opened.endswith(on_line):  # the window starts inside a string or a comment: trust the line only
            opened = on_line
        return opened, tuple(False for _ in opened)
    outer = len(opened) - len(on_line)

    def kept(closer: int | None) -> bool:
        return closer is not None and not errors_on_line(errors, line_byte, closer)

    return opened, closed[:outer] + tuple(kept(c) for c in closers[outer:])


def errors_on_line(errors: list[SyntaxError_], line_byte: int, end_byte: int) -> bool:
    """Whether a syntax error lies between the start of the cursor's line and `end_byte`."""
    return any(e.start_byte <= end_byte and e.end_byte >= line_byte for e in errors)


def children_near(node: Node, b: int) -> list[Node]:
    """The children that can hold a bracket open at b: all of them for a small node; for a big one (a module, a
    block, a long list) its first and last child, which are its own brackets, and those around b."""
    count = node.child_count
    if count <= 16:
        return node.children
    near = [node.child(0)]
    i = first_child_after(node, max(b - 1, 0))
    while i < count and (child := node.child(i)) is not None and child.start_byte <= b:
        near.append(child)
        i += 1
    near.append(node.child(count - 1))
    unique = {c.id: c for c in near if c is not None}
    return sorted(unique.values(), key=lambda c: (c.start_byte, c.end_byte))
