"""C++'s scopes for the rename candidate: C's (features/next_edit/lexical_java_c.py), and what tree-sitter-cpp
parses other than the compiler does.

A direct initialisation in a block, `std::stringstream stream(input);`, is parsed as a prototype: `stream` a
function, `input` its parameter's type. A compiler reads a variable `stream` initialised from `input` when `input`
is a variable, and a variable in scope hides any type of its name, so a rename of the variable `input` (or of
`stream`) follows it there. Read so: a declaration in a function's block whose declarator is `NAME(A, B, ...)`, each
of `A, B` a bare type name (no `const`, `*`, `&`, no parameter name, not a built-in type like `int`), nothing after
the parentheses; `T f();` stays a prototype, as for the compiler.

For the added parameter's call sites (features/next_edit/signature_declared.py), C++ has more ways than C to call
another function of the name: the function followed is a free function (at file or namespace scope, not a template,
not a method) whose name the file spells only at its definition and as the callee of plain calls `name(...)`, outside
comments and strings (not `ns::name(...)`, `o.name`, a method or prototype of the name: an overload, a method of the
caller's class, a default argument may be what binds); and a lambda passes the caller's variable only when it
captures it (`[&]`, `[=]`, `[name]`), a local class's method never.
"""

from __future__ import annotations

from tree_sitter import Node

from waferline.server.features.next_edit.lexical_declared import occurrences
from waferline.server.features.next_edit.lexical_java_c import CScoping
from waferline.server.features.next_edit.source import Source

_BLOCKS = ("compound_statement", "for_statement", "if_statement", "while_statement", "switch_statement")
_FUNCTIONS = ("function_definition", "lambda_expression")
_TEXT = ("comment", "string_literal", "raw_string_literal", "char_literal", "concatenated_string")
_FILE_SCOPES = ("translation_unit", "declaration_list")  # a namespace's, an `extern "C"` block's


def _bare_type(parameter: Node) -> bool:
    """A parameter declaration that is one type name alone (`(input)`): maybe a variable read."""
    if parameter.type != "parameter_declaration" or parameter.named_child_count != 1:
        return False
    only = parameter.named_children[0]
    return only.type == "type_identifier" and parameter.child_by_field_name("type") == only


def direct_initialisation(declarator: Node) -> bool:
    """`declarator` is the `NAME(A, B)` of a declaration in a function's block whose arguments are bare names."""
    if declarator.type != "function_declarator" or declarator.named_child_count != 2:
        return False
    name, params = declarator.child_by_field_name("declarator"), declarator.child_by_field_name("parameters")
    declaration = declarator.parent
    if name is None or name.type != "identifier" or params is None or declaration is None:
        return False
    if declaration.type != "declaration" or declaration.parent is None or declaration.parent.type not in _BLOCKS:
        return False
    if not params.named_children or not all(_bare_type(p) for p in params.named_children):
        return False
    n: Node | None = declaration.parent
    while n is not None and n.type not in _FUNCTIONS:
        n = n.parent
    return n is not None


def _in_text(node: Node) -> bool:
    n: Node | None = node
    while n is not None and n.type not in _TEXT:
        n = n.parent
    return n is not None


def only_called(src: Source, function: Node, ident: Node, name: str) -> bool:
    """The free function `function` (its name `ident`) is what every mention of `name` in the file names: its
    definition and plain calls `name(...)` (comments and strings aside)."""
    holder = function.parent
    if (
        holder is None
        or holder.type not in _FILE_SCOPES
        or (
            holder.type == "declaration_list"
            and (holder.parent is None or holder.parent.type not in ("namespace_definition", "linkage_specification"))
        )
    ):
        return False  # a template's, a class's, a local declaration
    for n, exact in occurrences(src, (name,), 0, len(src.data)):
        if _in_text(n) or n == ident:
            continue
        call = n.parent
        if not exact or call is None or call.type != "call_expression" or call.child_by_field_name("function") != n:
            return False
    return True


class CppScoping(CScoping):
    def initialises(self, declarator: Node) -> bool:
        return direct_initialisation(declarator)

    def closure_reads(self, src: Source, closure: Node, name: str) -> bool:
        captures = closure.child_by_field_name("captures") if closure.type == "lambda_expression" else None
        return captures is not None and any(
            c.type == "lambda_default_capture" or (c.type == "identifier" and src.node_text(c) == name)
            for c in captures.named_children
        )

    def is_name(self, node: Node) -> bool:
        if node.type == "identifier":
            return True
        parameter = node.parent
        params = parameter.parent if parameter is not None and node.type == "type_identifier" else None
        return (
            parameter is not None
            and _bare_type(parameter)
            and params is not None
            and params.parent is not None
            and direct_initialisation(params.parent)
        )


CPP = CppScoping()
