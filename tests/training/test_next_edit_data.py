"""Training rows for the next-edit objective (training/next_edit_data.py)."""

from __future__ import annotations

import random
import re

from waferline.training.next_edit_data import commit_rows, rename_rows

SOURCE = """import os


def join(base, name):
    full = os.path.join(base, name)
    print(full)
    return full
"""


def code_of(row: dict) -> str:
    """The row's prefix without the history's comment lines."""
    keep = [ln for ln in row["prefix"].splitlines(keepends=True) if not ln.startswith(("# edit:", "# - ", "# + "))]
    return "".join(keep)


def test_rename_rows_follow_the_chain_and_end_with_leaving_code_alone() -> None:
    rows = rename_rows(SOURCE, random.Random(0), per_file=20)
    chain = rows[: [r["kind"] for r in rows].index("rename-done") + 1]
    assert len(chain) >= 2
    lines = chain[0]["prefix"].splitlines()
    assert lines[0] == "# edit:"
    old, new = lines[1].removeprefix("# - "), lines[2].removeprefix("# + ")
    for r in chain[:-1]:  # each row renames one more occurrence inside its window
        assert r["middle"].count(new) == r["window"].count(new) + 1
        assert r["middle"].replace(new, old) == r["window"].replace(new, old)
    done = chain[-1]
    assert done["middle"] == done["window"], "after the last occurrence: nothing to change"
    function = SOURCE[SOURCE.index("def join") :]
    assert code_of(done) + done["middle"] + done["suffix"] == SOURCE.replace(
        function, re.sub(rf"\b{old}\b", new, function)
    )


def test_commit_rows_take_each_later_hunk_as_the_target() -> None:
    before = "".join(f"v{i} = {i}\n" for i in range(14))
    after = before.replace("v0 = 0", "v0 = 10").replace("v13 = 13", "v13 = 130")
    (row,) = commit_rows(before, after)
    assert row["kind"] == "commit" and "# - v0 = 0" in row["prefix"] and "# + v0 = 10" in row["prefix"]
    assert "v13 = 130" in row["middle"] and "v13 = 13\n" in row["window"]
    assert code_of(row) + row["middle"] + row["suffix"] == after
