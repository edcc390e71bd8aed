"""Rust's scopes for the rename candidate (features/next_edit/lexical_declared.py).

Followed: a function's or closure's parameter (its whole function), a `let` binding (from the end of the `let`
statement to the end of its block: `let x = x + 1;` reads the `x` before it), a `for` pattern's binding (the loop's
body), an `if let`/`while let` binding (from the pattern to the end of the branch taken) and a `match` arm's binding
(the arm), nested in any pattern (`(a, mut b)`, `Some(v)`, `Point { x: px, .. }`). A binding of the old name again
in the scope is a shadowing: the rename follows the uses around the new variable's scope (`let x = x + 1;` reads the
old `x`, the lines after it the new one; `for x in x {..}`, a closure's `|x|`), and is refused where that scope is
not known or reaches past the old variable's. In a refutable pattern (`if let`, `match`) a name that may be a
constant (capitalised, or a `const`, `static` or `use` of the file names it) is not followed. Not a variable: a
path's parts (`a::b`), a field, a label, a macro's name; nested items (`fn`, `impl`, `mod`, ...: they cannot see the
function's locals) are skipped, or refused when one is named with the old or the new name. The standard library's
macros whose arguments are expressions (`write!`, `assert_eq!`, `debug_assert!`, `vec!`, ...: EXPRESSION_MACROS) are
read as expressions: an identifier among their tokens is a use (not after `.` or `::`, nor before `::` or `!`).
Refused: any other macro invocation whose tokens spell the old or new name (a crate's own macro: its tokens are not
known to be expressions), and one of those whose tokens spell it in an inline format argument (`println!("{x}")`), a
named argument (`x = 1`), a `{...}` group, or beside tokens that may bind (`let`, `for`, `match`, `|`, `=>`), a
struct expression's field shorthand `Foo { x }` or a pattern's `Foo { x, .. }` of either name (the field's name
would change with it), a `use` of either name in the scope.
"""

from __future__ import annotations

import re

from tree_sitter import Node

from waferline.server.features.next_edit.lexical_declared import Refused, Scope, Scoping, spells, word
from waferline.server.features.next_edit.source import Source

_PATTERNS = ("tuple_pattern", "tuple_struct_pattern", "struct_pattern", "field_pattern", "ref_pattern", "mut_pattern",
             "reference_pattern", "captured_pattern", "or_pattern", "slice_pattern")  # fmt: skip
_ITEMS = ("function_item", "impl_item", "trait_item", "mod_item", "struct_item", "enum_item", "union_item",
          "const_item", "static_item", "type_item", "macro_definition", "foreign_mod_item",
          "function_signature_item")  # fmt: skip
_NOT_VARIABLES = ("scoped_identifier", "scoped_type_identifier", "label", "lifetime", "use_declaration",
                  "scoped_use_list", "use_list", "use_as_clause", "attribute", "meta_item")  # fmt: skip


def _holder(node: Node) -> tuple[Node, Node] | None:
    """(the node holding the pattern `node` lies in, the pattern's top) when `node` is a pattern's binding."""
    child, parent = node, node.parent
    while parent is not None and parent.type in _PATTERNS:
        if parent.type in ("tuple_struct_pattern", "struct_pattern") and parent.child_by_field_name("type") == child:
            return None  # `Some(..)`, `Point {..}`: a path
        if parent.type == "field_pattern" and parent.child_by_field_name("pattern") != child:
            return None
        child, parent = parent, parent.parent
    if parent is None:
        return None
    if parent.type in ("let_declaration", "parameter", "for_expression", "let_condition"):
        return (parent, child) if parent.child_by_field_name("pattern") == child else None
    if parent.type in ("closure_parameters", "match_pattern"):
        if parent.type == "match_pattern" and parent.child_by_field_name("condition") == child:
            return None  # the guard
        return parent, child
    return None


class RustScoping(Scoping):
    functions = ("function_item", "closure_expression")
    follows_past_shadowing = True  # `let text = dot(text)?;`: the old variable's uses stop where the new one's start

    def declared_at(self, src: Source, node: Node, name: str = "") -> Scope | None:
        found = _holder(node)
        if found is None:
            return None
        holder, top = found
        if holder.type == "parameter" and holder.parent is not None and holder.parent.type == "closure_parameters":
            holder = holder.parent
        if holder.type == "parameter":
            params = holder.parent
            function = params.parent if params is not None else None
            if (
                params is None
                or function is None
                or function.type != "function_item"
                or (function.child_by_field_name("body") is None)
            ):
                return None  # a trait's signature, a function pointer type
            return Scope(function, params.start_byte, function.end_byte, params.start_byte)
        if holder.type == "closure_parameters":
            closure = holder.parent
            if closure is None or closure.type != "closure_expression":
                return None
            return Scope(closure, holder.start_byte, closure.end_byte, holder.start_byte)
        if holder.type == "let_declaration":
            block = holder.parent
            if block is None or block.type != "block":
                return None
            if holder.child_by_field_name("alternative") is not None and self._constant(src, node, name):
                return None  # `let Some(X) = v else {..}`: a refutable pattern
            return Scope(block, holder.end_byte, block.end_byte, holder.start_byte)
        if holder.type == "for_expression":
            body = holder.child_by_field_name("body")
            return None if body is None else Scope(holder, body.start_byte, holder.end_byte, top.start_byte)
        if self._constant(src, node, name):
            return None  # a refutable pattern: the name may be a constant, not a binding
        if holder.type == "let_condition":
            branch = _branch_of(holder)
            if branch is None:
                return None
            return Scope(branch[0], holder.end_byte, branch[1].end_byte, holder.start_byte)
        arm = holder.parent  # match_pattern
        if arm is None or arm.type != "match_arm":
            return None
        return Scope(arm, top.end_byte, arm.end_byte, arm.start_byte)

    def _constant(self, src: Source, node: Node, name: str) -> bool:
        return _maybe_constant(src, src.node_text(node)) or bool(name and _maybe_constant(src, name))

    def binds(self, node: Node) -> bool:
        return _holder(node) is not None

    def is_use(self, node: Node) -> bool:
        n = node
        while n.parent is not None and n.parent.type in (*_NOT_VARIABLES, "token_tree", "use_wildcard"):
            if n.parent.type in _NOT_VARIABLES:
                return False  # a path's part, a label, an import, an attribute
            n = n.parent
        parent = node.parent
        if parent is None:
            return False
        if parent.type == "token_tree":  # an expression macro's token: not after `.` or `::`, nor before `::`, `!`
            before, after = node.prev_sibling, node.next_sibling
            if before is not None and before.type in (".", "::"):
                return False
            return after is None or after.type not in ("::", "!")
        if parent.type == "macro_invocation" and parent.child_by_field_name("macro") == node:
            return False
        return not (parent.type in _ITEMS and parent.child_by_field_name("name") == node)

    def opaque(self, src: Source, node: Node, names: tuple[str, ...]) -> bool:
        if node.type == "token_tree" or node.type == "macro_invocation":
            if _expression_tokens(node):
                if node.type == "macro_invocation" and spells(src, node, names) and _inexact_in(src, node, names):
                    raise Refused
                return False  # its identifiers are classified one by one (is_use)
            if spells(src, node, names):
                raise Refused
            return True
        if node.type in _ITEMS:
            name = node.child_by_field_name("name")
            if name is not None and src.node_text(name) in names:
                raise Refused
            return True
        if node.type == "use_declaration":
            if spells(src, node, names):
                raise Refused
            return True
        return node.type in ("attribute_item", "inner_attribute_item")

    def refuses(self, src: Source, node: Node, names: tuple[str, ...]) -> bool:
        if node.type in ("shorthand_field_initializer", "shorthand_field_identifier"):
            return src.node_text(node) in names
        return False


# The standard library's macros whose arguments are expressions separated by commas (a format string first, or
# `vec![x; n]`): their identifiers are the variables they spell, as in any expression. `matches!` is not one (a
# pattern binds), nor any macro a crate defines (its tokens may be anything).
EXPRESSION_MACROS = frozenset({
    "format", "format_args", "print", "println", "eprint", "eprintln", "write", "writeln", "panic", "assert",
    "assert_eq", "assert_ne", "debug_assert", "debug_assert_eq", "debug_assert_ne", "unreachable", "todo",
    "unimplemented", "vec", "dbg",
})  # fmt: skip
_BINDS = re.compile(r"\b(?:let|for|match|move)\b|\||=>|[^=!<>+\-*/%&^|]=[^=]")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


def _expression_tokens(node: Node) -> bool:
    """`node` (a macro invocation or a token tree) holds tokens of one of EXPRESSION_MACROS' arguments: its own, or
    a parenthesised or bracketed group of them, not a nested macro's but another of those."""
    if node.type == "macro_invocation":
        name = node.child_by_field_name("macro")
        return name is not None and name.type == "identifier" and name.text is not None and \
            name.text.decode() in EXPRESSION_MACROS  # fmt: skip
    parent, first = node.parent, node.child(0)
    if parent is None or first is None or first.type == "{":
        return False  # a block or a struct literal's fields: may bind, may be a shorthand
    if parent.type == "macro_invocation":
        return _expression_tokens(parent)
    if parent.type != "token_tree":
        return False
    before = node.prev_sibling
    if before is not None and before.type == "!":  # a nested macro's tokens: `name!(...)`
        name = before.prev_sibling
        return name is not None and name.type == "identifier" and name.text is not None and \
            name.text.decode() in EXPRESSION_MACROS and _expression_tokens(parent)  # fmt: skip
    return _expression_tokens(parent)


def _inexact_in(src: Source, macro: Node, names: tuple[str, ...]) -> bool:
    """An expression macro spelling one of `names` where a rename cannot follow it: an inline format argument
    (`"{x}"`, `"{x:?}"`), a named argument (`x = 1`), or tokens that may bind a name (`let`, `for`, `match`, a
    closure's `|x|`, an arm's `=>`)."""
    text = src.node_text(macro)
    if any(re.search(r"\{" + re.escape(n) + r"\b", text) for n in names):
        return True
    return _BINDS.search(_STRING.sub('""', text)) is not None


def _branch_of(condition: Node) -> tuple[Node, Node] | None:
    """(the `if`/`while` whose condition holds the `let`, the branch its binding reaches)."""
    n = condition.parent
    while n is not None and n.type == "let_chain":
        n = n.parent
    if n is None or n.type not in ("if_expression", "while_expression"):
        return None
    branch = n.child_by_field_name("consequence" if n.type == "if_expression" else "body")
    return None if branch is None else (n, branch)


def _maybe_constant(src: Source, name: str) -> bool:
    if not name or name[0].isupper():
        return True
    w = word(name).pattern
    return re.search(rf"\b(?:const|static)\s+{w}|\buse\b[^;]*{w}", src.text) is not None


RUST = RustScoping()
