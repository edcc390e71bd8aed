"""Training rows for the next-edit objective (training/next_edit_data.py) and their tokens
(training/next_edit_mix.py): the server's layout, the window at the cursor, the loss on the middle only."""

from __future__ import annotations

import random
import re
from pathlib import Path

from waferline.engine.fim import FimTemplate
from waferline.engine.tokenizer import Tokenizer
from waferline.training.fim import FimIds
from waferline.training.next_edit_data import commit_rows, rename_rows
from waferline.training.next_edit_mix import balanced, next_edit_example

ROOT = Path(__file__).resolve().parents[2]
SOURCE = """import os


def join(base, name):
    full = os.path.join(base, name)
    print(full)
    return full
"""


def code_of(row: dict) -> str:
    """The file before the window: the row's prefix up to the history and the old window."""
    prefix = row["prefix"]
    cut = min(i for i in (prefix.find("# edit:\n"), prefix.find("# rewrite:\n")) if i >= 0)
    return prefix[:cut]


def history_of(row: dict) -> list[str]:
    prefix = row["prefix"]
    return prefix[prefix.find("# edit:\n") : prefix.find("# rewrite:\n")].splitlines()


def test_rename_rows_follow_the_chain_and_end_with_leaving_code_alone() -> None:
    rows = rename_rows(SOURCE, random.Random(0), per_file=20)
    chain = rows[: [r["kind"] for r in rows].index("rename-done") + 1]
    assert len(chain) >= 2
    lines = history_of(chain[0])
    assert lines[0] == "# edit:"
    old, new = lines[1].removeprefix("# - "), lines[2].removeprefix("# + ")
    for r in chain[:-1]:  # each row renames one more occurrence inside its window
        assert r["prefix"].endswith("# rewrite:\n" + r["window"] + "# as:\n"), "the old window is in the prompt"
        assert r["middle"].count(new) == r["window"].count(new) + 1
        assert r["middle"].replace(new, old) == r["window"].replace(new, old)
    done = chain[-1]
    assert done["middle"] == done["window"], "after the last occurrence: nothing to change"
    function = SOURCE[SOURCE.index("def join") :]
    assert code_of(done) + done["middle"] + done["suffix"] == SOURCE.replace(
        function, re.sub(rf"\b{old}\b", new, function)
    )


def test_commit_rows_put_the_window_at_the_cursor() -> None:
    before = "".join(f"v{i} = {i}\n" for i in range(30))
    after = before.replace("v0 = 0", "v0 = 10").replace("v3 = 3", "v3 = 30").replace("v25 = 25", "v25 = 250")
    near, far, done = commit_rows(before, after)
    assert near["kind"] == "commit" and "# - v0 = 0" in near["prefix"] and "# + v0 = 10" in near["prefix"]
    assert "v3 = 30" in near["middle"] and "v3 = 3\n" in near["window"]  # 3 lines below the cursor: in the window
    assert code_of(near) + near["middle"] + near["suffix"] == before.replace("v0 = 0", "v0 = 10").replace(
        "v3 = 3\n", "v3 = 30\n"
    )
    assert far["kind"] == "commit-away" and far["middle"] == far["window"], "the next hunk is out of the window"
    assert done["kind"] == "commit-done" and done["middle"] == done["window"]
    assert len(balanced([near, far, done], random.Random(0))) == 2  # as many rows without an edit as with one


def test_a_row_is_the_prompt_the_engine_builds_with_the_loss_on_the_middle() -> None:
    tok = Tokenizer.from_file(ROOT / "engine" / "models" / "waferline-mini" / "tokenizer.json")
    ids = FimIds.of(tok)
    (row, *_) = rename_rows(SOURCE, random.Random(0), per_file=20)
    tokens, flags = next_edit_example(tok, ids, row, 1024)
    prompt = FimTemplate.for_family("waferline", tok).build(row["prefix"], row["suffix"], "spm")
    assert tokens[: len(prompt)] == prompt and not any(flags[: len(prompt)]) and all(flags[len(prompt) :])
    assert tok.decode(tokens[len(prompt) : -1]) == row["middle"] and tokens[-1] == ids.eot
    short, short_flags = next_edit_example(tok, ids, row, 64)  # too long: the prompt's far ends go
    assert len(short) <= 64 and short[-1] == ids.eot and sum(short_flags) == len(tokens) - len(prompt)
