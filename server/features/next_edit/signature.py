"""The changed-signature candidate: the user added, removed, renamed or reordered a parameter of a Python function,
and the calls that no longer match the new signature follow.

The old signature is the parameter list with the user's edit undone; a call site needs a fix when its arguments
bind to the old signature and not to the new one (Python's rules for plain and defaulted parameters: at most that
many positional arguments, keywords that name a parameter not already given, every required parameter given). The
fix is exact or not proposed:

- removed: its positional argument (with one comma) or its keyword argument is deleted;
- renamed: its keyword argument is renamed (the uses in the body are the rename candidate's);
- added without a default: the call passes the caller's own variable of that name (a parameter or local of the
  calling function, or a module-level name), positionally where the call's positional arguments reach it, else as
  `name=name`; a call whose caller has no such variable is left alone (the value cannot be known);
- reordered: the positional arguments are permuted to match (calls a suggestion already fixed are not fixed again).

Signatures with `*args`, `**kwargs`, `/` or `*` and calls with `*`/`**` arguments are left alone. Calls are
`name(...)` for a module-level function (also in other files that import it with `from <module> import name`,
where `<module>` ends with this file's name: features/next_edit/elsewhere.py, a code action's multi-file edit),
and `self.name(...)` inside the class for a method.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from tree_sitter import Node

from waferline.server.features.next_edit.scopes import binds, enclosing_function, is_method, is_name, scope_of
from waferline.server.features.next_edit.source import Edit, Source, enclosing, walk
from waferline.syntax.edit_history import EditEvent


@dataclass(frozen=True)
class Param:
    name: str
    has_default: bool


@dataclass(frozen=True)
class Change:
    function: Node
    name: str  # the function's name
    method: bool  # called as self.name(...)
    old: tuple[Param, ...]
    new: tuple[Param, ...]


def signature_change(src: Source, start: int, end: int, event: EditEvent) -> Change | None:
    """The signature change the event made, when its new text lies in a function's parameter list."""
    node = src.node_at(start, end)
    params = node if node is not None and node.type == "parameters" else enclosing(node, ("parameters",))
    if params is None or params.parent is None or params.parent.type != "function_definition":
        return None
    p0, p1 = src.span(params)
    if not (p0 <= start and end <= p1):
        return None
    new = _params(params, src)
    old_text = src.text[p0:start] + event.old + src.text[end:p1]
    old_src = Source.parse(f"def _f{old_text}: pass\n", "python")
    if old_src is None or old_src.root.has_error:
        return None
    old_params = old_src.root.children[0].child_by_field_name("parameters")
    old = _params(old_params, old_src) if old_params is not None else None
    function, name_node = params.parent, params.parent.child_by_field_name("name")
    if old is None or new is None or old == new or name_node is None:
        return None
    method = is_method(function)
    if method:
        if not old or not new or old[0].name not in ("self", "cls") or old[0] != new[0]:
            return None
        old, new = old[1:], new[1:]
    return Change(function, src.node_text(name_node), method, old, new)


def call_site_edits(src: Source, change: Change, chained: frozenset[int], uri: str | None = None) -> list[Edit]:
    """The fixes of the calls in `src` (the document itself, or another one at `uri`) that no longer match."""
    out: list[Edit] = []
    for call in _calls(src, change):
        args = call.child_by_field_name("arguments")
        if args is None or args.type != "argument_list":
            continue
        fix = _fix(src, change, call, args, chained)
        if fix is not None:
            out.extend(Edit(e.start, e.end, e.new, uri) for e in fix)
    return out


def _params(params: Node, src: Source) -> tuple[Param, ...] | None:
    out = []
    for p in params.named_children:
        if p.type == "identifier":
            out.append(Param(src.node_text(p), False))
        elif p.type == "typed_parameter" and p.named_children and p.named_children[0].type == "identifier":
            out.append(Param(src.node_text(p.named_children[0]), False))
        elif p.type in ("default_parameter", "typed_default_parameter"):
            name = p.child_by_field_name("name")
            if name is None or name.type != "identifier":
                return None
            out.append(Param(src.node_text(name), True))
        elif p.type != "comment":
            return None  # *args, **kwargs, / or *: not followed
    if len({p.name for p in out}) != len(out):
        return None
    return tuple(out)


def _calls(src: Source, change: Change) -> Iterator[Node]:
    scope = enclosing(change.function, ("class_definition",)) if change.method else src.root
    if scope is None:
        return
    for n in walk(scope):
        if n.type != "call":
            continue
        f = n.child_by_field_name("function")
        if f is None:
            continue
        if change.method:
            obj, attr = f.child_by_field_name("object"), f.child_by_field_name("attribute")
            if (
                f.type == "attribute"
                and obj is not None
                and attr is not None
                and src.node_text(obj) == "self"
                and (src.node_text(attr) == change.name)
            ):
                yield n
        elif f.type == "identifier" and is_name(f) and src.node_text(f) == change.name:
            caller = scope_of(n)
            if caller.type == "module" or not _rebinds(caller, change.name, src):
                yield n


def _rebinds(scope: Node, name: str, src: Source) -> bool:
    while scope.type != "module":
        if binds(scope, name, src):
            return True
        scope = scope_of(scope)
    return False


@dataclass(frozen=True)
class Args:
    positional: list[Node]
    keywords: dict[str, Node]  # name -> keyword_argument node
    all: list[Node]


def _arguments(args: Node, src: Source) -> Args | None:
    positional, keywords, every = [], {}, []
    for a in args.named_children:
        if a.type == "comment":
            continue
        if a.type in ("list_splat", "dictionary_splat", "parenthesized_list_splat"):
            return None
        every.append(a)
        if a.type == "keyword_argument":
            name = a.child_by_field_name("name")
            if name is None:
                return None
            keywords[src.node_text(name)] = a
        elif keywords:
            return None  # a positional argument after a keyword: not valid Python
        else:
            positional.append(a)
    return Args(positional, keywords, every)


def binds_params(params: tuple[Param, ...], args: Args) -> bool:
    names = [p.name for p in params]
    if len(args.positional) > len(params):
        return False
    given = set(names[: len(args.positional)])
    for k in args.keywords:
        if k not in names or k in given:
            return False
        given.add(k)
    return all(p.name in given or p.has_default for p in params)


def _fix(src: Source, change: Change, call: Node, args_node: Node, chained: frozenset[int]) -> list[Edit] | None:
    args = _arguments(args_node, src)
    if args is None:
        return None
    return fix_call(src, change, call, args_node, args, chained, _python_variable)


def _python_variable(src: Source, call: Node, name: str) -> bool:
    """The calling function (or the module) has a variable `name` of its own to pass."""
    caller = enclosing_function(call)
    return (caller is not None and binds(caller, name, src)) or binds_module(src, name)


def fix_call(
    src: Source, change: Change, call: Node, args_node: Node, args: Args, chained: frozenset[int],
    has_variable: Callable[[Source, Node, str], bool], keywords: bool = True,
) -> list[Edit] | None:  # fmt: skip
    """The edits that make one call, whose arguments are `args`, bind to the new signature as it bound to the old
    one; None when there are none or they are not known (`keywords`: the language has keyword arguments)."""
    old_names, new_names = [p.name for p in change.old], [p.name for p in change.new]
    if sorted(old_names) == sorted(new_names) and old_names != new_names:  # reordered
        a0, a1 = src.span(args_node)
        if any(a0 <= c < a1 for c in chained) or len(args.positional) < 2:
            return None
        return reorder_arguments(src, args, old_names, new_names)
    if not binds_params(change.old, args) or binds_params(change.new, args):
        return None
    removed = [n for n in old_names if n not in new_names]
    added = [p for p in change.new if p.name not in old_names]
    if len(removed) == 1 and len(added) == 1 and len(old_names) == len(new_names):  # renamed
        kw = args.keywords.get(removed[0])
        name = kw.child_by_field_name("name") if kw is not None else None
        return None if name is None else [Edit(*src.span(name), added[0].name)]
    if len(removed) == 1 and not added:
        return remove_argument(src, args, old_names.index(removed[0]), removed[0])
    if len(added) == 1 and not removed and not added[0].has_default:
        index, param = new_names.index(added[0].name), added[0].name
        if not has_variable(src, call, param) or (not keywords and index > len(args.positional)):
            return None
        return _add(src, args_node, args, index, param)
    return None


def remove_argument(src: Source, args: Args, index: int, name: str) -> list[Edit] | None:
    target = args.keywords.get(name) or (args.positional[index] if index < len(args.positional) else None)
    if target is None:
        return None
    i = args.all.index(target)
    if i + 1 < len(args.all):
        return [Edit(src.span(target)[0], src.span(args.all[i + 1])[0], "")]
    if i > 0:
        return [Edit(src.span(args.all[i - 1])[1], src.span(target)[1], "")]
    return [Edit(*src.span(target), "")]


def _add(src: Source, args_node: Node, args: Args, index: int, name: str) -> list[Edit] | None:
    arg = name if index <= len(args.positional) else f"{name}={name}"
    if index < len(args.all) and index <= len(args.positional):
        return [Edit(src.span(args.all[index])[0], src.span(args.all[index])[0], f"{arg}, ")]
    if args.all:
        end = src.span(args.all[-1])[1]
        return [Edit(end, end, f", {arg}")]
    inside = src.span(args_node)[0] + 1
    return [Edit(inside, inside, arg)]


def binds_module(src: Source, name: str) -> bool:
    return src.root.type == "module" and binds(src.root, name, src)


def reorder_arguments(src: Source, args: Args, old_names: list[str], new_names: list[str]) -> list[Edit] | None:
    k = len(args.positional)
    order = [old_names.index(n) for n in new_names[:k]]
    if sorted(order) != list(range(k)) or order == list(range(k)):
        return None  # the permutation moves a parameter the call passes by position out of its reach
    texts = [src.node_text(a) for a in args.positional]
    first = next(j for j in range(k) if order[j] != j)
    last = max(j for j in range(k) if order[j] != j)
    pieces = []
    for j in range(first, last + 1):
        pieces.append(texts[order[j]])
        if j < last:
            pieces.append(src.text[src.span(args.positional[j])[1] : src.span(args.positional[j + 1])[0]])
    return [Edit(src.span(args.positional[first])[0], src.span(args.positional[last])[1], "".join(pieces))]


def imports_from(src: Source, stem: str, name: str) -> bool:
    """`src` has `from <...stem> import name` at its top level."""
    for n in src.root.children:
        if n.type != "import_from_statement":
            continue
        module = n.child_by_field_name("module_name")
        if module is None or src.node_text(module).rsplit(".", 1)[-1] != stem:
            continue
        for imported in n.children_by_field_name("name"):
            if imported.type == "dotted_name" and src.node_text(imported) == name:
                return True
    return False
