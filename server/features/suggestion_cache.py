"""A suggestion, and the typed-through cache: the suggestions a document has seen, answered again while the user
types their start; and the model's recent texts for the document, whose still-valid tails are drafts.

The cache keeps the suggestions the confidence gate held back as well. Typing the start of one is what the model
had predicted, so asking it again would write the same rest (greedy decoding); instead the rest is gated again from
the probabilities of its own tokens (confidence.Evidence): it is shown once it earns its place, and otherwise the
request is answered empty at once, without the model. One case is left to the model: the user stopped inside a
token that alone keeps the rest under the threshold (asked again, the model would draw that token from those that
start with what was typed, and could be sure of it).

`InlineCompletions` (features/inline.py) makes the `Suggestion`s and keeps one `SuggestionCache` per open document,
dropped when it closes.

The drafts: when the model is asked again (the typed-through cache had nothing: the suggestion was held back by the
confidence gate, the editor auto-closed a bracket after the cursor, the user typed through a precomputed one...), the
text it wrote last time, less what the user typed since, is most likely what it writes again. The engine verifies
that draft several tokens per model step (EditRequest.draft, engine/speculate.py) and the text is the same with or
without it, so a draft need not be exactly right: only the last `DRAFT_CONTEXT` characters before the cursor are
compared, never the whole document.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass

from waferline.syntax.confidence import Evidence

CACHE_ENTRIES = 6  # suggestions remembered per document: the one on screen or held back, and a few precomputed ones
OUTPUTS = 4  # the model's latest texts kept per document as drafts
DRAFT_CONTEXT = 256  # characters before a text's cursor that must still be there for its tail to be a draft


@dataclass(frozen=True)
class Suggestion:
    text: str  # what to insert at the cursor
    offset: int  # the cursor, a `str` offset into the text the suggestion was made for
    replace_end: int  # the suggestion replaces [offset, replace_end) (characters the editor auto-closed)
    # "model"; "cache" (the rest of a remembered suggestion); "held" (the rest of one still under the confidence
    # gate: answer nothing, without asking the model again)
    source: str
    confidence: float | None = None  # the calibrated chance it is right (syntax/confidence.py); None from the cache
    features: dict[str, float] | None = None  # what the confidence was computed from


@dataclass(frozen=True)
class _Output:
    offset: int  # the cursor it was written at
    before: str  # the DRAFT_CONTEXT characters before that cursor
    text: str  # what the model wrote there


@dataclass(frozen=True)
class _Entry:
    prefix: str  # the whole text before the cursor when the suggestion was made
    suffix: str  # the whole text after it
    text: str
    replace_len: int
    confidence: float | None  # the whole suggestion's, when it was made (None: the engine cannot tell)
    evidence: Evidence | None  # to gate what is left of it as the user types (None: no probabilities)


class SuggestionCache:
    """The suggestions a document has seen, looked up by the text around the cursor.

    A suggestion stays valid while the user types its start: the text before the cursor grows by exactly what was
    typed, the text after it is unchanged, and what was typed is the suggestion's start. Then the rest is the
    answer, without the model. Precomputed suggestions (made for the text as it will be after an accept) are found
    the same way, with nothing typed yet.

    Each lookup says under which confidence threshold it is asked (automatic or explicit trigger): a suggestion that
    met it when it was made is answered as before, its rest never hidden halfway; one that did not is gated again on
    its rest.
    """

    def __init__(self) -> None:
        self._entries: collections.deque[_Entry] = collections.deque(maxlen=CACHE_ENTRIES)
        self._outputs: collections.deque[_Output] = collections.deque(maxlen=OUTPUTS)

    def remember(
        self, text: str, offset: int, insert_text: str, replace_end: int, confidence: float | None = None,
        evidence: Evidence | None = None,
    ) -> None:  # fmt: skip
        assert 0 <= offset <= replace_end <= len(text), "a suggestion replaces forward from the cursor"
        self._entries.append(
            _Entry(text[:offset], text[offset:], insert_text, replace_end - offset, confidence, evidence)
        )

    def lookup(self, text: str, offset: int, threshold: float = 0.0) -> Suggestion | None:
        """The rest of the newest remembered suggestion whose start the user typed: source "cache" to show,
        or "held" when it is (still) under `threshold`; None when none fits."""
        prefix = text[:offset]
        suffix = text[offset:]
        for e in reversed(self._entries):
            if suffix != e.suffix or not prefix.startswith(e.prefix):
                continue
            typed = prefix[len(e.prefix) :]
            if len(typed) < len(e.text) and e.text.startswith(typed):
                rest = e.text[len(typed) :]
                if e.confidence is None or e.confidence >= threshold:
                    return Suggestion(rest, offset, offset + e.replace_len, "cache")
                sure = e.evidence.confidence(e.text, len(typed)) if e.evidence is not None else None
                if sure is not None and sure >= threshold:
                    return Suggestion(rest, offset, offset + e.replace_len, "cache", sure)
                hope = e.evidence.confidence(e.text, len(typed), partial=False) if e.evidence is not None else None
                if hope is not None and hope >= threshold:
                    return None  # mid-token, and sure enough if that token is right: the model can tell, ask it
                return Suggestion(rest, offset, offset + e.replace_len, "held", sure)
        return None

    def remember_output(self, text: str, offset: int, output: str) -> None:
        """What the model wrote at `offset` of `text` (whether it was shown or not), for `draft`."""
        if output:
            self._outputs.append(_Output(offset, text[max(offset - DRAFT_CONTEXT, 0) : offset], output))

    def draft(self, text: str, offset: int) -> str:
        """The rest of the newest model text the user has typed the start of since (at least its first character
        left), or "" when none: the text before its cursor is still there and what follows it up to `offset` is
        its start."""
        for o in reversed(self._outputs):
            typed = text[o.offset : offset]
            if (
                o.offset <= offset < o.offset + len(o.text)
                and o.text.startswith(typed)
                and text[max(o.offset - DRAFT_CONTEXT, 0) : o.offset] == o.before
            ):
                return o.text[len(typed) :]
        return ""

    def latest_output(self) -> str:
        """The model's newest text for the document, wherever it was written ("" when none): pieces of it are likely
        in the next one even where the user typed something else (EditRequest.lookup)."""
        return self._outputs[-1].text if self._outputs else ""

    def clear(self) -> None:
        self._entries.clear()
        self._outputs.clear()
