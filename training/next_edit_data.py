"""Training rows for the next-edit objective: after an edit, rewrite the lines around the cursor as they should be.

The rows have the layout the server's model candidate asks with (syntax/next_edit_prompt.py, imported
here so training and serving cannot drift apart): the user's recent edits as comment lines, the file before the
editable window, the file after it, and as the middle to learn the window *after* the next edit. Two sources:

- `rename_rows`: synthetic structural edits of the training corpus (training/corpus.py: the distributions of
  train.txt only): a parameter or local of a function renamed at its first occurrence is the history; the window
  around the next occurrence, with it renamed, is the target; after the last occurrence the window as it is (the
  model must learn to leave code alone too). Python's `ast` and `symtable` decide which names are one variable.
- `commit_rows`: consecutive versions of a file (a commit, or two releases of a distribution): the first k hunks
  are the history, the window around hunk k + 1 after it is the target.

Each row is {"prefix", "suffix", "middle", "window", "kind"} (`window`: the old window, the draft the server
sends with the request); the FIM pipeline (training/fim.py) tokenizes prefix, suffix and
middle as it does for completion rows. The training run that mixes them in is not part of this module.
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
from waferline.syntax.next_edit_prompt import history_comment, window_at


def row(text_after_history: str, cursor: int, target_text: str, events: list[EditEvent], kind: str) -> dict[str, Any]:
    """One row: the window at `cursor` of `text_after_history`, to become the same lines of `target_text` (which
    differs from it inside the window only)."""
    w = window_at(text_after_history, cursor)
    tail = len(text_after_history) - w.end
    middle = target_text[w.start : len(target_text) - tail]
    return {"prefix": history_comment(events, "python") + text_after_history[: w.start],
            "suffix": text_after_history[w.end :], "middle": middle, "window": w.old, "kind": kind}  # fmt: skip


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
            for k, occurrence in enumerate(at[1:], start=1):  # each next occurrence, as the chain would take it
                o = occurrence + shift * k
                target = current[:o] + new + current[o + len(name) :]
                rows.append(row(current, o, target, events, "rename"))
                events.append(EditEvent(o, name, new, time.monotonic()))
                current = target
            rows.append(row(current, at[-1] + shift * len(at), current, events, "rename-done"))
            if len(rows) >= per_file:
                return rows[:per_file]
    return rows


def commit_rows(before: str, after: str) -> list[dict[str, Any]]:
    """Rows from two versions of a file: each hunk after the first as the target of the ones before it."""
    a, b = before.splitlines(keepends=True), after.splitlines(keepends=True)
    ops = [o for o in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes() if o[0] != "equal"]
    rows: list[dict[str, Any]] = []
    events: list[EditEvent] = []
    current, shift = list(a), 0
    for n, (_tag, i1, i2, j1, j2) in enumerate(ops):
        start = sum(len(x) for x in current[: i1 + shift])
        old, new = "".join(a[i1:i2]), "".join(b[j1:j2])
        if n > 0:
            text = "".join(current)
            target = text[:start] + new + text[start + len(old) :]
            rows.append(row(text, start, target, events, "commit"))
        events.append(EditEvent(start, old, new, time.monotonic()))
        current[i1 + shift : i2 + shift] = b[j1:j2]
        shift += (j2 - j1) - (i2 - i1)
    return rows


def _all_tables(table: symtable.SymbolTable) -> list[symtable.SymbolTable]:
    out, stack = [], [table]
    while stack:
        t = stack.pop()
        out.append(t)
        stack.extend(t.get_children())
    return out
