"""The checks every shipped structural rename case of `waferline eval-nes` passes, whatever its language: one name
renamed at its declaration, the new name free in the file, the intended file renaming that name and nothing else,
silent exactly when nothing follows the user's edit."""

from __future__ import annotations

import re
from typing import Any

from waferline.benchmarks.nes_eval import after_user, intended


def check_rename_case(case: dict[str, Any], name: str = r"[^\W\d]\w*", word: str = r"\w") -> None:
    """`name`: what a name of the language is; `word`: a character of one (JavaScript's `$` too)."""
    (edit,) = case["edits"]
    old, new = case["before"][edit["start"] : edit["end"]], edit["text"]
    assert re.fullmatch(name, old) and new.startswith(old) and new != old
    assert not re.search(rf"(?<!{word}){re.escape(new)}(?!{word})", case["before"]), "the new name was free"
    user, target = after_user(case), intended(case)
    assert (target == user) == case["category"].startswith("silent-") == (not case["expected"])
    # the intended file is the file after the user's edit with some occurrences of the old name renamed, only
    words = re.compile(rf"{word}+")
    assert [w if w != new else old for w in words.findall(target)] == words.findall(case["before"])
    assert words.findall(target).count(new) > (1 if case["expected"] else 0)
