"""File discovery: .gitignore honoured (with git and without), symlink escapes refused, binaries, big files skipped."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from waferline.server.repository.discovery import DiscoveryOptions, discover, read_source
from waferline.server.repository.index import IndexOptions, WorkspaceIndex

HAVE_GIT = shutil.which("git") is not None


def write(root: Path, rel: str, text: str | bytes) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def git_init(root: Path) -> None:
    subprocess.run(["git", "init", "-q", str(root)], check=True, capture_output=True)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    write(root, "app/main.py", "def main():\n    pass\n")
    write(root, "app/generated.py", "X = 1\n")
    write(root, "build/out.py", "Y = 2\n")
    write(root, "logs/keep.py", "Z = 3\n")
    write(root, "logs/drop.py", "W = 4\n")
    write(root, "notes.txt", "not a language we index\n")
    write(root, ".gitignore", "build/\napp/generated.py\n")
    write(root, "logs/.gitignore", "*.py\n!keep.py\n")
    write(root, "node_modules/lib/index.js", "module.exports = 1;\n")
    return root


MODES = [
    pytest.param(False, id="walk"),
    pytest.param(True, id="git", marks=pytest.mark.skipif(not HAVE_GIT, reason="no git")),
]


@pytest.mark.parametrize("use_git", MODES)
def test_gitignore_is_honoured(folder: Path, use_git: bool) -> None:
    if use_git:
        git_init(folder)
    found = discover(folder, DiscoveryOptions(use_git=use_git))
    assert found.source == ("git" if use_git else "walk")
    assert found.files == ["app/main.py", "logs/keep.py"]


def test_folder_ignored_by_enclosing_repository_is_walked(tmp_path: Path) -> None:
    if not HAVE_GIT:
        pytest.skip("no git")
    git_init(tmp_path)
    write(tmp_path, ".gitignore", "vendor/\n")
    inner = tmp_path / "vendor" / "lib"
    write(inner, "mod.py", "def f():\n    pass\n")
    found = discover(inner)
    assert (found.source, found.files) == ("walk", ["mod.py"])


def test_symlink_escape_refused(tmp_path: Path) -> None:
    outside = write(tmp_path, "secret/keys.py", "TOKEN = 'do not read'\n")
    root = tmp_path / "ws"
    write(root, "inside.py", "A = 1\n")
    (root / "leak.py").symlink_to(outside)
    (root / "leakdir").symlink_to(outside.parent, target_is_directory=True)
    (root / "alias.py").symlink_to(root / "inside.py")
    found = discover(root, DiscoveryOptions(use_git=False))
    assert found.files == ["alias.py", "inside.py"]
    assert found.skipped["outside the folder"] == 1  # leak.py; leakdir is a symlinked folder, never entered
    assert read_source(root.resolve(), "leak.py", 1 << 20) is None
    assert read_source(root.resolve(), "../secret/keys.py", 1 << 20) is None
    index = WorkspaceIndex(root, persist=False)
    index.build()
    assert index.definitions("TOKEN") == []
    assert index.update_file(outside, "TOKEN = 1\n") is False
    assert index.update_file(root / "leak.py", "TOKEN = 1\n") is False
    assert index.definitions("TOKEN") == []


def test_binary_and_large_files_skipped(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    write(root, "ok.py", "A = 1\n")
    write(root, "blob.py", b"A = 1\n\x00\x01\x02")
    write(root, "huge.py", "B = 2\n" * 100)
    found = discover(root, DiscoveryOptions(use_git=False, max_file_bytes=200))
    assert found.skipped["too large"] == 1
    assert "huge.py" not in found.files
    assert read_source(root.resolve(), "blob.py", 200) is None
    index = WorkspaceIndex(root, persist=False, options=IndexOptions(use_git=False, max_file_bytes=200))
    report = index.build()
    assert report.parsed == 1 and report.skipped["binary or unreadable"] == 1
    assert [d.name for d in index.definitions("A")] == ["A"]


def test_extra_excludes_and_file_limit(folder: Path) -> None:
    found = discover(folder, DiscoveryOptions(use_git=False, exclude=("logs/",)))
    assert found.files == ["app/main.py"]
    limited = discover(folder, DiscoveryOptions(use_git=False, max_files=1))
    assert limited.truncated and limited.files == ["app/main.py"]


def test_git_is_not_allowed_to_run_repository_commands(tmp_path: Path) -> None:
    """A repository's config can name programs (core.fsmonitor); listing its files must not start them."""
    if not HAVE_GIT:
        pytest.skip("no git")
    root = tmp_path / "ws"
    write(root, "a.py", "A = 1\n")
    git_init(root)
    marker = tmp_path / "ran"
    hook = write(tmp_path, "hook.sh", f"#!/bin/sh\ntouch {marker}\n")
    os.chmod(hook, 0o755)
    subprocess.run(["git", "-C", str(root), "config", "core.fsmonitor", str(hook)], check=True)
    found = discover(root)
    assert found.files == ["a.py"]
    assert not marker.exists()
