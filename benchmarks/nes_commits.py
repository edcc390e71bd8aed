"""The model cases of `waferline eval-nes`: real commits of a permissively licensed repository, replayed hunk by
hunk (benchmarks/nes_cases.py writes them, with hunks from benchmarks/nes_structural.py and the commits' files from
training/git_history.py; the texts are shipped, not the repository).

A commit that changes exactly one Python file, by at most MAX_CHANGED_LINES lines in 2 to MAX_HUNKS hunks, gives
one case per hunk after the first: the user has made hunks 1..k (in the file's order), the next hunk is the target;
and one case where all hunks are made and the right answer is silence.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from waferline.benchmarks.nes_structural import hunks
from waferline.training.git_history import changed_files

MAX_HUNKS = 6
MAX_CHANGED_LINES = 40
MAX_FILE_CHARS = 20_000


def commit_cases(git_dir: Path, name: str, licence: str, limit: int, seed: int = 0) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for change in changed_files(git_dir, MAX_CHANGED_LINES, MAX_FILE_CHARS, single_file=True):
        found = hunks(change.before, change.after)
        if not 2 <= len(found) <= MAX_HUNKS:
            continue
        source = {"repository": name, "commit": change.commit, "licence": licence, "file": change.path}
        out.extend({**case, "source": source} for case in split(change.before, change.after, found))
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
