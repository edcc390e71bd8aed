"""The model cases of `waferline eval-nes`: real commits of a permissively licensed repository, replayed hunk by
hunk (benchmarks/nes_cases.py writes them, with hunks from benchmarks/nes_structural.py; the texts are shipped,
not the repository).

A commit that changes exactly one Python file, by at most MAX_CHANGED_LINES lines in 2 to MAX_HUNKS hunks, gives
one case per hunk after the first: the user has made hunks 1..k (in the file's order), the next hunk is the target;
and one case where all hunks are made and the right answer is silence.
"""

from __future__ import annotations

import random
import subprocess
from pathlib import Path
from typing import Any

from waferline.benchmarks.nes_structural import hunks

MAX_HUNKS = 6
MAX_CHANGED_LINES = 40
MAX_FILE_CHARS = 20_000


def _git(git_dir: Path, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", str(git_dir), *args], check=True, capture_output=True,
                          text=True, errors="replace").stdout  # fmt: skip


def commit_cases(git_dir: Path, name: str, licence: str, limit: int, seed: int = 0) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for commit in _git(git_dir, "log", "--no-merges", "--format=%H").split():
        stat = [line.split("\t") for line in _git(git_dir, "show", "--numstat", "--format=", commit).splitlines()]
        if len(stat) != 1 or not stat[0][-1].endswith(".py") or "-" in stat[0][:2]:
            continue
        added, deleted, path = int(stat[0][0]), int(stat[0][1]), stat[0][2]
        if added + deleted > MAX_CHANGED_LINES:
            continue
        try:
            before = _git(git_dir, "show", f"{commit}^:{path}")
            after = _git(git_dir, "show", f"{commit}:{path}")
        except subprocess.CalledProcessError:
            continue  # a new file, or the first commit
        if len(before) > MAX_FILE_CHARS or "\r" in before:
            continue
        found = hunks(before, after)
        if not 2 <= len(found) <= MAX_HUNKS:
            continue
        source = {"repository": name, "commit": commit, "licence": licence, "file": path}
        out.extend({**case, "source": source} for case in split(before, after, found))
    rng = random.Random(seed)
    chosen = rng.sample(out, min(limit, len(out)))
    for i, case in enumerate(chosen):
        case["id"] = f"commit-{i:03d}"
    return chosen


def split(before: str, after: str, found: list[tuple[int, int, int, int]]) -> list[dict[str, Any]]:
    """One case per hunk after the first, and the silent one: the user's edits as offsets in the text they apply to
    (each after the previous ones), the next hunk as offsets in the text after them."""
    a_lines, b_lines = before.splitlines(keepends=True), after.splitlines(keepends=True)
    edits: list[dict[str, Any]] = []
    current = list(a_lines)
    shift = 0  # lines the applied hunks added (negative: removed)
    steps = []
    for a1, a2, b1, b2 in found:
        start = sum(len(line) for line in current[: a1 + shift])
        old = "".join(a_lines[a1:a2])
        steps.append({"start": start, "end": start + len(old), "text": "".join(b_lines[b1:b2])})
        current[a1 + shift : a2 + shift] = b_lines[b1:b2]
        shift += (b2 - b1) - (a2 - a1)
    cases = []
    for k in range(1, len(steps) + 1):
        edits = steps[:k]
        nxt = steps[k] if k < len(steps) else None
        cases.append({"kind": "model", "category": "commit" if nxt is not None else "commit-silent",
                      "before": before, "edits": edits, "next": nxt})  # fmt: skip
    return cases
