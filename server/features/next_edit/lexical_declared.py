"""Renames of parameters and locals in languages whose variables are declared before use: Rust, Java, C and C++.

What features/next_edit/lexical.py is for JavaScript, TypeScript and Go, on the rule these languages share: a
local's scope runs from its declaration (Rust: from the end of its `let` statement) to the end of the block around
it, a parameter's over its function. Each language says, in a `Scoping` (features/next_edit/lexical_rust.py,
lexical_java_c.py, lexical_cpp.py), which identifiers declare a variable and with what scope, which bind a name at
all (any pattern, parameter or declarator: a shadowing), which are not variables (a field, a path, a label, a
method's name), which subtrees hold other variables (Rust's nested items) and what makes a rename inexact (a macro,
a struct field shorthand). A rename made at a declaration follows every use of the variable in its scope; it is
refused (exact or not shown) when the old name is bound again in the scope (shadowing; in Rust, where it is the
idiom, the new binding's own scope is skipped instead and the rename followed around it), when the new name is
already spelled there, or when the language's own refusals apply.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from tree_sitter import Node

from waferline.server.features.next_edit.rename import Renamed, renamed_identifier
from waferline.server.features.next_edit.source import Edit, Source
from waferline.syntax.edit_history import EditEvent


@dataclass(frozen=True)
class Scope:
    container: Node  # the node the variable's uses lie in
    start: int  # byte: its uses start here
    end: int  # byte: and end here
    taken_from: int  # byte: a new name spelled from here (the declaration included) is taken


class Refused(Exception):
    """The rename would not be exact."""


class Scoping:
    """One language's scope rules; the defaults suit none, each language overrides them."""

    functions: tuple[str, ...] = ()  # nodes whose parameters and locals are followed (a local lies in one)
    follows_past_shadowing = False  # a binding of the old name again: its scope skipped (else the rename refused)

    def declared_at(self, src: Source, node: Node, name: str = "") -> Scope | None:
        """The scope of the variable the identifier `node` declares (`name`: the name it had, when the user just
        changed it); None for a use or a declaration not followed."""
        raise NotImplementedError

    def binds(self, node: Node) -> bool:
        """The identifier binds a name (a parameter, a pattern's binding, a declarator), followed or not."""
        raise NotImplementedError

    def is_use(self, node: Node) -> bool:
        """The identifier (not a binding) may name a variable: not a field, a path's part, a label, a method."""
        raise NotImplementedError

    def opaque(self, src: Source, node: Node, names: tuple[str, ...]) -> bool:
        """`node`'s subtree holds none of the variable's uses and is skipped; Refused when it spells one of
        `names` in a way that makes the rename inexact (a macro's tokens, a nested class)."""
        return False

    def refuses(self, src: Source, node: Node, names: tuple[str, ...]) -> bool:
        """The node spells one of `names` where a rename of the variable alone cannot follow (a shorthand)."""
        return False

    def file_refuses(self, src: Source, scope: Scope, names: tuple[str, ...]) -> bool:
        """Something outside the tree (C's preprocessor) makes a rename of `names` in `scope` inexact."""
        return False

    def closure_reads(self, src: Source, closure: Node, name: str) -> bool:
        """A closure (a lambda) nested in a function reads the function's variable `name` (C++: when it captures
        it)."""
        return True

    def is_name(self, node: Node) -> bool:
        """The node is an identifier that may be a variable's (C++: a type's name where the parser mistakes a
        variable for one)."""
        return node.type == "identifier"


def word(name: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w$]){re.escape(name)}(?![\w$])")


def spells(src: Source, node: Node, names: tuple[str, ...]) -> bool:
    """The node's text holds one of `names` as a whole word (a macro's tokens, its strings included)."""
    text = src.node_text(node)
    return any(n in text and word(n).search(text) for n in names)


def variable_uses(src: Source, sc: Scoping, r: Renamed) -> list[Node] | None:
    """The identifiers still spelling the old name that are the variable `r.node` declares, in document order;
    None when `r.node` is a use, or the rename would not be exact."""
    scope = sc.declared_at(src, r.node, r.old)
    names = (r.old, r.new)
    if scope is None or sc.file_refuses(src, scope, names):
        return None
    try:
        return list(_uses(src, sc, scope, r))
    except Refused:
        return None


def occurrences(
    src: Source, names: tuple[str, ...], lo: int, hi: int, sc: Scoping | None = None
) -> Iterator[tuple[Node, bool]]:
    """The smallest node around each whole-word occurrence of one of `names` in the bytes `[lo, hi)`, and whether
    it is exactly an identifier of that name (`sc.is_name`; else a comment, a string, a macro's token, a longer
    name). Found in the text, then in the tree: a scope's few occurrences, not its every node."""
    pattern = re.compile(b"|".join(rb"(?<![\w$])" + re.escape(n.encode()) + rb"(?![\w$])" for n in names))
    for m in pattern.finditer(src.data, lo, hi):
        node = src.root.descendant_for_byte_range(m.start(), m.end())
        if node is not None:
            named = sc.is_name(node) if sc is not None else node.type == "identifier"
            exact = named and node.start_byte == m.start() and node.end_byte == m.end()
            yield node, exact


def _uses(src: Source, sc: Scoping, scope: Scope, r: Renamed) -> Iterator[Node]:
    names = (r.old, r.new)
    shadowed: list[tuple[int, int]] = []  # bytes where another variable of the old name is seen (Rust's `let x`)
    for n, exact in occurrences(src, names, scope.taken_from, scope.end, sc):
        if _hidden(src, sc, scope.container, n, names) or not exact or n == r.node:
            continue
        text = src.node_text(n)
        if text == r.new and (sc.binds(n) or sc.is_use(n)) and src.offset(n.start_byte) not in r.chained:
            raise Refused  # the new name is taken
        if text == r.old and n.start_byte >= scope.start:
            if any(a <= n.start_byte < b for a, b in shadowed):
                continue  # the other variable's binding or use
            if sc.binds(n):
                inner = sc.declared_at(src, n) if sc.follows_past_shadowing else None
                if inner is None or inner.end > scope.end:
                    raise Refused  # bound again: a shadowing, not followed
                shadowed.append((inner.start, inner.end))
                continue
            if sc.is_use(n):
                yield n


def _hidden(src: Source, sc: Scoping, container: Node, node: Node, names: tuple[str, ...]) -> bool:
    """`node` lies in a subtree of `container` that holds none of the variable's uses (Refused: one that makes the
    rename inexact: a macro's tokens, a shorthand, a nested class)."""
    n: Node | None = node
    while n is not None and n != container:
        if sc.refuses(src, n, names):
            raise Refused
        if sc.opaque(src, n, names):
            return True
        n = n.parent
    return False


def rename_edits(src: Source, sc: Scoping, r: Renamed) -> list[Edit]:
    found = variable_uses(src, sc, r)
    return [] if not found else [Edit(*src.span(n), r.new) for n in found]


def is_local(src: Source, sc: Scoping, r: Renamed) -> bool:
    """The renamed identifier is a followed parameter or local, declared or used (its old or new name declared in
    its function): the rename candidate's alone, the text substitution stays silent. A function's, a field's name
    is not: the substitution may still follow it on the lines around."""
    node = r.node
    if sc.declared_at(src, node, r.old) is not None:
        return True
    function = node.parent
    while function is not None and function.type not in sc.functions:
        function = function.parent
    if function is None or sc.binds(node) or not sc.is_use(node):
        return False
    return any(
        exact and sc.declared_at(src, n) is not None
        for n, exact in occurrences(src, (r.old, r.new), function.start_byte, function.end_byte, sc)
    )


def declared_rename(
    src: Source, sc: Scoping, start: int, end: int, event: EditEvent, chained: frozenset[int]
) -> tuple[list[Edit], bool]:
    """The rename's edits, nearest after the edit first, and whether the edit renamed a local or parameter (the
    substitution candidate is then not tried)."""
    r = renamed_identifier(src, start, end, event, chained, ("identifier", "shorthand_field_identifier"))
    if r is None:
        return [], False
    if r.node.type != "identifier":
        return [], True  # Rust's `P { x, .. }` pattern: the field it reads changed, not a rename
    edits = rename_edits(src, sc, r)
    at = src.offset(r.node.start_byte)
    return [e for e in edits if e.start > at] + [e for e in edits if e.start <= at], is_local(src, sc, r)
