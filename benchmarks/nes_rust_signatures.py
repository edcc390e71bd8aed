"""The signature cases of `waferline eval-nes` for Rust (category add-parameter-rust), found in the file's syntax
tree and checked by rustc's type checker, independently of the tree-sitter code under test
(server/features/next_edit/signature_declared.py, lexical_rust.py).

A free function of the file (not an `impl`'s or a trait's; the only `fn` of its name in the file) gets a parameter
added at the end (the user's edit: `, NAME: TYPE` typed after its last parameter), NAME and TYPE those of a
parameter that every function calling it declares (the callers pass their own variable), and the whole file as
intended passes NAME as the last argument of every call. Taken only when every mention of the function's name in
the file is its definition or the callee of a plain call `name(...)` (no path, pointer, macro's token, comment or
string mention), each call lies in a function of the file (the innermost `fn`; closures are transparent) whose
parameter NAME is a plain identifier no pattern of that function binds again, the function holds no identifier
NAME, and the crate with the intended file type-checks (`rustc --emit=metadata`, as benchmarks/nes_rust_renames.py
runs it, with the original crate checking clean): a call the syntax tree missed (another file's, a path's) or
whose caller's variable does not fit fails to compile, and the case is dropped.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from waferline.benchmarks.nes_rust_renames import FEATURES

PER_FILE = 2
_PATTERNS = ("tuple_pattern", "tuple_struct_pattern", "struct_pattern", "field_pattern", "ref_pattern",
             "mut_pattern", "reference_pattern", "captured_pattern", "or_pattern", "slice_pattern",
             "let_declaration", "for_expression", "closure_parameters", "match_pattern", "let_condition",
             "parameter")  # fmt: skip


def type_checks(crate: Path, edition: str) -> bool:
    """The crate (a folder holding src/lib.rs) type-checks."""
    cfgs = [a for f in FEATURES for a in ("--cfg", f'feature="{f}"')]
    with tempfile.TemporaryDirectory() as out:
        cmd = ["rustc", "--crate-type", "lib", "--crate-name", "nes_case", "--edition", edition, *cfgs,
               "--cap-lints", "allow", "--emit=metadata", "-o", str(Path(out) / "lib.rmeta"),
               str(crate / "src" / "lib.rs")]  # fmt: skip
        return subprocess.run(cmd, capture_output=True, env={**os.environ, "RUSTC_BOOTSTRAP": "1"}).returncode == 0


def _parser() -> Any:
    import tree_sitter_rust
    from tree_sitter import Language, Parser

    return Parser(Language(tree_sitter_rust.language()))


def _text(data: bytes, node: Any) -> str:
    return data[node.start_byte : node.end_byte].decode("utf-8")


def _innermost_fn(node: Any) -> Any:
    n = node.parent
    while n is not None and n.type != "function_item":
        n = n.parent
    return n


def _identifiers(node: Any) -> list[Any]:
    out, stack = [], [node]
    while stack:
        n = stack.pop()
        if n.type == "identifier":
            out.append(n)
        stack.extend(n.children)
    return out


def _plain_params(data: bytes, fn: Any) -> list[tuple[str, str, Any]] | None:
    """(name, type text, node) of each parameter of `fn`, None when one is `self` or a pattern."""
    params = fn.child_by_field_name("parameters")
    out = []
    for p in params.named_children if params is not None else []:
        if p.type in ("line_comment", "block_comment"):
            continue
        if p.type != "parameter":
            return None  # `self`, an attribute, a variadic
        pattern, ty = p.child_by_field_name("pattern"), p.child_by_field_name("type")
        if pattern is None or ty is None or pattern.type != "identifier":
            return None
        out.append((_text(data, pattern), " ".join(_text(data, ty).split()), p))
    return out


def additions(path: Path, crate_copy: Path, relative: str, edition: str) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The add-parameter candidates of one file of the crate (`crate_copy`: a copy whose `relative` file is
    rewritten for each check, then restored), in characters; and why others were left out."""
    data = path.read_bytes()
    tree = _parser().parse(data)
    skipped: dict[str, int] = {}
    out: list[dict[str, Any]] = []
    fns = [n for n in _walk(tree.root_node) if n.type == "function_item"]
    for fn in fns:
        why = _why_not(data, fn, fns, tree.root_node)
        if isinstance(why, str):
            skipped[why] = skipped.get(why, 0) + 1
            continue
        at, typed, variable, inserts = why
        target = data
        for i in sorted([*inserts, at], reverse=True):
            target = target[:i] + (typed if i == at else ", " + variable).encode() + target[i:]
        (crate_copy / relative).write_bytes(target)
        try:
            fits = type_checks(crate_copy, edition)
        finally:
            (crate_copy / relative).write_bytes(data)
        if not fits:
            why = "the intended crate does not type-check"
            skipped[why] = skipped.get(why, 0) + 1
            continue
        chars = {b: len(data[:b].decode("utf-8")) for b in [at, *inserts]}
        out.append({"function": _text(data, fn.child_by_field_name("name")), "at": chars[at], "text": typed,
                    "variable": variable, "calls": [chars[i] for i in inserts]})  # fmt: skip
        if len(out) >= PER_FILE:
            break
    return out, skipped


def _walk(node: Any) -> list[Any]:
    out, stack = [], [node]
    while stack:
        n = stack.pop()
        out.append(n)
        stack.extend(reversed(n.children))
    return out


def _why_not(data: bytes, fn: Any, fns: list[Any], root: Any) -> str | tuple[int, str, str, list[int]]:
    name_node, body = fn.child_by_field_name("name"), fn.child_by_field_name("body")
    if (
        body is None
        or fn.parent is None
        or fn.parent.type not in ("source_file", "declaration_list")
        or (
            fn.parent.type == "declaration_list"
            and fn.parent.parent is not None
            and fn.parent.parent.type != "mod_item"
        )
    ):
        return "not a free function with a body"
    name = _text(data, name_node)
    if sum(1 for f in fns if _text(data, f.child_by_field_name("name")) == name) != 1:
        return "another fn of its name in the file"
    params = _plain_params(data, fn)
    if not params:
        return "self, a pattern or no parameter"
    mentions = [m.start() for m in re.finditer(rb"(?<![\w$])" + re.escape(name.encode()) + rb"(?![\w$])", data)]
    calls = []
    for at in mentions:
        node = root.descendant_for_byte_range(at, at + len(name))
        if node == name_node:
            continue
        call = node.parent
        if node.type != "identifier" or call is None or call.type != "call_expression" or \
                call.child_by_field_name("function") != node:  # fmt: skip
            return "a mention of the function that is not a plain call"
        calls.append(call)
    if not calls:
        return "not called in the file"
    callers = [_innermost_fn(c) for c in calls]
    if any(c is None or c == fn for c in callers):
        return "a call outside a function, or a recursive one"
    shared: dict[str, set[str]] | None = None
    for caller in {c.id: c for c in callers}.values():
        own = _plain_params(data, caller) or []
        rebound = {_text(data, i) for i in _identifiers(caller) if i.parent is not None
                   and i.parent.type in _PATTERNS and i.parent.type != "parameter"}  # fmt: skip
        mine = {n: {t} for n, t, _ in own if n not in rebound}
        shared = mine if shared is None else {n: shared[n] | mine[n] for n in shared.keys() & mine.keys()}
    spelled = {_text(data, i) for i in _identifiers(fn)}
    for variable in sorted((shared or {}).keys() - spelled):
        if len(shared[variable]) != 1:  # type: ignore[index]
            continue
        inserts = []
        for call in calls:
            args = call.child_by_field_name("arguments")
            named = [a for a in args.named_children if a.type not in ("line_comment", "block_comment")] if args else []
            if len(named) != len(params):
                return "a call's arguments differ from the parameters"
            inserts.append(named[-1].end_byte)
        return params[-1][2].end_byte, f", {variable}: {next(iter(shared[variable]))}", variable, inserts  # type: ignore[index]
    return "no parameter that every caller has"


def crate_copy(root: Path, into: Path) -> Path:
    """A copy of the crate's folder to rewrite files of (the original stays as read)."""
    target = into / root.name
    shutil.copytree(root, target)
    return target
