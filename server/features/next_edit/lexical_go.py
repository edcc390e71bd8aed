"""Go's scope rules that features/next_edit/lexical.py's block scopes need beyond the block itself.

- Where a name comes into scope: a variable or constant declared in a function is in scope from the end of its
  statement or spec (`x := x`, `if b, ok := b.(T)`, `for _, v := range v.items` and `switch v := v.(type)` read the
  outer name on their right), to the end of its block; parameters, package-level names and a function's own name
  in the whole scope.
- A `:=` that names a variable already declared in its block assigns it (`a, err := f()` then `b, err := g()`).
- A composite literal's key: a field's name when the literal is of a struct type (its own `struct{...}`, or a
  type declared once in the file as a struct), an expression (a variable's use) when it is of a map, slice or array
  type, or its key is lowercase in another package's type (whose unexported fields cannot be keys); an element of
  elided type is of its outer literal's element (or key) type. Otherwise not known.
"""

from __future__ import annotations

from tree_sitter import Node

_DECLARING = ("short_var_declaration", "var_spec", "const_spec", "range_clause", "receive_statement")
_INDEXED = ("map_type", "slice_type", "array_type", "implicit_length_array_type")


def visible_from(node: Node, scope: Node) -> int:
    """The byte where the name that the identifier `node` declares in `scope` comes into scope."""
    n = node.parent
    while n is not None and n != scope:
        if n.type in _DECLARING:
            return n.end_byte
        n = n.parent
    if scope.type == "type_switch_statement":  # `switch v := v.(type) {`: the clauses
        brace = next((c for c in scope.children if c.type == "{"), None)
        return brace.start_byte if brace is not None else scope.end_byte
    return scope.start_byte


def redeclares(node: Node) -> bool:
    """Whether the identifier `node` is on the left of a `:=` (which assigns it where its block declares it)."""
    parent = node.parent
    holder = parent.parent if parent is not None else None
    if parent is None or holder is None or holder.type != "short_var_declaration":
        return False
    return holder.child_by_field_name("left") == parent


def declares(clause: Node) -> bool:
    """Whether a range clause or a select case's receive declares its left side (`:=`) rather than assigns it."""
    return any(c.type == ":=" for c in clause.children)


def key_kind(node: Node) -> str | None:
    """For an identifier: "field" when it is a composite literal's key naming a field, "unknown" when it is a key
    that may name a field or be a variable, None when it is no key or a key that is an expression."""
    element, keyed = node.parent, node.parent.parent if node.parent is not None else None
    if element is None or element.type != "literal_element" or keyed is None or keyed.type != "keyed_element":
        return None
    if keyed.child_by_field_name("key") != element or len(element.named_children) != 1:
        return None
    body = keyed.parent
    kind = _key_of(_literal_type(body) if body is not None else None, _text(node), 0)
    return None if kind == "expression" else kind


def _key_of(type_node: Node | None, key: str, depth: int) -> str:
    if type_node is None or depth > 8:
        return "unknown"
    if type_node.type == "struct_type":
        return "field"
    if type_node.type in _INDEXED:
        return "expression"
    if type_node.type == "qualified_type":  # another package's: an unexported field cannot be a key
        return "expression" if key[:1].islower() or key[:1] == "_" else "unknown"
    if type_node.type == "generic_type":
        return _key_of(type_node.child_by_field_name("type"), key, depth + 1)
    if type_node.type == "type_identifier":
        return _key_of(_declared_type(type_node), key, depth + 1)
    return "unknown"


def _declared_type(name: Node) -> Node | None:
    """The type that the file's only declaration of the type `name` gives it (a `type` spec or alias)."""
    root = name
    while root.parent is not None:
        root = root.parent
    text, found, stack = _text(name), [], [root]
    while stack:
        n = stack.pop()
        if n.type in ("type_spec", "type_alias"):
            spec_name = n.child_by_field_name("name")
            if spec_name is not None and _text(spec_name) == text:
                found.append(n.child_by_field_name("type"))
            continue
        stack.extend(n.children)
    return found[0] if len(found) == 1 else None


def _literal_type(body: Node) -> Node | None:
    """The type of the composite literal whose body (a literal_value) is `body`, through elided element types."""
    parent = body.parent
    if parent is not None and parent.type == "composite_literal":
        return parent.child_by_field_name("type")
    if parent is None or parent.type != "literal_element" or parent.parent is None:
        return None
    holder: Node | None = parent.parent
    role = "element"
    if holder is not None and holder.type == "keyed_element":
        role = "key" if holder.child_by_field_name("key") == parent else "element"
        holder = holder.parent
    if holder is None or holder.type != "literal_value":
        return None
    outer = _literal_type(holder)
    for _ in range(8):  # a declared name, or a pointer (`[]*T{{...}}` elides `&T`), to the type it stands for
        if outer is not None and outer.type == "type_identifier":
            outer = _declared_type(outer)
        elif outer is not None and outer.type == "generic_type":
            outer = outer.child_by_field_name("type")
        else:
            break
    if outer is None or outer.type not in _INDEXED:
        return None
    if outer.type == "map_type":
        element = outer.child_by_field_name("key" if role == "key" else "value")
    else:
        element = outer.child_by_field_name("element")
    if element is not None and element.type == "pointer_type":
        element = element.named_children[0] if element.named_children else None
    return element


def _text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "replace")
