"""Consecutive versions of files from a git history: the one walker behind the next-edit training rows
(training/next_edit_mix.py's `gather_rows`) and the commit cases of `waferline eval-nes` (benchmarks/nes_commits.py).

It lives in training/ because that is where the offline data is read and benchmarks/ may import training/ (never the
other way); nothing the product runs reads git histories, so none of server/, engine/, hardware/ or syntax/ is the
place. The repositories are bare git directories on this machine (`git --git-dir`, read only; docs/next-edit.md
says how they are mirrored).

A commit gives one (before, after) pair per Python file it changes, when the file existed before (renames, new
files and binary files are skipped), is at most `max_file_chars` long without a carriage return, and the change is
1 to `max_changed_lines` lines; merges are skipped. Commits are read newest first; the caller takes as many as it
wants (the walk is lazy).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple


class FileChange(NamedTuple):
    commit: str  # the full hash
    path: str
    before: str
    after: str


def _git(git_dir: Path, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", str(git_dir), *args], check=True, capture_output=True, text=True,
                          errors="replace").stdout  # fmt: skip


def changed_files(
    git_dir: Path, max_changed_lines: int, max_file_chars: int, *, single_file: bool = False
) -> Iterator[FileChange]:
    """The changed Python files of the repository's commits, newest first; with `single_file`, only commits that
    change exactly one file (of any kind)."""
    if not (git_dir / "HEAD").is_file():
        raise OSError(f"{git_dir} is not a git directory (a bare repository or a .git folder)")
    for commit in _git(git_dir, "log", "--no-merges", "--format=%H").split():
        stat = [line.split("\t") for line in _git(git_dir, "show", "--numstat", "--format=", commit).splitlines()]
        if single_file and len(stat) != 1:
            continue
        for parts in stat:
            if len(parts) != 3 or not parts[2].endswith(".py") or "-" in parts[:2] or "=>" in parts[2]:
                continue
            if not 1 <= int(parts[0]) + int(parts[1]) <= max_changed_lines:
                continue
            try:
                before = _git(git_dir, "show", f"{commit}^:{parts[2]}")
                after = _git(git_dir, "show", f"{commit}:{parts[2]}")
            except subprocess.CalledProcessError:
                continue  # a new file, or the first commit
            if len(before) > max_file_chars or "\r" in before or before == after:
                continue
            yield FileChange(commit, parts[2], before, after)
