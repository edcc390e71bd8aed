"""C++'s scopes for the rename candidate: C's (features/next_edit/lexical_java_c.py), and what tree-sitter-cpp
parses other than the compiler does.

A direct initialisation in a block, `std::stringstream stream(input);`, is parsed as a prototype: `stream` a
function, `input` its parameter's type. A compiler reads a variable `stream` initialised from `input` when `input`
is a variable, and a variable in scope hides any type of its name, so a rename of the variable `input` (or of
`stream`) follows it there. Read so: a declaration in a function's block whose declarator is `NAME(A, B, ...)`, each
of `A, B` a bare type name (no `const`, `*`, `&`, no parameter name, not a built-in type like `int`), nothing after
the parentheses; `T f();` stays a prototype, as for the compiler.
"""

from __future__ import annotations

from tree_sitter import Node

from waferline.server.features.next_edit.lexical_java_c import CScoping

_BLOCKS = ("compound_statement", "for_statement", "if_statement", "while_statement", "switch_statement")
_FUNCTIONS = ("function_definition", "lambda_expression")


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


class CppScoping(CScoping):
    def initialises(self, declarator: Node) -> bool:
        return direct_initialisation(declarator)

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
