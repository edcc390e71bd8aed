"""The rename cases of `waferline eval-nes` for C and C++, found by clang's own semantic analysis (libclang, the
PyPI package `libclang`: `pip install -e '.[nes-cases]'`), independently of the tree-sitter code under test
(server/features/next_edit/lexical_java_c.py).

Each file is parsed as its own translation unit (C: `-std=gnu11`; C++: `-x c++ -std=gnu++17`; the include folders
its project needs, the system's headers as `cc`/`c++` lists them, no limit on errors). A file with a fatal error (a
header not found: another platform's file) is left out. For each function definition of the file (C++: also in
namespaces, `extern "C"` blocks and class bodies, methods, constructors and templates), each parameter (kind
"parameter"; C++: a lambda's too) and each local variable ("local"; a lambda's too, not a local class's) is a
candidate, its locations every `DeclRefExpr` (C++: and lambda capture) clang resolves to that declaration, at its
spelling location (inside a macro invocation's argument: where the argument spells it). A function is left out whole
when it holds a preprocessor line (`#if`: a branch not compiled is not seen, nor its uses) or a compile error; a
candidate when a use is spelled outside its function (a macro's body reads the variable: renaming the variable
changes the macro's meaning, not its text), when its text is not the name, or when a token of its name in the
function resolves to nothing (a macro's argument the macro drops: `uv__req_unregister(loop, req)` never reads `req`,
and renaming the variable renames that token too). Mentions in comments, strings and macros not expanded are not
edits. The same JSON as benchmarks/nes_go_renames.go, offsets in characters.
"""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

from waferline.benchmarks.nes_cases_go import char_offsets


@cache
def system_includes(language: str = "c") -> tuple[str, ...]:
    """The C (C++) compiler's own include folders (stddef.h, the C++ library), as `cc -v` (`c++ -v`) lists them."""
    compiler, x = ("c++", "c++") if language == "cpp" else ("cc", "c")
    done = subprocess.run([compiler, "-E", "-v", "-x", x, "-"], input="", capture_output=True, text=True, check=True)
    block = done.stderr.split("#include <...> search starts here:")[1].split("End of search list.")[0]
    return tuple(line.strip() for line in block.splitlines() if line.strip())


def compile_args(language: str, includes: list[Path]) -> list[str]:
    """clang's arguments for a C (`c`) or C++ (`cpp`) file of a project whose headers lie in `includes`."""
    standard = ["-x", "c++", "-std=gnu++17"] if language == "cpp" else ["-std=gnu11"]
    return [*standard, "-D_GNU_SOURCE", "-ferror-limit=0", *(f"-I{i}" for i in includes),
            *(f"-isystem{i}" for i in system_includes(language))]  # fmt: skip


_SCOPES = ("NAMESPACE", "LINKAGE_SPEC", "UNEXPOSED_DECL", "CLASS_DECL", "STRUCT_DECL", "UNION_DECL",
           "CLASS_TEMPLATE", "CLASS_TEMPLATE_PARTIAL_SPECIALIZATION")  # fmt: skip
FUNCTIONS = ("FUNCTION_DECL", "CXX_METHOD", "CONSTRUCTOR", "DESTRUCTOR", "CONVERSION_FUNCTION", "FUNCTION_TEMPLATE")


def definitions(tu: Any, name: str, language: str) -> list[Any]:
    """The function definitions spelled in the file `name` (C: at file scope; C++: in namespaces, `extern "C"`
    blocks and class bodies too), in order."""
    out = []
    stack = list(reversed(list(tu.cursor.get_children())))
    while stack:
        c = stack.pop()
        if c.location.file is None or c.location.file.name != name:
            continue
        kind = c.kind.name
        if kind in (FUNCTIONS if language == "cpp" else ("FUNCTION_DECL",)) and c.is_definition():
            out.append(c)
        elif language == "cpp" and kind in _SCOPES:
            stack.extend(reversed(list(c.get_children())))
    return out


def _variables(fn: Any) -> tuple[list[Any], list[Any]]:
    """(the parameters and locals of `fn` and of its lambdas, not a local class's; every cursor below `fn`)."""
    declared, every = [], [fn]
    stack = [(c, fn) for c in reversed(list(fn.get_children()))]
    while stack:
        c, parent = stack.pop()
        every.append(c)
        kind = c.kind.name
        if kind == "VAR_DECL" or (kind == "PARM_DECL" and parent.kind.name in ("LAMBDA_EXPR", *FUNCTIONS)):
            declared.append(c)  # not a function pointer's parameter names: no variables
        if kind in ("CLASS_DECL", "STRUCT_DECL", "UNION_DECL") and parent.kind.name != "LAMBDA_EXPR":
            every.extend(list(c.walk_preorder())[1:])  # a local class: its tokens resolved, not its variables
            continue
        stack.extend((ch, c) for ch in reversed(list(c.get_children())))
    return [d for d in declared if d.spelling], every


def _spelling(cursor: Any) -> tuple[str | None, int]:
    """(file, byte offset) where the cursor's first token is spelled (a macro argument: in the argument)."""
    from ctypes import byref, c_uint

    from clang.cindex import File, c_object_p, conf

    f, line, col, offset = c_object_p(), c_uint(), c_uint(), c_uint()
    conf.lib.clang_getSpellingLocation(cursor.location, byref(f), byref(line), byref(col), byref(offset))
    return (File(f).name if f else None), offset.value


def renames(path: Path, includes: list[Path], language: str = "c") -> dict[str, Any]:
    """{file, skipped, candidates} of one C (`language` "c") or C++ ("cpp") file (`includes`: the folders of its
    project's headers)."""
    from clang.cindex import CursorKind, Index, TranslationUnit

    args = compile_args(language, includes)
    tu = Index.create().parse(str(path), args=args, options=TranslationUnit.PARSE_DETAILED_PROCESSING_RECORD)
    data = path.read_bytes()
    chars = char_offsets(data)
    name = str(path)
    errors = [d.location.offset for d in tu.diagnostics if d.severity >= 3 and d.location.file
              and d.location.file.name == name]  # fmt: skip
    skipped: dict[str, int] = {}
    candidates: list[dict[str, Any]] = []
    if any(d.severity >= 4 for d in tu.diagnostics):  # a header not found (another platform's): much is unknown
        return {"file": name, "skipped": {"a fatal error in the file (a header not found)": 1}, "candidates": []}

    def skip(why: str, n: int = 1) -> None:
        skipped[why] = skipped.get(why, 0) + n

    for fn in definitions(tu, name, language):
        start, end = fn.extent.start.offset, fn.extent.end.offset
        declared, every = _variables(fn)
        if re.search(rb"^[ \t]*#", data[start:end], re.M):
            skip("a preprocessor line in the function", len(declared))
            continue
        if any(start <= e < end for e in errors):
            skip("a compile error in the function", len(declared))
            continue
        uses: dict[tuple[str | None, int], list[tuple[str | None, int]]] = {}
        resolved: set[int] = set()  # where any token of the function is a declaration or a reference to one
        for c in every:
            if c.kind in (CursorKind.DECL_REF_EXPR, CursorKind.VARIABLE_REF) and c.referenced is not None:
                uses.setdefault(_spelling(c.referenced), []).append(_spelling(c))
            if c.kind.is_declaration() or c.kind.is_reference() or c.kind.is_expression():
                f, at = _spelling(c)
                if f == name:
                    resolved.add(at)
        tokens = list(tu.get_tokens(extent=fn.extent))
        loose = {t.spelling for i, t in enumerate(tokens) if t.kind.name == "IDENTIFIER"
                 and t.extent.start.offset not in resolved
                 and (i == 0 or tokens[i - 1].spelling not in (".", "->"))}  # fmt: skip
        for d in declared:
            where = _spelling(d)
            if where[0] != name or not start <= where[1] < end:
                skip("a declaration spelled outside the function (a macro's)")
                continue
            n = d.spelling.encode("utf-8")
            found = uses.get(where, [])
            if any(f != name or not start <= at < end for f, at in found):
                skip("a use spelled outside the function (a macro's body)")
                continue
            if data[where[1] : where[1] + len(n)] != n or any(data[at : at + len(n)] != n for _, at in found):
                skip("a location's text is not the name")
                continue
            if d.spelling in loose:
                skip("a token of the name that resolves to nothing (a macro's argument it drops)")
                continue
            kind = "parameter" if d.kind == CursorKind.PARM_DECL else "local"
            locations = sorted({chars[at] for _, at in found})
            candidates.append({"kind": kind, "name": d.spelling, "start": chars[where[1]], "locations": locations})
    candidates.sort(key=lambda c: c["start"])
    return {"file": name, "skipped": skipped, "candidates": candidates}
