"""Python's name scopes, read from a tree-sitter tree: which identifiers are one variable.

A rename is proposed only where it is exact, so what counts as "the same name" follows Python's rules closely
enough to be right on ordinary code: a function (or lambda, or class body) is a scope; a name it binds (a parameter,
an assignment or `for`/`with`/`except` target, an import, a nested `def` or `class`) is its own unless declared
`global`/`nonlocal`; a comprehension is a scope of its own for its `for` targets (Python 3); a nested scope that
binds the same name has its own variable and is skipped; a function's defaults and annotations belong to the scope
around it; an attribute name (`obj.name`) and a keyword argument's name (`f(name=...)`) are not the variable.
"""

from __future__ import annotations

from tree_sitter import Node

from waferline.server.features.next_edit.source import FUNCTION_TYPES, SCOPE_TYPES, Source, walk

_TARGET_PARENTS = {
    "assignment": "left", "augmented_assignment": "left", "for_statement": "left", "for_in_clause": "left",
    "named_expression": "name", "as_pattern_target": None, "with_item": None,
}  # fmt: skip
_PATTERNS = ("pattern_list", "tuple_pattern", "list_pattern", "list_splat_pattern", "tuple", "list")


def is_name(node: Node) -> bool:
    """An identifier that names a variable (not an attribute's or a keyword argument's name)."""
    if node.type != "identifier":
        return False
    parent = node.parent
    if parent is None:
        return True
    if parent.type == "attribute" and parent.child_by_field_name("attribute") == node:
        return False
    return not (parent.type == "keyword_argument" and parent.child_by_field_name("name") == node)


def in_parameters(node: Node) -> Node | None:
    """The function or lambda whose parameter `node` names, else None."""
    n = node.parent
    while n is not None and n.type in ("typed_parameter", "default_parameter", "typed_default_parameter",
                                       "list_splat_pattern", "dictionary_splat_pattern"):  # fmt: skip
        if n.type in ("default_parameter", "typed_default_parameter") and n.child_by_field_name("name") != node:
            return None  # a name inside the default value
        n = n.parent
    if n is not None and n.type in ("parameters", "lambda_parameters"):
        return n.parent
    return None


def is_binding(node: Node) -> bool:
    """`node` (an identifier) is where its scope binds the name."""
    if in_parameters(node) is not None:
        return True
    parent = node.parent
    while parent is not None and parent.type in _PATTERNS:
        node, parent = parent, parent.parent
    if parent is None:
        return False
    if parent.type in ("function_definition", "class_definition"):
        return parent.child_by_field_name("name") == node
    if parent.type in ("aliased_import", "dotted_name", "as_pattern_target"):
        return True
    if parent.type in _TARGET_PARENTS:
        field_name = _TARGET_PARENTS[parent.type]
        return field_name is None or parent.child_by_field_name(field_name) == node
    return False


def scope_of(node: Node) -> Node:
    """The scope `node` is evaluated in: the nearest function, lambda or class around it, else the module."""
    n = node.parent
    while n is not None:
        if n.type in SCOPE_TYPES:
            return n
        if n.parent is None:
            return n
        n = n.parent
    return node


def binds(scope: Node, name: str, src: Source) -> bool:
    """`scope` (a function, lambda or class) has a variable of its own called `name`."""
    declared_outside = False
    own_name = scope.child_by_field_name("name") if scope.type in SCOPE_TYPES else None
    for n in walk(scope, skip=SCOPE_TYPES):
        if own_name is not None and n == own_name:
            continue  # `def name(...)` binds `name` in the scope around it
        if n.type in ("global_statement", "nonlocal_statement") and any(
            src.node_text(c) == name for c in n.named_children
        ):
            declared_outside = True
        if n is not scope and n.type in SCOPE_TYPES:
            decl = n.child_by_field_name("name")
            if decl is not None and src.node_text(decl) == name:
                return True
            continue
        if n.type == "identifier" and src.node_text(n) == name and is_binding(n):
            owner = in_parameters(n)
            if owner is None or owner == scope:
                return not declared_outside or owner == scope
    return False


def occurrences(scope: Node, name: str, src: Source) -> list[Node]:
    """The identifiers under `scope` that are its variable `name`: nested scopes with their own `name` skipped."""
    out: list[Node] = []
    stack = _evaluated_in(scope)
    while stack:
        n = stack.pop()
        if n is not scope and n.type in SCOPE_TYPES and binds(n, name, src):
            decl = n.child_by_field_name("name")  # a nested def named `name` is the outer scope's variable
            if decl is not None and src.node_text(decl) == name and n.type in ("function_definition",
                                                                                 "class_definition"):  # fmt: skip
                out.append(decl)
            continue
        if n.type == "identifier" and is_name(n) and src.node_text(n) == name:
            out.append(n)
        stack.extend(reversed(n.children))
    return sorted(out, key=lambda n: n.start_byte)


def _evaluated_in(scope: Node) -> list[Node]:
    """What of a function is evaluated in its own scope: its parameters' names and its body (its defaults,
    annotations and decorators belong to the scope around it); anything else, all of it."""
    if scope.type not in FUNCTION_TYPES:
        return [scope]
    body = scope.child_by_field_name("body")
    params = scope.child_by_field_name("parameters")
    names = []
    for p in params.named_children if params is not None else []:
        name = (
            p
            if p.type == "identifier"
            else p.child_by_field_name("name")
            or (p.named_children[0] if p.named_children and p.named_children[0].type == "identifier" else None)
        )
        if name is not None and name.type == "identifier":
            names.append(name)
    return [*names, *([body] if body is not None else [])][::-1]


def enclosing_function(node: Node) -> Node | None:
    n = node.parent
    while n is not None and n.type not in FUNCTION_TYPES:
        n = n.parent
    return n


def is_method(function: Node) -> bool:
    """A function_definition directly in a class body (decorated or not)."""
    parent = function.parent
    if parent is not None and parent.type == "decorated_definition":
        parent = parent.parent
    return (
        parent is not None
        and parent.type == "block"
        and parent.parent is not None
        and parent.parent.type == "class_definition"
    )
