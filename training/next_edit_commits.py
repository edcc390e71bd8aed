"""Consecutive versions of files from the git histories of train.txt distributions, for the next-edit rows
(training/next_edit_data.py's `commit_rows`).

The repositories are bare git directories on this machine (`git --git-dir`, read only; docs/next-edit.md says how
they are mirrored). A commit gives one (before, after) pair per Python file it changes, when the file existed before,
is at most MAX_FILE_CHARS long, and the change is 1 to MAX_CHANGED_LINES lines; merges are skipped. Commits are read
newest first, at most `per_repo` pairs of a repository, so one long history does not make the mix.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

MAX_CHANGED_LINES = 60
MAX_FILE_CHARS = 40_000


def _git(git_dir: Path, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", str(git_dir), *args], check=True, capture_output=True, text=True,
                          errors="replace").stdout  # fmt: skip


def file_versions(git_dir: Path, per_repo: int) -> Iterator[tuple[str, str, str]]:
    """(commit:path, before, after) of up to `per_repo` changed Python files of the repository, newest first."""
    if not (git_dir / "HEAD").is_file():
        raise OSError(f"{git_dir} is not a git directory (a bare repository or a .git folder)")
    found = 0
    for commit in _git(git_dir, "log", "--no-merges", "--format=%H").split():
        for line in _git(git_dir, "show", "--numstat", "--format=", commit).splitlines():
            parts = line.split("\t")
            if len(parts) != 3 or not parts[2].endswith(".py") or "-" in parts[:2] or "=>" in parts[2]:
                continue
            if not 1 <= int(parts[0]) + int(parts[1]) <= MAX_CHANGED_LINES:
                continue
            try:
                before = _git(git_dir, "show", f"{commit}^:{parts[2]}")
                after = _git(git_dir, "show", f"{commit}:{parts[2]}")
            except subprocess.CalledProcessError:
                continue  # a new file, or the first commit
            if len(before) > MAX_FILE_CHARS or "\r" in before or before == after:
                continue
            yield f"{commit[:12]}:{parts[2]}", before, after
            found += 1
            if found >= per_repo:
                return
