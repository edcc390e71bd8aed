"""A suggestion, and the typed-through cache: the suggestions a document has seen, answered again while the user
types their start.

`InlineCompletions` (features/inline.py) makes the `Suggestion`s and keeps one `SuggestionCache` per open document,
dropped when it closes.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass

CACHE_ENTRIES = 4  # suggestions remembered per document: the one on screen and a few precomputed ones


@dataclass(frozen=True)
class Suggestion:
    text: str  # what to insert at the cursor
    offset: int  # the cursor, a `str` offset into the text the suggestion was made for
    replace_end: int  # the suggestion replaces [offset, replace_end) (characters the editor auto-closed)
    source: str  # "model" or "cache"
    confidence: float | None = None  # the calibrated chance it is right (features/confidence.py); None from the cache
    features: dict[str, float] | None = None  # what the confidence was computed from


@dataclass(frozen=True)
class _Entry:
    prefix: str  # the whole text before the cursor when the suggestion was made
    suffix: str  # the whole text after it
    text: str
    replace_len: int


class SuggestionCache:
    """The suggestions a document has seen, looked up by the text around the cursor.

    A suggestion stays valid while the user types its start: the text before the cursor grows by exactly what was
    typed, the text after it is unchanged, and what was typed is the suggestion's start. Then the rest is the
    answer, without the model. Precomputed suggestions (made for the text as it will be after an accept) are found
    the same way, with nothing typed yet.
    """

    def __init__(self) -> None:
        self._entries: collections.deque[_Entry] = collections.deque(maxlen=CACHE_ENTRIES)

    def remember(self, text: str, offset: int, insert_text: str, replace_end: int) -> None:
        assert 0 <= offset <= replace_end <= len(text), "a suggestion replaces forward from the cursor"
        self._entries.append(_Entry(text[:offset], text[offset:], insert_text, replace_end - offset))

    def lookup(self, text: str, offset: int) -> Suggestion | None:
        prefix = text[:offset]
        suffix = text[offset:]
        for e in reversed(self._entries):
            if suffix != e.suffix or not prefix.startswith(e.prefix):
                continue
            typed = prefix[len(e.prefix) :]
            if len(typed) < len(e.text) and e.text.startswith(typed):
                return Suggestion(e.text[len(typed) :], offset, offset + e.replace_len, "cache")
        return None

    def clear(self) -> None:
        self._entries.clear()
