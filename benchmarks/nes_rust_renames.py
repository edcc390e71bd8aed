"""The rename cases of `waferline eval-nes` for Rust, found by rustc's own name resolution, independently of the
tree-sitter code under test (server/features/next_edit/lexical_rust.py): a crate is lowered to HIR with

    RUSTC_BOOTSTRAP=1 rustc --crate-type lib --edition E --cfg 'feature="std"' ... -Zunpretty=hir-tree src/lib.rs

(the HIR after name resolution, printed as Rust's `Debug` of its tree: no type checking), and every binding of a
variable (a `Pat`'s `Binding`, with its `HirId` and span) is paired with every path that resolves to it (`res:
Local(HirId)`, with its span). A binding that is a function's or closure's parameter is kind "parameter", any other
(`let`, `for`, `if let`, `match`, a pattern's part) "local". A candidate is left out when a use or the binding lies
in a macro's expansion (a span whose syntax context is not `#0`: the text there is not the variable's), when the
text at a span is not the name (a `mut`/`ref` binding is matched at its end), when a use or the binding is a struct
field shorthand (`Foo { x }`: the field's name would change with it), when a use comes before the binding, when the
binding is in an or-pattern (`A(x) | B(x)` binds one variable at two places, two `HirId`s), or when a `#[cfg` lies
in its scope (the code it leaves out is not lowered: its uses are not seen). Mentions in comments and strings are
not edits. The same JSON as benchmarks/nes_go_renames.go, offsets in characters. benchmarks/nes_cases_declared.py
makes the cases.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

FEATURES = ("std", "default", "alloc", "unicode", "use_std")  # a crate's usual default features, as cfgs

_SPAN = r"(?P<{0}>\S+?):(?P<{0}l1>\d+):(?P<{0}c1>\d+): (?P<{0}l2>\d+):(?P<{0}c2>\d+) \(#(?P<{0}ctx>\d+)\)"
BINDING = re.compile(
    r"(?:(?P<parent>\w+) \{\n(?:\s*hir_id: HirId\([^\n]*\),\n)?\s*pat: )?Pat \{\n\s*hir_id: (?P<id>HirId\([^\n]*\)),\n"
    r"\s*kind: Binding\(\n\s*BindingMode\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\),\n\s*HirId\([^\n]*\),\n"
    r"\s*(?P<name>\w+)#\d+,\n\s*None,\n\s*\),\n\s*span: " + _SPAN.format("s")
)
USE = re.compile(r"Path \{\n\s*span: " + _SPAN.format("u") + r",\n\s*res: Local\(\n\s*(?P<id>HirId\([^\n]*\)),")
SHORTHAND = re.compile(r"span: " + _SPAN.format("f") + r",\n\s*is_shorthand: true")  # an ExprField's
PAT_SHORTHAND = re.compile(r"is_shorthand: true,\n\s*span: " + _SPAN.format("f"))  # a PatField's: the other order
OR = re.compile(r"kind: Or\(")
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)\'|[()]|\n\s*span: ' + _SPAN.format("o"))


def hir_tree(lib: Path, edition: str) -> str:
    """The crate's HIR as rustc prints it (`lib`: its src/lib.rs, an absolute path)."""
    cfgs = [a for f in FEATURES for a in ("--cfg", f'feature="{f}"')]
    cmd = ["rustc", "--crate-type", "lib", "--crate-name", "nes_case", "--edition", edition, *cfgs,
           "-Zunpretty=hir-tree", str(lib)]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "RUSTC_BOOTSTRAP": "1"})
    if done.returncode != 0:
        raise RuntimeError(f"rustc failed on {lib}: {done.stderr[-2000:]}")
    return done.stdout


class Lines:
    """Character offsets of (line, column) positions of one file (rustc's are 1-based, in characters)."""

    def __init__(self, text: str) -> None:
        self.text, self.starts = text, [0]
        for line in text.split("\n"):
            self.starts.append(self.starts[-1] + len(line) + 1)

    def offset(self, line: str, col: str) -> int:
        return self.starts[int(line) - 1] + int(col) - 1


def _span(m: re.Match[str], g: str, lines: dict[str, Lines]) -> tuple[str, int, int, int] | None:
    """(file, start, end, syntax context) of a span group; None for a file not asked about."""
    file = m.group(g)
    if file not in lines:
        return None
    at = lines[file]
    return (file, at.offset(m.group(g + "l1"), m.group(g + "c1")), at.offset(m.group(g + "l2"), m.group(g + "c2")),
            int(m.group(g + "ctx")))  # fmt: skip


def renames(hir: str, files: Iterable[Path]) -> dict[str, dict[str, Any]]:
    """The answer of each of `files` (absolute paths of the crate): {file, skipped, candidates}."""
    lines = {str(f): Lines(f.read_text(encoding="utf-8")) for f in files}
    out: dict[str, dict[str, Any]] = {f: {"file": f, "skipped": {}, "candidates": []} for f in lines}
    uses: dict[str, list[tuple[str, int, int, int]]] = {}
    for m in USE.finditer(hir):
        span = _span(m, "u", lines)
        uses.setdefault(m.group("id"), []).append(span if span is not None else ("", 0, 0, 0))
    shorthands = {s[:3] for p in (SHORTHAND, PAT_SHORTHAND) for m in p.finditer(hir)
                  if (s := _span(m, "f", lines)) is not None}  # fmt: skip
    ors = [s for m in OR.finditer(hir) if (s := _or_span(hir, m.end(), lines)) is not None]
    bindings: dict[str, tuple[str, str, tuple[str, int, int, int]]] = {}
    for m in BINDING.finditer(hir):
        span = _span(m, "s", lines)
        if span is not None:
            if any(o[0] == span[0] and o[1] <= span[1] < o[2] for o in ors):
                bump = out[span[0]]["skipped"]
                bump["in an or-pattern"] = bump.get("in an or-pattern", 0) + 1
                continue
            kind = "parameter" if m.group("parent") == "Param" else "local"
            bindings[m.group("id")] = (kind, m.group("name"), span)
    for hir_id, (kind, name, (file, start, end, ctx)) in bindings.items():
        answer, text = out[file], lines[file].text
        why = _refused(name, (file, start, end, ctx), uses.get(hir_id, []), text, shorthands)
        if why:
            answer["skipped"][why] = answer["skipped"].get(why, 0) + 1
            continue
        at = end - len(name)
        locations = sorted(u[1] for u in uses.get(hir_id, []))
        answer["candidates"].append({"kind": kind, "name": name, "start": at, "locations": locations})
    for answer in out.values():
        answer["candidates"].sort(key=lambda c: c["start"])
    return out


def _scope_end(text: str, at: int) -> int:
    """Where the block around `at` closes (braces counted from `at`; for a parameter, past its function: more
    than its scope, which only makes the #[cfg] check stricter)."""
    depth = 0
    for i in range(at, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth < 0:
            return i
    return len(text)


def _or_span(hir: str, at: int, lines: dict[str, Lines]) -> tuple[str, int, int, int] | None:
    """The span of the or-pattern whose `kind: Or(` ends at `at`: the first `span:` after its closing paren."""
    depth = 1
    for m in _TOKEN.finditer(hir, at):
        if m.group() == "(":
            depth += 1
        elif m.group() == ")":
            depth -= 1
        elif m.group("o") is not None and depth == 0:
            return _span(m, "o", lines)
    return None


def _refused(
    name: str, binding: tuple[str, int, int, int], uses: list[tuple[str, int, int, int]], text: str,
    shorthands: set[tuple[str, int, int]],
) -> str:  # fmt: skip
    """Why the candidate is left out ("" when it is not)."""
    file, start, end, ctx = binding
    if name == "self" or name.startswith("__"):
        return "self or a generated name"
    if ctx != 0 or any(u[3] != 0 for u in uses):
        return "a macro's expansion"
    if any(u[0] != file for u in uses):
        return "another file"
    if text[end - len(name) : end] != name or not re.fullmatch(rf"(?:(?:ref|mut)\s+)*{name}", text[start:end]):
        return "the binding's text is not the name"
    if any(text[s:e] != name for _, s, e, _ in uses):
        return "a use's text is not the name"
    if (file, start, end) in shorthands or any(u[:3] in shorthands for u in uses):
        return "a field shorthand"
    if any(s < start for _, s, _, _ in uses):
        return "a use before the binding"
    if "#[cfg" in text[start : _scope_end(text, start)]:
        return "a #[cfg] in the scope (code not compiled may use it)"
    return ""
