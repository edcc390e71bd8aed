"""The structural edits `waferline eval-nes` replays, made from real code with Python's own `ast` and `symtable`
(independently of the tree-sitter code under test, server/features/next_edit/): for each file, one edit a user makes
and the whole file as intended once the edits that follow it are made. `renames` (a parameter, a local; and, to be
silent, a parameter the function never uses), `attribute_renames` (an attribute of `self`), `signature_changes` (a
parameter added, the callers passing their own variable of that name; an unused one removed, the callers dropping
its argument). benchmarks/nes_cases.py runs them over the evaluation wheels and writes the shipped cases.
"""

from __future__ import annotations

import ast
import difflib
import random
import re
import symtable
from collections.abc import Iterator
from typing import Any


def hunks(before: str, after: str) -> list[tuple[int, int, int, int]]:
    """(a1, a2, b1, b2) line ranges of each change that turns `before` into `after`, in order."""
    a, b = before.splitlines(keepends=True), after.splitlines(keepends=True)
    return [(i1, i2, j1, j2) for tag, i1, i2, j1, j2 in
            difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes() if tag != "equal"]  # fmt: skip


class File:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tree = ast.parse(text)
        self.table = symtable.symtable(text, "<case>", "exec")
        self.starts = [0]
        for line in text.split("\n")[:-1]:
            self.starts.append(self.starts[-1] + len(line) + 1)

    def offset(self, lineno: int, col_byte: int) -> int:
        line_start = self.starts[lineno - 1]
        line = self.text[line_start : self.text.find("\n", line_start) if "\n" in self.text[line_start:] else None]
        return line_start + len(line.encode("utf-8")[:col_byte].decode("utf-8", "replace"))

    def word_free(self, name: str) -> bool:
        return re.search(rf"\b{re.escape(name)}\b", self.text) is None


def _children(table: symtable.SymbolTable) -> dict[tuple[str, int], symtable.SymbolTable]:
    return {(t.get_name(), t.get_lineno()): t for t in table.get_children()}


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp, ast.SetComp,
           ast.DictComp, ast.GeneratorExp)  # fmt: skip
_SCOPE_NAMES = {ast.Lambda: "lambda", ast.ListComp: "listcomp", ast.SetComp: "setcomp", ast.DictComp: "dictcomp",
                ast.GeneratorExp: "genexpr"}  # fmt: skip


def name_uses(f: File, node: ast.AST, table: symtable.SymbolTable, name: str) -> list[int] | None:
    """Offsets of the Name nodes under `node` (a scope whose table is `table`) that are its variable `name`; None
    when a nested scope's table cannot be matched (the case is skipped)."""
    out: list[int] = []
    children = _children(table)

    def visit(n: ast.AST) -> bool:
        for child in ast.iter_child_nodes(n):
            if isinstance(child, _SCOPES):
                key = (getattr(child, "name", None) or _SCOPE_NAMES.get(type(child), ""), child.lineno)
                sub = children.get(key)
                if sub is None:
                    return False
                if name in sub.get_identifiers():
                    sym = sub.lookup(name)
                    if sym.is_local() or sym.is_parameter() or sym.is_global() or sym.is_declared_global():
                        continue
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    return False  # a nested def reading the name: its table's children would be needed; skip
                inner = name_uses(f, child, sub, name)
                if inner is None:
                    return False
                out.extend(inner)
                continue
            if isinstance(child, ast.Name) and child.id == name:
                out.append(f.offset(child.lineno, child.col_offset))
            if not visit(child):
                return False
        return True

    return out if visit(node) else None


def _replace_all(text: str, offsets: list[int], old: str, new: str) -> str | None:
    for at in sorted(set(offsets), reverse=True):
        if text[at : at + len(old)] != old:
            return None
        text = text[:at] + new + text[at + len(old) :]
    return text


def _new_name(f: File, old: str, rng: random.Random) -> str | None:
    for candidate in (f"{old}_{s}" for s in rng.sample(["value", "item", "arg", "new", "obj", "data"], 6)):
        if f.word_free(candidate):
            return candidate
    return None


def _functions(f: File) -> Iterator[tuple[ast.FunctionDef | ast.AsyncFunctionDef, symtable.SymbolTable]]:
    def walk(node: ast.AST, table: symtable.SymbolTable) -> Iterator[Any]:
        children = _children(table)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                sub = children.get((child.name, child.lineno))
                if sub is None:
                    continue
                if not isinstance(child, ast.ClassDef):
                    yield child, sub
                yield from walk(child, sub)
            elif not isinstance(child, _SCOPES):
                yield from walk(child, table)

    yield from walk(f.tree, f.table)


def _case(category: str, text: str, start: int, end: int, new: str, target: str) -> dict[str, Any]:
    """A case: the user's edit of `text`, and the edits that make the text after it `target`, as whole lines
    replaced (offsets into the text after the user's edit: a smaller file than a second copy of the text); none
    for a silent case."""
    after = text[:start] + new + text[end:]
    lines, starts = after.splitlines(keepends=True), [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    target_lines = target.splitlines(keepends=True)
    expected = [{"start": starts[i1], "end": starts[i2], "text": "".join(target_lines[j1:j2])}
                for i1, i2, j1, j2 in hunks(after, target)]  # fmt: skip
    return {"kind": "structural", "category": category, "before": text,
            "edits": [{"start": start, "end": end, "text": new}], "expected": expected}  # fmt: skip


def _simple_binding(fn: ast.AST, name: str) -> bool:
    """Every binding of `name` in the function is a plain Name or argument (no import, except, def, class alias)."""
    for n in ast.walk(fn):
        if isinstance(n, (ast.Global, ast.Nonlocal)) and name in n.names:
            return False
        if isinstance(n, ast.ExceptHandler) and n.name == name:
            return False
        if isinstance(n, ast.alias) and (n.asname or n.name).split(".")[0] == name:
            return False
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name == name and n is not fn:
            return False
        if isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name == name:
            return False
    return True


def _uses_in_body(f: File, fn: ast.AST, table: symtable.SymbolTable, name: str) -> list[int] | None:
    out: list[int] = []
    for stmt in getattr(fn, "body", []):
        found = name_uses(f, stmt, table, name)
        if found is None:
            return None
        out.extend(found)
    return out


def _keywords_passed(f: File, name: str) -> set[str]:
    """The keywords of every call of a function or method called `name` in the file."""
    out: set[str] = set()
    for n in ast.walk(f.tree):
        if isinstance(n, ast.Call):
            callee = n.func.id if isinstance(n.func, ast.Name) else getattr(n.func, "attr", None)
            if callee == name:
                out.update(k.arg for k in n.keywords if k.arg is not None)
    return out


def renames(f: File, rng: random.Random) -> Iterator[dict[str, Any]]:
    """Parameter and local renames, and silent renames of unused parameters."""
    for fn, table in _functions(f):
        args = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
        keywords = _keywords_passed(f, fn.name)
        for a in args:
            if a.arg in ("self", "cls") or not _simple_binding(fn, a.arg) or a.arg in keywords:
                continue  # a call passing it by keyword changes too: not a case of this kind
            uses = _uses_in_body(f, fn, table, a.arg)
            new = _new_name(f, a.arg, rng)
            if uses is None or new is None:
                continue
            at = f.offset(a.lineno, a.col_offset)
            after = f.text[:at] + new + f.text[at + len(a.arg) :]
            if not uses:
                yield _case("silent-unused-parameter", f.text, at, at + len(a.arg), new, after)
                continue
            shifted = [u + len(new) - len(a.arg) if u > at else u for u in uses]
            target = _replace_all(after, shifted, a.arg, new)
            if target is not None:
                yield _case("rename-parameter", f.text, at, at + len(a.arg), new, target)
        for sym in table.get_symbols():
            name = sym.get_name()
            if not (sym.is_local() and sym.is_assigned()) or sym.is_parameter() or not _simple_binding(fn, name):
                continue
            uses = _uses_in_body(f, fn, table, name)
            new = _new_name(f, name, rng)
            if uses is None or len(uses) < 2 or new is None:
                continue
            first = min(uses)
            stores = [n for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id == name]
            if not any(f.offset(n.lineno, n.col_offset) == first and isinstance(n.ctx, ast.Store) for n in stores):
                continue
            after = f.text[:first] + new + f.text[first + len(name) :]
            shifted = [u + len(new) - len(name) for u in uses if u != first]
            target = _replace_all(after, shifted, name, new)
            if target is not None:
                yield _case("rename-local", f.text, first, first + len(name), new, target)


def attribute_renames(f: File, rng: random.Random) -> Iterator[dict[str, Any]]:
    """`self.name` renamed where the file reaches the attribute only as `self.name` inside its class."""
    every = [n for n in ast.walk(f.tree) if isinstance(n, ast.Attribute)]
    for cls in [n for n in ast.walk(f.tree) if isinstance(n, ast.ClassDef)]:
        inside = [n for n in ast.walk(cls) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                  and n.value.id == "self"]  # fmt: skip
        members = {n.name for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
        members |= {
            t.id
            for n in cls.body
            if isinstance(n, (ast.Assign, ast.AnnAssign))
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
            if isinstance(t, ast.Name)
        }
        for attr in sorted({n.attr for n in inside}):
            own = [n for n in inside if n.attr == attr]
            if len(own) < 2 or attr in members or sum(1 for n in every if n.attr == attr) != len(own):
                continue
            if re.search(rf"['\"]{re.escape(attr)}['\"]", f.text) or attr.startswith("__"):
                continue  # getattr(self, "name"), __slots__, dunders
            new = _new_name(f, attr, rng)
            if new is None or any(n.end_lineno != n.lineno for n in own):
                continue
            offsets = sorted(f.offset(n.end_lineno or n.lineno, n.end_col_offset or 0) - len(attr) for n in own)
            first = offsets[0]
            after = f.text[:first] + new + f.text[first + len(attr) :]
            target = _replace_all(after, [o + len(new) - len(attr) for o in offsets[1:]], attr, new)
            if target is not None and f.text[first : first + len(attr)] == attr:
                yield _case("rename-attribute", f.text, first, first + len(attr), new, target)


def _module_functions(f: File) -> Iterator[tuple[ast.FunctionDef, symtable.SymbolTable]]:
    children = _children(f.table)
    for n in f.tree.body:
        if isinstance(n, ast.FunctionDef) and (n.name, n.lineno) in children:
            yield n, children[(n.name, n.lineno)]


def _calls(f: File, name: str) -> list[tuple[ast.Call, ast.AST | None]]:
    """Every call `name(...)` in the file with the function it is in (None: module level)."""
    out: list[tuple[ast.Call, ast.AST | None]] = []

    def visit(node: ast.AST, owner: ast.AST | None) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) else owner
            if isinstance(child, ast.Call) and isinstance(child.func, ast.Name) and child.func.id == name:
                out.append((child, owner))
            visit(child, inner)

    visit(f.tree, None)
    return out


def _tables(f: File) -> dict[int, symtable.SymbolTable]:
    """Each function's table by the line its `def` is on (the functions of interest are matched by line)."""
    out: dict[int, symtable.SymbolTable] = {}
    stack = [f.table]
    while stack:
        t = stack.pop()
        if t.get_type() == "function":
            out.setdefault(t.get_lineno(), t)
        stack.extend(t.get_children())
    return out


def _rebound(tables: dict[int, symtable.SymbolTable], owner: ast.AST | None, name: str) -> bool:
    t = tables.get(getattr(owner, "lineno", -1))
    return t is not None and name in t.get_identifiers() and t.lookup(name).is_local()


def _plain_signature(fn: ast.FunctionDef) -> bool:
    a = fn.args
    return not (a.posonlyargs or a.vararg or a.kwonlyargs or a.kwarg or a.defaults) and bool(a.args)


def signature_changes(f: File, rng: random.Random) -> Iterator[dict[str, Any]]:
    """A parameter added (the callers pass their own variable of that name) or an unused one removed."""
    tables = _tables(f)
    for fn, table in _module_functions(f):
        if not _plain_signature(fn) or any(isinstance(d, ast.AST) for d in fn.decorator_list):
            continue
        calls = _calls(f, fn.name)
        if not calls or any(owner is None or any(isinstance(a, ast.Starred) for a in c.args) or c.keywords
                            or len(c.args) != len(fn.args.args) or c.lineno != c.end_lineno
                            for c, owner in calls):  # fmt: skip
            continue
        params = [a.arg for a in fn.args.args]
        last = fn.args.args[-1]
        end = f.offset(last.end_lineno or last.lineno, last.end_col_offset or 0)
        # added: a name every caller binds (its parameter or local) and the function does not know
        shared = None
        for _, owner in calls:
            t = tables.get(getattr(owner, "lineno", -1))
            names = {s.get_name() for s in t.get_symbols() if s.is_local()} if t is not None else set()
            shared = names if shared is None else shared & names
        if any(_rebound(tables, owner, fn.name) for _, owner in calls):
            continue  # a caller with a variable of the function's name calls that, not the function
        for name in sorted((shared or set()) - set(params) - set(table.get_identifiers()))[:1]:
            inserts = [end] + [f.offset(c.args[-1].end_lineno or 0, c.args[-1].end_col_offset or 0) for c, _ in calls]
            target = f.text
            for at in sorted(inserts, reverse=True):
                target = target[:at] + f", {name}" + target[at:]
            yield _case("add-parameter", f.text, end, end, f", {name}", target)
        # removed: a parameter the body never reads
        for i, p in enumerate(params):
            sym = table.lookup(p)
            if sym.is_referenced() or len(params) < 2:
                continue
            spans = [_span_without(f, fn.args.args, i)] + [_span_without(f, c.args, i) for c, _ in calls]
            target = f.text
            for start, stop in sorted(spans, reverse=True):
                target = target[:start] + target[stop:]
            start, stop = spans[0]
            # the user's edit is the first span; the target is the text after it with the others removed
            yield _case("remove-parameter", f.text, start, stop, "", target)
            break


def _span_without(f: File, nodes: list[Any], i: int) -> tuple[int, int]:
    """The text to delete for dropping item i of a comma-separated list: it and the comma after (before, if last)."""

    def at(n: Any) -> int:
        return f.offset(n.lineno, n.col_offset)

    def end(n: Any) -> int:
        return f.offset(n.end_lineno, n.end_col_offset)

    if i + 1 < len(nodes):
        return at(nodes[i]), at(nodes[i + 1])
    return end(nodes[i - 1]), end(nodes[i])


GENERATORS = (renames, attribute_renames, signature_changes)
