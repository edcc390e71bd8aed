"""The next-edit rows of a `waferline train --next-edit` run, gathered and tokenized for the packed stream.

Rows (training/next_edit_data.py) come from the training corpus's files (`rename_rows`, synthetic renames) and from
the git histories of train.txt distributions (`commit_rows`, the files from training/git_history.py: Python files
changed by 1 to MAX_CHANGED_LINES lines, at most MAX_FILE_CHARS long, newest first). Where nothing follows
in the window (kinds `-away`, `-done`) the row teaches the model to copy the window unchanged; those are kept at
most as many as the rows with an edit, per source, so that the model does not learn silence only. Each row becomes
one suffix-prefix-middle example laid out as the engine builds the prompt (training/fim.py's `fim_prompt`) with its
loss on the middle and the closing <|endoftext|> only (the flags beside the tokens).
"""

from __future__ import annotations

import logging
import random
from collections import Counter
from collections.abc import Sequence
from itertools import islice
from pathlib import Path
from typing import Any

from waferline.engine.tokenizer import Tokenizer
from waferline.training.data import SourceFile
from waferline.training.fim import FimIds, fim_prompt, fit_tokens
from waferline.training.git_history import changed_files
from waferline.training.next_edit_data import commit_rows, rename_rows

log = logging.getLogger("waferline.training")

MAX_CHANGED_LINES = 60
MAX_FILE_CHARS = 40_000


def balanced(rows: list[dict[str, Any]], rng: random.Random) -> list[dict[str, Any]]:
    """The rows with an edit, and at most as many of those without one (drawn at random)."""
    edits = [r for r in rows if r["middle"] != r["window"]]
    still = [r for r in rows if r["middle"] == r["window"]]
    rng.shuffle(still)
    return edits + still[: max(len(edits), 1)]


def gather_rows(files: Sequence[SourceFile], n_files: int, git_dirs: Sequence[Path], per_repo: int,
                seed: int) -> tuple[list[dict[str, Any]], dict[str, int]]:  # fmt: skip
    """Next-edit rows: renames of `n_files` of `files` (drawn at random), commits of each git dir (`per_repo`
    file versions at most); with the counts of each kind."""
    rng = random.Random(seed)
    chosen = rng.sample(list(files), min(n_files, len(files)))
    renames: list[dict[str, Any]] = []
    for f in chosen:
        renames.extend(rename_rows(f.text, rng, per_file=4))
    commits: list[dict[str, Any]] = []
    for git_dir in git_dirs:
        changes = islice(changed_files(git_dir, MAX_CHANGED_LINES, MAX_FILE_CHARS), per_repo)
        found = [r for c in changes for r in commit_rows(c.before, c.after)]
        log.info("next-edit rows: %d from %s", len(found), git_dir)
        commits.extend(found)
    rows = balanced(renames, rng) + balanced(commits, rng)
    rng.shuffle(rows)
    return rows, dict(Counter(r["kind"] for r in rows))


Example = tuple[list[int], list[bool]]


def next_edit_example(tokenizer: Tokenizer, ids: FimIds, r: dict[str, Any], max_tokens: int) -> Example:
    """(tokens, loss flags) of one row in suffix-prefix-middle order; the prefix loses its start and the suffix its
    end when the row is too long, as the engine shortens a prompt (engine/local.py's `prompt_ids`)."""
    encoded = (tokenizer.encode(r["prefix"]), tokenizer.encode(r["middle"]), tokenizer.encode(r["suffix"]))
    p, m, s = fit_tokens(*encoded, max_tokens, suffix_share=4)
    prompt = fim_prompt(ids, p, s, "spm")
    tokens = [*prompt, *m, ids.eot]
    return tokens, [False] * len(prompt) + [True] * (len(m) + 1)
