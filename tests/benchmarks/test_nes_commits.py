"""The commit cases of `waferline eval-nes` (benchmarks/nes_commits.py) from a small history: only commits that
change one Python file in 2 to MAX_HUNKS hunks, one case per hunk after the first and a silent one."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from git_repo import GitRepo  # tests/support (on sys.path: tests/conftest.py)

from waferline.benchmarks.nes_commits import commit_cases

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="no git")

A = "".join(f"a_{i} = {i}\n" for i in range(12))
B = "".join(f"b_{i} = {i}\n" for i in range(12))


def apply(text: str, edits: list[dict]) -> str:
    for e in edits:
        text = text[: e["start"]] + e["text"] + text[e["end"] :]
    return text


def test_a_one_file_commit_of_three_hunks_gives_two_next_hunks_and_silence(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "repo")
    repo.commit({"a.py": A, "b.py": B}, "first")
    stages = [A]  # the file after each hunk in turn
    for old, new in (("a_1 = 1", "a_1 = 10"), ("a_5 = 5", "a_5 = 50"), ("a_9 = 9", "a_9 = 90")):
        stages.append(stages[-1].replace(old, new))
    after = stages[-1]
    three = repo.commit({"a.py": after}, "three hunks")
    repo.commit({"a.py": after.replace("a_0 = 0", "a_0 = 1"), "b.py": B.replace("b_0 = 0", "b_0 = 1")}, "two files")
    repo.commit({"b.py": B.replace("b_0 = 0", "b_0 = 1").replace("b_3 = 3", "b_3 = 30")}, "one hunk")
    cases = commit_cases(repo.git_dir, "owner/name", "MIT", limit=10)
    assert sorted(c["category"] for c in cases) == ["commit", "commit", "commit-silent"]
    assert sorted(c["id"] for c in cases) == ["commit-000", "commit-001", "commit-002"]
    for case in cases:
        assert case["source"] == {"repository": "owner/name", "commit": three, "licence": "MIT", "file": "a.py"}
        assert case["before"] == A
        made = apply(A, case["edits"])
        assert made == stages[len(case["edits"])]
        if case["next"] is None:
            assert made == after
        else:
            assert apply(made, [case["next"]]) == stages[len(case["edits"]) + 1]
    assert len(commit_cases(repo.git_dir, "owner/name", "MIT", limit=1)) == 1
