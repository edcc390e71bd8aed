"""The git-history walker that the next-edit training rows and the eval-nes commit cases share
(training/git_history.py): which commits, which files, which (before, after) texts."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from git_repo import GitRepo  # tests/support (on sys.path: tests/conftest.py)

from waferline.training.git_history import changed_files

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="no git")

A = "".join(f"a_{i} = {i}\n" for i in range(10))
B = "".join(f"b_{i} = {i}\n" for i in range(10))


@pytest.fixture
def history(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    repo = GitRepo(tmp_path / "repo")
    big = "x = 1\n" * 300
    c: dict[str, str] = {}
    c["first"] = repo.commit({"a.py": A, "b.py": B, "notes.txt": "n\n", "blob.py": b"\x00\x01", "big.py": big}, "1")
    main = repo.git("rev-parse", "--abbrev-ref", "HEAD")
    c["one"] = repo.commit({"a.py": A.replace("a_3 = 3", "a_3 = 30")}, "one Python file")
    c["two"] = repo.commit({"a.py": A.replace("a_3 = 3", "a_3 = 31"), "b.py": B.replace("b_1 = 1", "b_1 = 10")}, "2")
    c["text"] = repo.commit({"notes.txt": "m\n"}, "not Python")
    c["new"] = repo.commit({"new.py": "y = 1\n"}, "a new file")
    repo.git("mv", "b.py", "c.py")
    c["rename"] = repo.commit({}, "a rename")
    many = A.replace("= ", "== ")
    c["many"] = repo.commit({"a.py": many}, "ten lines changed")
    c["binary"] = repo.commit({"blob.py": b"\x00\x02"}, "binary")
    c["big"] = repo.commit({"big.py": big.replace("x = 1", "x = 2", 1)}, "too large a file")
    repo.git("checkout", "-q", "-b", "side")
    c["side"] = repo.commit({"a.py": many.replace("a_9 == 9", "a_9 == 90")}, "on a branch")
    repo.git("checkout", "-q", main)
    repo.git("merge", "-q", "--no-ff", "-m", "merge", "side")
    c["merge"] = repo.git("rev-parse", "HEAD")
    return repo.git_dir, c


def test_changed_python_files_newest_first_with_their_texts(history: tuple[Path, dict[str, str]]) -> None:
    git_dir, c = history
    found = list(changed_files(git_dir, max_changed_lines=5, max_file_chars=1000))
    assert [(f.commit, f.path) for f in found] == [
        (c["side"], "a.py"),
        (c["two"], "a.py"),
        (c["two"], "b.py"),
        (c["one"], "a.py"),
    ]  # not: the merge, a text file, a new file, a rename, 20 changed lines, a binary file, a file over 1000 chars
    assert found[-1].before == A and found[-1].after == A.replace("a_3 = 3", "a_3 = 30")
    assert found[1].before == found[-1].after
    # the limits are the caller's: a larger change and a larger file pass
    wider = {(f.commit, f.path) for f in changed_files(git_dir, max_changed_lines=20, max_file_chars=2000)}
    assert {(c["many"], "a.py"), (c["big"], "big.py")} <= wider


def test_single_file_keeps_only_commits_that_change_one_file(history: tuple[Path, dict[str, str]]) -> None:
    git_dir, c = history
    found = [(f.commit, f.path) for f in changed_files(git_dir, 5, 1000, single_file=True)]
    assert found == [(c["side"], "a.py"), (c["one"], "a.py")]


def test_a_folder_that_is_not_a_git_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(OSError, match="not a git directory"):
        next(changed_files(tmp_path, 5, 1000))
