"""The changed-signature candidate for Rust, Java, C and C++ (features/next_edit/signature.py is Python's).

The rules of signature_lexical.py (no keyword arguments): the old parameter list is the list with the user's edit
undone; a call in the file whose arguments bind to the old list and not to the new one is fixed. Removed: its
argument is deleted; added: the caller's own variable of that name, declared before the call in a scope around it
(features/next_edit/lexical_declared.py's scopes), is passed where the call's arguments reach it, else the call is
left alone; reordered: the arguments are permuted. The function is Rust's free `fn` (not in an `impl` or trait; the
only one of its name in the file) called as `name(...)`; a C function definition called as `name(...)` (none when a
`#define` spells the name: it may be a macro); a C++ free function whose name the file spells only at its
definition and plain calls (features/next_edit/lexical_cpp.py; a lambda passes the caller's variable only when it
captures it); a Java method, the only one of its name in its class, of a class that
extends nothing and imports nothing of that name, called as `name(...)` or `this.name(...)` in its class or in a
named class nested in it that extends nothing and declares no method of that name (not in an anonymous class, an
enum or a subclass: they may inherit one). Not followed: a caller that binds the name itself, `self` and patterns in
Rust's parameters, Java's varargs and receiver parameters, C's `...` and unnamed parameters, C++'s methods,
templates, overloads, default arguments and qualified calls, calls in Rust macros.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from tree_sitter import Node

from waferline.server.features.next_edit.lexical_cpp import CPP, only_called
from waferline.server.features.next_edit.lexical_declared import Scoping, declared_rename, occurrences, word
from waferline.server.features.next_edit.lexical_java_c import JAVA, C, defines_name
from waferline.server.features.next_edit.lexical_rust import RUST
from waferline.server.features.next_edit.signature import Args, Change, Param, fix_call
from waferline.server.features.next_edit.source import Edit, Source, enclosing, walk
from waferline.syntax.edit_history import EditEvent

_LISTS = {"rust": "parameters", "java": "formal_parameters", "c": "parameter_list", "cpp": "parameter_list"}
_WRAP = {"rust": "fn _f{} {{}}\n", "java": "class _C {{ void _f{} {{}} }}\n", "c": "void _f{} {{}}\n",
         "cpp": "void _f{} {{}}\n"}  # fmt: skip
_SCOPINGS: dict[str, Scoping] = {"rust": RUST, "java": JAVA, "c": C, "cpp": CPP}
_JAVA_BODIES = ("class_body", "interface_body", "enum_body")
_COMMENTS = ("comment", "line_comment", "block_comment", "attribute_item")
DECLARED: dict[str, Scoping] = {"rust": RUST, "java": JAVA, "c": C, "cpp": CPP}


def declared_edits(
    src: Source, language_id: str, start: int, end: int, event: EditEvent, chained: frozenset[int]
) -> tuple[list[tuple[str, Edit]], bool] | None:
    """Rust's, Java's, C's and C++'s structural edits after the user's `event` (its new text at `[start, end)`):
    a local's rename (features/next_edit/lexical_declared.py), else a signature's call sites, as (candidate, edit),
    and whether the edit was one of these (a rename of a local or parameter, a followed signature's change: the
    text substitution is not tried); None for another language."""
    sc = DECLARED.get(language_id)
    if sc is None:
        return None
    renames, local = declared_rename(src, sc, start, end, event, chained)
    if local:
        return [("rename", e) for e in renames], True
    change = declared_signature_change(src, language_id, start, end, event)
    if change is None:
        return [], False
    return [("signature", e) for e in declared_call_site_edits(src, language_id, change, chained)], True


def declared_signature_change(src: Source, language_id: str, start: int, end: int, event: EditEvent) -> Change | None:
    kind = _LISTS.get(language_id)
    if kind is None:
        return None
    node = src.node_at(start, end)
    params = node if node is not None and node.type == kind else enclosing(node, (kind,))
    if params is None:
        return None
    p0, p1 = src.span(params)
    if not (p0 <= start and end <= p1):
        return None
    function, name = _function(src, language_id, params)
    if function is None or not name:
        return None
    old_src = Source.parse(_WRAP[language_id].format(src.text[p0:start] + event.old + src.text[end:p1]), language_id)
    if old_src is None or old_src.root.has_error:
        return None
    old_params = next((n for n in walk(old_src.root) if n.type == kind), None)
    old = _params(old_src, language_id, old_params) if old_params is not None else None
    new = _params(src, language_id, params)
    if old is None or new is None or old == new:
        return None
    return Change(function, name, False, old, new)


def _function(src: Source, language_id: str, params: Node) -> tuple[Node | None, str]:
    """The function whose parameter list `params` is, and its name, when its calls are followed."""
    parent = params.parent
    if parent is None:
        return None, ""
    if language_id == "rust":
        holder = parent.parent
        if parent.type != "function_item" or parent.child_by_field_name("body") is None or holder is None:
            return None, ""
        if holder.type == "declaration_list" and (holder.parent is None or holder.parent.type != "mod_item"):
            return None, ""  # an impl's or a trait's method
        name = _name(src, parent)
        same = [n for n in _identifiers(src, name, src.root) if _parent_type(n) == "function_item"]
        return (parent, name) if len(same) == 1 else (None, "")
    if language_id == "java":
        body = parent.parent
        cls = body.parent if body is not None else None
        if parent.type != "method_declaration" or body is None or cls is None or cls.type != "class_declaration":
            return None, ""
        name = _name(src, parent)
        same = [n for n in body.named_children if n.type == "method_declaration" and _name(src, n) == name]
        imports = [n for n in src.root.named_children if n.type == "import_declaration"]
        if (
            len(same) != 1
            or cls.child_by_field_name("superclass") is not None
            or any(word(name).search(src.node_text(n)) for n in imports)
        ):
            return None, ""  # an overload, an inherited or imported method of the name may be called
        return parent, name
    declarator = parent
    if declarator.type != "function_declarator" or (ident := declarator.child_by_field_name("declarator")) is None:
        return None, ""
    child = declarator
    while child.parent is not None and child.parent.type in ("pointer_declarator", "attributed_declarator",
                                                             "reference_declarator"):  # fmt: skip
        child = child.parent
    function = child.parent
    if function is None or function.type != "function_definition" or ident.type != "identifier":
        return None, ""
    name = src.node_text(ident)
    if defines_name(src, name):
        return None, ""  # a macro of the name may be what is called
    if language_id == "cpp" and not only_called(src, function, ident, name):
        return None, ""
    return function, name


def _parent_type(node: Node) -> str:
    return node.parent.type if node.parent is not None else ""


def _name(src: Source, node: Node) -> str:
    name = node.child_by_field_name("name")
    return src.node_text(name) if name is not None else ""


def _params(src: Source, language_id: str, params: Node) -> tuple[Param, ...] | None:
    out: list[Param] = []
    items = [p for p in params.named_children if p.type not in _COMMENTS]
    if language_id == "c" and len(items) == 1 and src.node_text(items[0]).strip() == "void":
        return ()
    for p in items:
        if language_id == "rust":
            pattern = p.child_by_field_name("pattern") if p.type == "parameter" else None
        elif language_id == "java":
            pattern = p.child_by_field_name("name") if p.type == "formal_parameter" else None
        else:
            pattern = p.child_by_field_name("declarator") if p.type == "parameter_declaration" else None
            while pattern is not None and pattern.type in ("pointer_declarator", "array_declarator",
                                                           "reference_declarator"):  # fmt: skip
                pattern = (pattern.named_children[-1] if pattern.type == "reference_declarator"
                           else pattern.child_by_field_name("declarator"))  # fmt: skip
        if pattern is None or pattern.type != "identifier":
            return None  # `self`, a pattern, varargs, an unnamed or function pointer parameter
        out.append(Param(src.node_text(pattern), False))
    if len({p.name for p in out}) != len(out):
        return None
    return tuple(out)


def declared_call_site_edits(src: Source, language_id: str, change: Change, chained: frozenset[int]) -> list[Edit]:
    sc = _SCOPINGS[language_id]
    out: list[Edit] = []
    binders: dict[int, bool] = {}
    for call, args_node in _calls(src, language_id, change):
        if _binds_in_caller(src, sc, call, change.name, binders):
            continue  # the caller's own variable of the name is what it calls
        every = [a for a in args_node.named_children if a.type not in _COMMENTS]
        fix = fix_call(src, change, call, args_node, Args(every, {}, every), chained, _has_variable(sc), False)
        out.extend(fix or [])
    return out


def _calls(src: Source, language_id: str, change: Change) -> Iterator[tuple[Node, Node]]:
    """The calls of the function by name: in the file (Rust, C), in its class but not a nested one (Java)."""
    body = change.function.parent if language_id == "java" else src.root
    if body is None:
        return
    for n in _identifiers(src, change.name, body):
        call = n.parent
        if call is None:
            continue
        if language_id == "java":
            obj = call.child_by_field_name("object")
            if call.type != "method_invocation" or call.child_by_field_name("name") != n:
                continue
            if obj is not None and (obj.type != "this" or enclosing(n, _JAVA_BODIES) != body):
                continue  # another object's method (a nested class's `this` is that class's)
            if not _reaches(src, n, body, change.name):
                continue  # a nested class's method
        elif call.type != "call_expression" or call.child_by_field_name("function") != n:
            continue
        args = call.child_by_field_name("arguments")
        if args is not None:
            yield call, args


def _reaches(src: Source, call: Node, body: Node, name: str) -> bool:
    """A Java call `name(...)` at `call` names a method of the class whose body is `body`: it lies in that body, or
    in named classes nested in it that extend nothing and declare no method of the name (Java looks for the name in
    the innermost class that has it; an anonymous class, an enum or a subclass may inherit one)."""
    inner = enclosing(call, _JAVA_BODIES)
    while inner is not None and inner != body:
        cls = inner.parent
        if inner.type != "class_body" or cls is None or cls.type != "class_declaration":
            return False
        if cls.child_by_field_name("superclass") is not None or any(
            m.type == "method_declaration" and _name(src, m) == name for m in inner.named_children
        ):
            return False
        inner = enclosing(inner, _JAVA_BODIES)
    return inner == body


def _identifiers(src: Source, name: str, within: Node) -> Iterator[Node]:
    return (n for n, exact in occurrences(src, (name,), within.start_byte, within.end_byte) if exact)


def _binds_in_caller(src: Source, sc: Scoping, call: Node, name: str, known: dict[int, bool]) -> bool:
    caller = enclosing(call, sc.functions)
    while caller is not None:
        if caller.id not in known:
            known[caller.id] = any(sc.binds(n) for n in _identifiers(src, name, caller))
        if known[caller.id]:
            return True
        caller = enclosing(caller, sc.functions)
    return False


def _has_variable(sc: Scoping) -> Callable[[Source, Node, str], bool]:
    def has_variable(src: Source, call: Node, name: str) -> bool:
        """A variable `name` declared before the call, in a scope around it."""
        caller = enclosing(call, sc.functions)
        while (caller is not None and caller.parent is not None and enclosing(caller, sc.functions) is not None
               and sc.closure_reads(src, caller, name)):  # fmt: skip
            caller = enclosing(caller, sc.functions)  # the outermost function: a closure reads its variables too
        if caller is None:
            return False
        for n in _identifiers(src, name, caller):
            scope = sc.declared_at(src, n) if n.start_byte < call.start_byte else None
            if scope is not None and scope.start <= call.start_byte < scope.end:
                return True
        return False

    return has_variable
