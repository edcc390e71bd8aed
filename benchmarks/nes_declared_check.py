"""Rust, Java, C and C++ renames checked by the compiler: each proposal is exact or not shown.

    python -m waferline.benchmarks.nes_declared_check --language c --per-file 40 \
        --compiler 'gcc -fsyntax-only -I{dir} {file}' FILE...

For each file that compiles as it is: declarations the candidate follows (parameters and locals,
features/next_edit/lexical_declared.py), at most --per-file of them evenly spaced, each renamed `zz_<name>` key by
key in a fresh session and the chain of suggestions followed to its end (next_edit_session.Session); when anything
was proposed, the file is compiled again (the command, `{file}` replaced by a copy of the same name in a
temporary folder, `{dir}` by the original's folder).
A rename that missed a use leaves the old name undeclared, one too many reads the new name where it is not
declared: either fails to compile (but a missed use that a global of the old name still resolves). Prints how many
renames were proposed and compiled, proposed and did not (each named), and silent; asserts nothing.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import tempfile
from pathlib import Path

from waferline.benchmarks.next_edit_session import Session
from waferline.server.features.next_edit.signature_declared import DECLARED
from waferline.server.features.next_edit.source import Source, walk


def compiles(command: str, path: Path, original: Path) -> bool:
    args = [a.replace("{file}", str(path)).replace("{dir}", str(original.parent)) for a in shlex.split(command)]
    return subprocess.run(args, capture_output=True, cwd=path.parent, timeout=120).returncode == 0


def check_file(path: Path, language: str, command: str, per_file: int) -> tuple[int, list[str], int]:
    """(renames proposed that compile, those that do not, silent ones) in one file."""
    text = path.read_text(encoding="utf-8")
    sc, src = DECLARED[language], Source.parse(text, language)
    assert src is not None
    decls = [n for n in walk(src.root) if n.type == "identifier" and sc.declared_at(src, n) is not None]
    ok, bad, silent = 0, [], 0
    folder = Path(tempfile.mkdtemp(prefix="nes-check-"))
    copy = folder / path.name
    for n in decls[:: max(1, len(decls) // per_file)][:per_file]:
        name, (at, end) = src.node_text(n), src.span(n)
        d = Session(text, language, uri=f"file:///bench/units.{language}")
        d.replace(at, end, "z")
        d.replace(at + 1, at + 1, "z_" + name)
        d.chain(10_000)
        if d.doc.text.text == text[:at] + "zz_" + name + text[end:]:
            silent += 1
            continue
        copy.write_text(d.doc.text.text, encoding="utf-8")
        if compiles(command, copy, path):
            ok += 1
        else:
            bad.append(f"{path}:{text.count(chr(10), 0, at) + 1}: {name}")
    copy.unlink(missing_ok=True)
    folder.rmdir()
    return ok, bad, silent


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--language", required=True, choices=sorted(DECLARED))
    parser.add_argument("--compiler", required=True, help="command compiling {file}; exit status 0: it compiles")
    parser.add_argument("--per-file", type=int, default=40, help="declarations renamed per file at most")
    parser.add_argument("files", nargs="+", type=Path)


def run(opts: argparse.Namespace) -> int:
    ok, bad, silent, files = 0, [], 0, 0
    for path in (p.resolve() for p in opts.files):
        if not compiles(opts.compiler, path, path):
            continue  # not a file the compiler takes alone
        files += 1
        o, b, s = check_file(path, opts.language, opts.compiler, opts.per_file)
        ok, silent = ok + o, silent + s
        bad.extend(b)
    print(f"{files} files compiled alone; renames proposed: {ok + len(bad)}, compiled: {ok}, did not: {len(bad)}; "
          f"silent: {silent}")  # fmt: skip
    for line in bad:
        print("  did not compile:", line)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_arguments(parser)
    return run(parser.parse_args())


if __name__ == "__main__":
    raise SystemExit(main())
