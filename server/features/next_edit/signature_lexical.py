"""The changed-signature candidate for JavaScript, TypeScript and Go (features/next_edit/signature.py is Python's).

The same rules on a language without keyword arguments: the old parameter list is the list with the user's edit
undone; a call needs a fix when its arguments bind to the old list and not to the new one. Removed: the argument is
deleted; added without a default: the caller's own variable of that name, declared before the call in a scope
around it, is passed where the call's arguments reach it (else the call is left alone); reordered: the arguments
are permuted; renamed: nothing to fix at a call. The function is a `function` declaration (or Go's `func`), called
as `name(...)` where its name is that function (features/next_edit/lexical.py's scopes: a nested declaration of the
name hides it), or a JavaScript class method called as `this.name(...)` in its class. Rest parameters, destructured
or unnamed parameters, Go's variadic parameters and methods, and calls with spread arguments are left alone.
"""

from __future__ import annotations

from collections.abc import Callable

from tree_sitter import Node

from waferline.server.features.next_edit.lexical import (
    GO,
    Rules,
    class_member,
    declarations,
    variable_uses,
)  # fmt: skip
from waferline.server.features.next_edit.signature import Args, Change, Param, fix_call
from waferline.server.features.next_edit.source import Edit, Source, enclosing, walk
from waferline.syntax.edit_history import EditEvent

PARAMETER_LISTS = ("formal_parameters", "parameter_list")
_FUNCTIONS = ("function_declaration", "generator_function_declaration", "method_definition")


def lexical_signature_change(
    src: Source, language_id: str, rules: Rules, start: int, end: int, event: EditEvent
) -> Change | None:
    node = src.node_at(start, end)
    params = node if node is not None and node.type in PARAMETER_LISTS else enclosing(node, PARAMETER_LISTS)
    function = params.parent if params is not None else None
    if params is None or function is None or function.type not in _FUNCTIONS:
        return None
    if function.child_by_field_name("parameters") != params:
        return None  # Go's receiver, or a type's parameters
    p0, p1 = src.span(params)
    if not (p0 <= start and end <= p1):
        return None
    name_node = function.child_by_field_name("name")
    old_text = src.text[p0:start] + event.old + src.text[end:p1]
    wrapper = f"package p\n\nfunc _f{old_text} {{}}\n" if rules is GO else f"function _f{old_text} {{}}\n"
    old_src = Source.parse(wrapper, language_id)
    if old_src is None or old_src.root.has_error or name_node is None:
        return None
    old_function = next((n for n in old_src.root.named_children if n.type == "function_declaration"), None)
    old_params = old_function.child_by_field_name("parameters") if old_function is not None else None
    old = _params(old_params, old_src, rules) if old_params is not None else None
    new = _params(params, src, rules)
    if old is None or new is None or old == new:
        return None
    return Change(function, src.node_text(name_node), function.type == "method_definition", old, new)


def _params(params: Node, src: Source, rules: Rules) -> tuple[Param, ...] | None:
    out: list[Param] = []
    for p in params.named_children:
        if p.type == "comment":
            continue
        if rules is GO:
            names = p.children_by_field_name("name") if p.type == "parameter_declaration" else []
            if not names:
                return None  # unnamed or variadic
            out.extend(Param(src.node_text(n), False) for n in names)
            continue
        if p.type == "identifier":
            out.append(Param(src.node_text(p), False))
        elif p.type == "assignment_pattern" and (left := p.child_by_field_name("left")) is not None:
            if left.type != "identifier":
                return None
            out.append(Param(src.node_text(left), True))
        elif p.type in ("required_parameter", "optional_parameter"):
            pattern = p.child_by_field_name("pattern")
            if pattern is None or pattern.type != "identifier":
                return None  # rest, destructured, `this`
            default = p.type == "optional_parameter" or p.child_by_field_name("value") is not None
            out.append(Param(src.node_text(pattern), default))
        else:
            return None  # rest or destructured
    if len({p.name for p in out}) != len(out):
        return None
    return tuple(out)


def lexical_call_site_edits(src: Source, rules: Rules, change: Change, chained: frozenset[int]) -> list[Edit]:
    out: list[Edit] = []
    for call in _calls(src, rules, change):
        args_node = call.child_by_field_name("arguments")
        if args_node is None or args_node.type != rules.arguments:
            continue
        args = _arguments(args_node)
        if args is None:
            continue
        fix = fix_call(src, change, call, args_node, args, chained, _has_variable(rules), keywords=False)
        out.extend(fix or [])
    return out


def _calls(src: Source, rules: Rules, change: Change) -> list[Node]:
    out = []
    if change.method:
        name_node = change.function.child_by_field_name("name")
        body = class_member(name_node) if name_node is not None else None
        if body is None:
            return []
        for n in walk(body):
            f = n.child_by_field_name("function") if n.type == "call_expression" else None
            if f is not None and f.type == "member_expression":
                prop = f.child_by_field_name("property")
                if prop is not None and src.node_text(prop) == change.name and class_member(prop) == body:
                    out.append(n)
        return out
    name_node = change.function.child_by_field_name("name")
    uses = variable_uses(src, rules, name_node, change.name) if name_node is not None else None
    ids = {(u.start_byte, u.end_byte) for u in uses or []}
    for n in walk(src.root):
        f = n.child_by_field_name("function") if n.type == "call_expression" else None
        if f is not None and f.type == "identifier" and (f.start_byte, f.end_byte) in ids:
            out.append(n)
    return out


def _arguments(args: Node) -> Args | None:
    every = []
    for a in args.children:
        if a.type in ("spread_element", "..."):
            return None
        if a.is_named and a.type != "comment":
            every.append(a)
    return Args(every, {}, every)


def _has_variable(rules: Rules) -> Callable[[Source, Node, str], bool]:
    def has_variable(src: Source, call: Node, name: str) -> bool:
        """A declaration of `name` before the call, in a scope around it."""
        decls = declarations(src, rules, name)
        return decls is not None and any(
            d.node.start_byte < call.start_byte and d.scope.start_byte <= call.start_byte < d.scope.end_byte
            for d in decls
        )

    return has_variable
