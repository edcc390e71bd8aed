"""Prompt lookup: completions of the current line copied from elsewhere in the document, for the model to weigh.

Code repeats itself: an argument list written a few lines up, the other branch of a symmetric `if`, the same
attribute chain. Two kinds of candidate are collected for a cursor at the end of a line's typed text:

- the text that followed the same few characters elsewhere (the last 3-24 characters before the cursor, longest
  key first, nearest occurrence first), up to the end of that line;
- the rest of the line whose start looks most like the typed line (what an editor's "copy the line above" gives).

The engine scores each against its own completion (engine/candidates.py) and keeps the likeliest, so a wrong copy
costs a forward pass, not a wrong suggestion. Only single-line completions get candidates, and only when nothing but
closing brackets follows the cursor on its line.
"""

from __future__ import annotations

import difflib
import re

MAX_CANDIDATES = 4
MAX_CHARS = 120
KEY_LENGTHS = (24, 16, 10, 6, 3)  # characters before the cursor to look up, longest first
MIN_SIMILARITY = 0.6
CLOSERS = re.compile(r"[\s)\]}]*")


def line_candidates(prefix: str, suffix: str, *, limit: int = MAX_CANDIDATES) -> tuple[str, ...]:
    """Up to `limit` distinct candidate completions of the line that ends `prefix` (the text before the cursor)."""
    line_start = prefix.rfind("\n") + 1
    typed = prefix[line_start:]
    rest = suffix.split("\n", 1)[0]
    if not typed.strip() or not CLOSERS.fullmatch(rest):
        return ()
    others = prefix[:line_start] + "\n" + suffix[len(rest) :]
    found: list[str] = []

    def add(candidate: str) -> None:
        candidate = candidate.rstrip()
        if rest.strip() and candidate.endswith(rest.strip()):
            candidate = candidate[: -len(rest.strip())].rstrip()  # the editor's auto-closed brackets stay theirs
        if candidate.strip() and len(candidate) <= MAX_CHARS and candidate not in found:
            found.append(candidate)

    body = typed.lstrip()
    keys = dict.fromkeys(body[-n:] for n in KEY_LENGTHS)  # longest first, each once
    for key in (k for k in keys if len(k.strip()) >= 3):
        for at in _nearest(others, key, line_start):
            add(_line_rest(others, at + len(key)))
            if len(found) >= limit:
                return tuple(found)
    similar = _most_similar_line(others, body)
    if similar is not None:
        add(similar)
    return tuple(found[:limit])


def _nearest(text: str, key: str, cursor: int) -> list[int]:
    """Offsets of `key` in text, nearest to the cursor's line first."""
    hits = [m.start() for m in re.finditer(re.escape(key), text)]
    return sorted(hits, key=lambda at: abs(at - cursor))[:8]


def _line_rest(text: str, at: int) -> str:
    end = text.find("\n", at)
    return text[at : end if end != -1 else len(text)]


def _most_similar_line(text: str, body: str) -> str | None:
    """The rest of the line whose stripped start is most like `body` (ties: the first), if similar enough."""
    best, best_score = None, MIN_SIMILARITY
    for line in text.split("\n"):
        stripped = line.strip()
        if len(stripped) <= len(body):
            continue
        matcher = difflib.SequenceMatcher(None, body, stripped[: len(body)], autojunk=False)
        # quick_ratio bounds ratio from above: most lines are ruled out without the full comparison.
        if matcher.quick_ratio() > best_score and (score := matcher.ratio()) > best_score:
            best, best_score = stripped[len(body) :], score
    return best
