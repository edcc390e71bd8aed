"""A small git repository made in a test's tmp_path, its commits one second apart (so that `git log` lists them in
the order they were made)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


class GitRepo:
    def __init__(self, path: Path) -> None:
        self.path, self.ticks = path, 0
        path.mkdir()
        self.git("init", "-q")
        self.git("config", "user.email", "t@example.com")
        self.git("config", "user.name", "t")

    @property
    def git_dir(self) -> Path:
        return self.path / ".git"

    def git(self, *args: str) -> str:
        self.ticks += 1
        date = f"2026-01-01T00:{self.ticks // 60:02d}:{self.ticks % 60:02d}"
        env = {**os.environ, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
        done = subprocess.run(["git", "-C", str(self.path), *args], check=True, capture_output=True, text=True, env=env)
        return done.stdout.strip()

    def commit(self, files: dict[str, str | bytes], message: str) -> str:
        """Writes the files, commits everything that changed, and returns the commit's hash."""
        for name, text in files.items():
            target = self.path / name
            target.write_bytes(text) if isinstance(text, bytes) else target.write_text(text)
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)
        return self.git("rev-parse", "HEAD")
