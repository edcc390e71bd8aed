"""The renamed-identifier candidate for JavaScript, TypeScript and Go (features/next_edit/rename.py is Python's).

The same contract: the identifier the user's edit lies in now and its name before; when it was a declaration (a
parameter, a local or top-level variable, a function), every other identifier of that variable in its scope
(features/next_edit/lexical.py) still carrying the old name is a next edit, nearest after the edit first; in
JavaScript and TypeScript a class member (`this.name`, a field, a method) is followed through its class. Not shown
when the new name is already spelled in that scope, when the edited identifier is a use rather than a declaration
(the user changed which variable it reads), or when the rename would not be exact (lexical.py's refusals).
"""

from __future__ import annotations

from tree_sitter import Node

from waferline.server.features.next_edit.lexical import (
    Rules,
    class_member,
    declared_in,
    member_uses,
    name_used,
    variable_uses,
)  # fmt: skip
from waferline.server.features.next_edit.rename import Renamed, taken
from waferline.server.features.next_edit.source import Edit, Source

IDENTIFIER_TYPES = ("identifier", "property_identifier", "private_property_identifier")


def lexical_rename_edits(src: Source, rules: Rules, r: Renamed) -> list[Edit]:
    found = _member(src, r) if r.node.type != "identifier" else _variable(src, rules, r)
    if found is None:
        return []
    return [Edit(*src.span(n), r.new) for n in found if n != r.node]


def _variable(src: Source, rules: Rules, r: Renamed) -> list[Node] | None:
    scope = declared_in(r.node, rules)
    if scope is None:
        return None  # a use: renaming it changes which variable it reads
    old = variable_uses(src, rules, r.node, r.old)
    if not old or taken(src, name_used(src, scope, r.new), r):
        return None
    return old


def _member(src: Source, r: Renamed) -> list[Node] | None:
    body = class_member(r.node)
    if body is None:
        return None
    found = member_uses(src, body, r.old)
    if not found:
        return None
    new = member_uses(src, body, r.new)
    if new is None or taken(src, new, r):
        return None
    return found
