"""Training rows for the next-edit objective: after an edit, rewrite the lines around the cursor as they should be.

The rows have the layout the server's model candidate asks with (syntax/next_edit_prompt.py, imported
here so training and serving cannot drift apart): the user's recent edits as comment lines, the file before the
editable window, the file after it, and as the middle to learn the window *after* the next edit. Two sources:

The window is where the server puts it: around the cursor, at the end of the user's last edit. When the next edit
lies inside that window the target is the window with it made; when it does not (or there is none) the target is the
window as it is, so the model learns to leave code alone where nothing follows (kinds `...-away`, `...-done`).

- `rename_rows`: synthetic structural edits of the training corpus (training/corpus.py: the distributions of
  train.txt only): a parameter or local of a function renamed at its first occurrence, then each next occurrence
  in turn; Python's `ast` and `symtable` decide which names are one variable.
- `commit_rows`: consecutive versions of a file (a commit of a train.txt distribution's repository,
  training/git_history.py): the first k hunks are the history, hunk k + 1 the next edit.

Each row is {"prefix", "suffix", "middle", "window", "kind"} (`window`: the old window, the draft the server
sends with the request); training/dataset.py tokenizes it in the server's suffix-prefix-middle order with the loss
on the middle only.
"""

from __future__ import annotations

import ast
import difflib
import random
import re
import symtable
import time
from typing import Any

from waferline.syntax.edit_history import EditEvent
from waferline.syntax.next_edit_prompt import prompt_parts, window_at


def row(text: str, cursor: int, nxt: tuple[int, int, str] | None, events: list[EditEvent], kind: str) -> dict[str, Any]:
    """One row: the window at `cursor` of `text`, rewritten with the next edit `nxt` ((start, end, new text) in
    `text`) when it lies inside the window, else as it is (kind + "-away")."""
    w = window_at(text, cursor)
    middle = w.old
    if nxt is not None and w.start <= nxt[0] <= nxt[1] <= w.end:
        middle = text[w.start : nxt[0]] + nxt[2] + text[nxt[1] : w.end]
    elif nxt is not None:
        kind += "-away"
    prefix, suffix = prompt_parts(text, w, events, "python")
    if w.old and not w.old.endswith("\n") and not middle.endswith("\n"):
        middle += "\n"  # the window is given to the model with a final newline (prompt_parts)
    return {"prefix": prefix, "suffix": suffix, "middle": middle, "window": w.old, "kind": kind}


def _names(fn: ast.FunctionDef | ast.AsyncFunctionDef, table: symtable.SymbolTable) -> list[str]:
    args = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs) if a.arg not in ("self", "cls")]
    locals_ = [s.get_name() for s in table.get_symbols() if s.is_local() and s.is_assigned() and not s.is_parameter()]
    nested = any(
        isinstance(
            n,
            (
                ast.FunctionDef,
                ast.AsyncFunctionDef,
                ast.Lambda,
                ast.ClassDef,
                ast.ListComp,
                ast.SetComp,
                ast.DictComp,
                ast.GeneratorExp,
            ),
        )
        for n in ast.walk(fn)
        if n is not fn
    )
    return [] if nested else args + locals_  # nested scopes: which name is which needs more than this (skipped)


def _occurrences(text: str, fn: ast.AST, name: str) -> list[int]:
    starts = [0]
    for line in text.split("\n")[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    out = []
    for n in ast.walk(fn):
        if (isinstance(n, ast.Name) and n.id == name) or (isinstance(n, ast.arg) and n.arg == name):
            out.append(starts[n.lineno - 1] + len(text.split("\n")[n.lineno - 1].encode()[: n.col_offset].decode()))
    return sorted(set(out))


def rename_rows(text: str, rng: random.Random, per_file: int = 4) -> list[dict[str, Any]]:
    try:
        tree, table = ast.parse(text), symtable.symtable(text, "<file>", "exec")
    except (SyntaxError, ValueError):
        return []
    tables = {t.get_lineno(): t for t in _all_tables(table) if t.get_type() == "function"}
    rows: list[dict[str, Any]] = []
    functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    rng.shuffle(functions)
    for fn in functions:
        t = tables.get(fn.lineno)
        for name in _names(fn, t) if t is not None else []:
            at = _occurrences(text, fn, name)
            new = f"{name}_{rng.choice(['value', 'item', 'new', 'arg'])}"
            if len(at) < 2 or re.search(rf"\b{re.escape(new)}\b", text) or any(text[a:a + len(name)] != name
                                                                                 for a in at):  # fmt: skip
                continue
            shift = len(new) - len(name)
            current = text[: at[0]] + new + text[at[0] + len(name) :]
            events = [EditEvent(at[0], name, new, time.monotonic())]
            cursor = at[0] + len(new)
            for k, occurrence in enumerate(at[1:], start=1):  # each next occurrence, as the chain would take it
                o = occurrence + shift * k
                rows.append(row(current, cursor, (o, o + len(name), new), events, "rename"))
                events.append(EditEvent(o, name, new, time.monotonic()))
                current = current[:o] + new + current[o + len(name) :]
                cursor = o + len(new)
            rows.append(row(current, cursor, None, events, "rename-done"))
            if len(rows) >= per_file:
                return rows[:per_file]
    return rows


def commit_rows(before: str, after: str) -> list[dict[str, Any]]:
    """Rows from two versions of a file: after each hunk, the next one (after the last: none) as the target."""
    a, b = before.splitlines(keepends=True), after.splitlines(keepends=True)
    ops = [o for o in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes() if o[0] != "equal"]
    rows: list[dict[str, Any]] = []
    events: list[EditEvent] = []
    current, shift, cursor = list(a), 0, 0
    for n, (_tag, i1, i2, j1, j2) in enumerate(ops):
        start = sum(len(x) for x in current[: i1 + shift])
        old, new = "".join(a[i1:i2]), "".join(b[j1:j2])
        if n > 0:
            rows.append(row("".join(current), cursor, (start, start + len(old), new), events, "commit"))
        events.append(EditEvent(start, old, new, time.monotonic()))
        current[i1 + shift : i2 + shift] = b[j1:j2]
        shift += (j2 - j1) - (i2 - i1)
        cursor = start + len(new)
    if ops:
        rows.append(row("".join(current), cursor, None, events, "commit-done"))
    return rows


def _all_tables(table: symtable.SymbolTable) -> list[symtable.SymbolTable]:
    out, stack = [], [table]
    while stack:
        t = stack.pop()
        out.append(t)
        stack.extend(t.get_children())
    return out
