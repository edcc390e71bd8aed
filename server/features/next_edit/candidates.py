"""The structural candidates, cheapest and most specific first; each yields only edits that are exact.

1. a changed function signature whose call sites no longer match (features/next_edit/signature.py);
2. a renamed identifier whose other occurrences in its scope carry the old name (features/next_edit/rename.py);
3. the same textual substitution on sibling lines (features/next_edit/substitution.py);
4. from the user's newest edit only, the same edit repeated elsewhere in the file where what changed is distinctive
   (features/next_edit/repeated.py).

They read the document's own tree (Python's scopes for the first two, and JavaScript's, TypeScript's and Go's block
scopes: features/next_edit/lexical.py, rename_lexical.py, signature_lexical.py; Rust's, Java's, C's and C++'s:
lexical_declared.py, lexical_rust.py, lexical_java_c.py, signature_declared.py; the third is text and works in any
language);
`elsewhere`, given only for a code action, finds a signature's call sites in other files
(features/next_edit/elsewhere.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from waferline.server.features.next_edit.lexical import Rules, rules_for
from waferline.server.features.next_edit.rename import rename_edits, renamed_identifier
from waferline.server.features.next_edit.rename_lexical import IDENTIFIER_TYPES, lexical_rename_edits
from waferline.server.features.next_edit.repeated import line_edits, word_edits
from waferline.server.features.next_edit.signature import Change, call_site_edits, signature_change
from waferline.server.features.next_edit.signature_declared import declared_edits
from waferline.server.features.next_edit.signature_lexical import lexical_call_site_edits, lexical_signature_change
from waferline.server.features.next_edit.source import Edit, Source
from waferline.server.features.next_edit.substitution import substitution_edits
from waferline.syntax.edit_history import EditEvent, map_offset


@dataclass(frozen=True)
class Candidate:
    edit: Edit
    source: str  # "rename", "signature", "substitution"
    others: tuple[Edit, ...] = ()  # edits of other documents that belong with it


def structural_candidates(
    src: Source, uri: str, language_id: str, start: int, end: int, event: EditEvent, later: list[EditEvent],
    accepted: list[EditEvent], cursor: int, elsewhere: Callable[[Change], list[Edit]] | None = None,
    newest: bool = True,
) -> Iterator[Candidate]:  # fmt: skip
    """Candidates after the user's `event`, whose new text is now `[start, end)`; `later` are the events since,
    `accepted` those of them that were accepted suggestions (a chain): the nearest first. `newest`: the event is the
    user's newest edit (the repeated edits follow that one only)."""
    chained = frozenset(
        at for i, e in enumerate(later) if e in accepted and (at := map_offset(e.start, later[i + 1 :])) is not None
    )
    if language_id == "python":
        renamed = renamed_identifier(src, start, end, event, chained)
        if renamed is not None:
            edits = rename_edits(src, renamed)
            at = src.offset(renamed.node.start_byte)
            for e in [e for e in edits if e.start > at] + [e for e in edits if e.start <= at]:
                yield Candidate(e, "rename")
        change = signature_change(src, start, end, event)
        if change is not None:
            other_files = tuple(elsewhere(change)) if elsewhere is not None else ()
            here = call_site_edits(src, change, chained)
            for e in here:
                yield Candidate(e, "signature", other_files)
            if not here and other_files:
                yield Candidate(other_files[0], "signature", other_files[1:])
    rules = rules_for(language_id)
    if rules is not None:
        yield from _lexical(src, rules, language_id, start, end, event, chained)
    declared = declared_edits(src, language_id, start, end, event, chained)  # Rust, Java, C, C++
    if declared is not None:
        yield from (Candidate(e, kind) for kind, e in declared[0])
        if declared[1]:
            return  # a local's rename or a followed signature's change: not the substitution's
    for e in substitution_edits(src, language_id, start, end, event):
        yield Candidate(e, "substitution")
    if not newest:
        return
    yield from (Candidate(e, "repeated") for e in line_edits(src, start, end, event))
    yield from (Candidate(e, "repeated") for e in word_edits(src, language_id, start, end, event))


def _lexical(
    src: Source, rules: Rules, language_id: str, start: int, end: int, event: EditEvent, chained: frozenset[int]
) -> Iterator[Candidate]:
    """JavaScript, TypeScript and Go: the same two candidates on block scopes (features/next_edit/lexical.py)."""
    renamed = renamed_identifier(src, start, end, event, chained, IDENTIFIER_TYPES)
    if renamed is not None:
        edits = lexical_rename_edits(src, rules, renamed)
        at = src.offset(renamed.node.start_byte)
        for e in [e for e in edits if e.start > at] + [e for e in edits if e.start <= at]:
            yield Candidate(e, "rename")
    change = lexical_signature_change(src, language_id, rules, start, end, event)
    if change is not None:
        for e in lexical_call_site_edits(src, rules, change, chained):
            yield Candidate(e, "signature")
