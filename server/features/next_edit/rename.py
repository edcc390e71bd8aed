"""The renamed-identifier candidate: the user renamed one occurrence of a name, the others in its scope follow.

From the user's last edit (syntax/edit_history.py), mapped through the accepted suggestions after it: the
identifier it lies in now (`amount`) and the same identifier with the edit undone (`value`). When the old name was
a variable of a scope (a parameter, a local, a module-level name, a function or class), an attribute of `self`
(or of one variable, within its function) or a method, every other occurrence of it in that scope still carrying
the old name is a next edit; the nearest one after the edit is proposed, and after it is accepted the next request
proposes the following one (a chain). Not shown when the new name is already used in that scope (the edit may mean
something else), when the edited identifier is a use that follows a binding of the old name (a changed reference,
not a rename) or outside Python (scopes are Python's: features/next_edit/scopes.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tree_sitter import Node

from waferline.server.features.next_edit.scopes import (
    enclosing_function,
    in_parameters,
    is_binding,
    is_method,
    occurrences,
    scope_of,
)  # fmt: skip
from waferline.server.features.next_edit.source import Edit, Source, enclosing
from waferline.syntax.edit_history import EditEvent

IDENTIFIER = re.compile(r"(?:[^\W\d]|\$)[\w$]*\Z")  # `$`: JavaScript's (the node's type says it is a name)


@dataclass(frozen=True)
class Renamed:
    node: Node  # the edited identifier, as it is now
    old: str
    new: str
    chained: frozenset[int] = frozenset()  # starts of the occurrences accepted suggestions renamed since


def renamed_identifier(
    src: Source, start: int, end: int, event: EditEvent, chained: frozenset[int] = frozenset(),
    types: tuple[str, ...] = ("identifier",),
) -> Renamed | None:  # fmt: skip
    """The identifier (a node of one of `types`) that `[start, end)` (the event's new text, where it is now) lies
    in, and its name before."""
    for lo, hi in ((start, end), (max(0, start - 1), end), (start, end + 1)):
        node = src.node_at(lo, min(hi, len(src.text)))
        if node is None or node.type not in types:
            continue
        a, b = src.span(node)
        if a <= start and end <= b:
            old = src.text[a:start] + event.old + src.text[end:b]
            new = src.text[a:b]
            if old != new and IDENTIFIER.match(old):
                return Renamed(node, old, new, chained)
    return None


def rename_edits(src: Source, r: Renamed) -> list[Edit]:
    """Every other occurrence of the renamed name in its scope, in document order; [] when none or not exact."""
    node, parent = r.node, r.node.parent
    if parent is not None and parent.type == "attribute" and parent.child_by_field_name("attribute") == node:
        found = _attribute_uses(src, parent, r)
    elif parent is not None and parent.type == "keyword_argument":
        return []  # a call's keyword: the signature candidate's business
    elif parent is not None and parent.type == "function_definition" and is_method(parent):
        found = _method_uses(src, parent, r)
    else:
        found = _variable_uses(src, r)
    if found is None:
        return []
    return [Edit(*src.span(n), r.new) for n in found if n != node]


def _variable_uses(src: Source, r: Renamed) -> list[Node] | None:
    node = r.node
    function = in_parameters(node)
    if function is not None:  # a parameter: its function is the scope
        scope = function
    elif (
        node.parent is not None
        and node.parent.type in ("function_definition", "class_definition")
        and (node.parent.child_by_field_name("name") == node)
    ):
        scope = scope_of(node.parent)  # a def or class is a name of the scope around it
    else:
        scope = scope_of(node)
        if scope.type == "class_definition":
            return None  # class attributes are reached as `self.name` too: not renamed by scope alone
    old = occurrences(scope, r.old, src)
    if not old:
        return None
    if not is_binding(node) and old[0].start_byte < node.start_byte:
        return None  # a use after the name was bound: the user changed which variable it reads
    if taken(src, occurrences(scope, r.new, src), r):
        return None  # the new name is taken in this scope
    return old


def _attribute_uses(src: Source, attribute: Node, r: Renamed) -> list[Node] | None:
    obj = attribute.child_by_field_name("object")
    if obj is None or obj.type != "identifier":
        return None
    owner = src.node_text(obj)
    if owner in ("self", "cls"):
        scope = enclosing(attribute, ("class_definition",))
    else:
        scope = enclosing_function(attribute) or src.root
    if scope is None:
        return None
    found = _attributes_named(src, scope, owner, r.old)
    if not found or taken(src, _attributes_named(src, scope, owner, r.new), r):
        return None
    return found


def _method_uses(src: Source, function: Node, r: Renamed) -> list[Node] | None:
    cls = enclosing(function, ("class_definition",))
    if cls is None:
        return None
    found = _attributes_named(src, cls, "self", r.old)
    if not found or taken(src, _attributes_named(src, cls, "self", r.new), r):
        return None
    return found


def taken(src: Source, nodes: list[Node], r: Renamed) -> bool:
    """The new name was already there: an occurrence neither the user's edit nor the chain's suggestions made."""
    return any(n != r.node and src.offset(n.start_byte) not in r.chained for n in nodes)


def _attributes_named(src: Source, scope: Node, owner: str, name: str) -> list[Node]:
    out = []
    stack = [scope]
    while stack:
        n = stack.pop()
        if n.type == "attribute":
            obj, attr = n.child_by_field_name("object"), n.child_by_field_name("attribute")
            if (
                obj is not None and attr is not None and obj.type == "identifier" and src.node_text(obj) == owner
                and src.node_text(attr) == name
            ):  # fmt: skip
                out.append(attr)
        stack.extend(reversed(n.children))
    return sorted(out, key=lambda n: n.start_byte)
