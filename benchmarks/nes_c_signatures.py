"""The signature cases of `waferline eval-nes` for C and C++ (categories add-parameter-c, add-parameter-cpp), found
and checked by clang (libclang, as benchmarks/nes_c_renames.py), independently of the tree-sitter code under test
(server/features/next_edit/signature_declared.py).

A function defined in the file gets a parameter added at the end (the user's edit: `, TYPE NAME` typed after its
last parameter), NAME and TYPE those of a parameter that every function calling it has (the callers pass their own
variable, as Python's add-parameter cases do), and the whole file as intended passes NAME as the last argument of
every call. Taken only when clang sees every mention of the function: its name's every token in the file (raw
tokens: a branch `#if` leaves out, a prototype, a use as a pointer, a macro's body count too, not comments) is its
definition's or the callee of a call clang resolves to it, spelled in the file with its arguments; each caller is a
function defined in the file whose parameter of that name no other declaration in it shadows and which holds no
preprocessor line; the function has named parameters, no `...`, no token of the name in its own body (a global it
reads would be shadowed); and the intended file parses with no more errors than the original (clang parses it
again: a type that does not fit the callers' arguments is an error). C++: the function is a free function (at file
or namespace scope, not a template nor a method; its callers may be methods), each call spelled `name(...)` (not
`ns::name(...)`), every call clang resolves to that very function (not an overload).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from waferline.benchmarks.nes_c_renames import _spelling, compile_args, definitions
from waferline.benchmarks.nes_cases_go import char_offsets

PER_FILE = 2  # cases from one file


_FILE_SCOPES = ("TRANSLATION_UNIT", "NAMESPACE", "LINKAGE_SPEC", "UNEXPOSED_DECL")


def _parse(path: Path, includes: list[Path], text: str | None = None, language: str = "c") -> Any:
    from clang.cindex import Index

    unsaved = [(str(path), text)] if text is not None else None
    return Index.create().parse(str(path), args=compile_args(language, includes), unsaved_files=unsaved)


def _errors(tu: Any) -> int:
    return sum(1 for d in tu.diagnostics if d.severity >= 3)


def additions(path: Path, includes: list[Path], language: str = "c") -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The add-parameter candidates of one C (C++: `language` "cpp") file: [{function, at, text, variable, calls}] in
    characters (`text`: what the user types at `at`; `calls`: where the intended file inserts `, NAME`), and why
    others were left out."""
    from clang.cindex import CursorKind

    tu = _parse(path, includes, language=language)
    name, data = str(path), path.read_bytes()
    chars = char_offsets(data)
    skipped: dict[str, int] = {}
    if any(d.severity >= 4 for d in tu.diagnostics):
        return [], {"a fatal error in the file (a header not found)": 1}
    callers = definitions(tu, name, language)
    functions = [c for c in callers if c.kind == CursorKind.FUNCTION_DECL and c.lexical_parent is not None
                 and c.lexical_parent.kind.name in _FILE_SCOPES]  # fmt: skip
    tokens = [t for t in tu.get_tokens(extent=tu.cursor.extent) if t.kind.name == "IDENTIFIER"
              and t.location.file is not None and t.location.file.name == name]  # fmt: skip
    calls: dict[str, list[tuple[Any, Any]]] = {}  # function name: (call, caller)
    for caller in callers:
        for c in caller.walk_preorder():
            callee = c.referenced if c.kind == CursorKind.CALL_EXPR else None
            if callee is not None and callee.kind == CursorKind.FUNCTION_DECL:
                calls.setdefault(c.referenced.spelling, []).append((c, caller))
    out: list[dict[str, Any]] = []
    for fn in functions:
        found = calls.get(fn.spelling, [])
        if language == "cpp" and any(c.referenced.canonical != fn.canonical or _qualified(c, data) for c, _ in found):
            skipped["an overload's or a qualified call"] = skipped.get("an overload's or a qualified call", 0) + 1
            continue
        why = _why_not(fn, found, tokens, data, name)
        if isinstance(why, str):
            skipped[why] = skipped.get(why, 0) + 1
            continue
        at, typed, variable, inserts = why
        target = data
        for i in sorted(inserts, reverse=True):
            target = target[:i] + b", " + variable.encode() + target[i:]
        target = target[:at] + b", " + typed.encode() + target[at:]
        if _errors(_parse(path, includes, target.decode("utf-8"), language)) > _errors(tu):
            skipped["the intended file does not compile"] = skipped.get("the intended file does not compile", 0) + 1
            continue
        out.append({"function": fn.spelling, "at": chars[at], "text": ", " + typed, "variable": variable,
                    "calls": [chars[i] for i in inserts]})  # fmt: skip
        if len(out) >= PER_FILE:
            break
    return out, skipped


def _qualified(call: Any, data: bytes) -> bool:
    """The call's callee is spelled after `::`, `.` or `->` (C++'s `ns::f(x)`)."""
    at = _spelling(call)[1]
    return data[:at].rstrip().endswith((b"::", b".", b"->"))


def _why_not(fn: Any, calls: list[tuple[Any, Any]], tokens: list[Any], data: bytes,
             name: str) -> str | tuple[int, str, str, list[int]]:  # fmt: skip
    """Why `fn` makes no case, or (where the user types, what, the callers' variable, where the calls get it) in
    bytes."""
    from clang.cindex import CursorKind

    params = [c for c in fn.get_children() if c.kind == CursorKind.PARM_DECL]
    if not calls:
        return "not called in the file"
    if not params or any(not p.spelling for p in params) or fn.type.is_function_variadic():
        return "no named parameters, or `...`"
    f0, f1 = fn.extent.start.offset, fn.extent.end.offset
    mentions = {t.location.offset for t in tokens if t.spelling == fn.spelling}
    callees = set()
    for call, _ in calls:
        where = _spelling(call)
        if where[0] != name or data[where[1] : where[1] + len(fn.spelling)] != fn.spelling.encode():
            return "a call not spelled in the file"
        callees.add(where[1])
    if mentions != callees | {_spelling(fn)[1]}:
        return "a mention of the function that is not a call clang sees"
    shared: set[str] | None = None
    callers = {c.hash: c for _, c in calls}
    for caller in callers.values():
        c0, c1 = caller.extent.start.offset, caller.extent.end.offset
        if caller.hash == fn.hash or re.search(rb"^[ \t]*#", data[c0:c1], re.M):
            return "a recursive call, or a caller with a preprocessor line"
        own = {p.spelling for p in caller.get_children() if p.kind == CursorKind.PARM_DECL and p.spelling}
        declared = [d.spelling for d in caller.walk_preorder() if d.kind in (CursorKind.PARM_DECL, CursorKind.VAR_DECL)]
        own = {n for n in own if declared.count(n) == 1}
        shared = own if shared is None else shared & own
    body = {t.spelling for t in tokens if f0 <= t.location.offset < f1}
    for n in sorted((shared or set()) - body):
        decls = [p for c in callers.values() for p in c.get_children() if p.kind == CursorKind.PARM_DECL
                 and p.spelling == n]  # fmt: skip
        texts = {data[p.extent.start.offset : p.extent.end.offset].decode("utf-8") for p in decls}
        if len({p.type.get_canonical().spelling for p in decls}) != 1 or len(texts) != 1:
            continue  # the callers' variables differ in type (or are spelled differently)
        typed = " ".join(texts.pop().split())
        if "(" in typed or "[" in typed or not typed.endswith(n):
            continue  # a function pointer's or an array's declarator: not `TYPE NAME`
        inserts = []
        for call, _ in calls:
            args = list(call.get_arguments())
            if len(args) != len(params):
                break
            last = args[-1]
            if _spelling(last)[0] != name or last.extent.end.file is None or last.extent.end.file.name != name:
                break
            inserts.append(last.extent.end.offset)
        else:
            return params[-1].extent.end.offset, typed, n, inserts
        return "a call's arguments not spelled in the file"
    return "no parameter that every caller has"
