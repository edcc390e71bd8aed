"""Other open documents' recent edits for a completion prompt: what the developer was just working on elsewhere.

`recent_edits` snapshots, on the event loop, where the most recently edited other documents of the same language
were edited; `recent_edit_snippets` (on a helper thread, with the repository lookup) cuts the lines around each edit
into prompt snippets within a budget (features/inline.py puts them before the document's own context).
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Iterable
from dataclasses import dataclass

from waferline.server.document import Document, DocumentSnapshot
from waferline.syntax.context import Snippet
from waferline.syntax.languages import line_comment

RECENT_EDIT_DOCS = 2  # other open documents whose last edited region goes into the prompt
RECENT_EDIT_LINES = 6  # lines kept on each side of that edit
RECENT_EDIT_MAX_AGE_S = 600.0
# A region still being typed in changes with every keystroke, and being first in the prompt it would make every other
# document's next request prefill its whole prompt again (several documents typed in at once: a KV cache reuse of
# ~20% instead of ~98%); it joins the prompts once it has been still this long.
RECENT_EDIT_SETTLE_S = 2.0


@dataclass(frozen=True)
class RecentEdit:
    """Where another open document was last edited: a snapshot taken on the event loop."""

    path: str
    language_id: str
    text: str
    line: int
    at: float  # time.monotonic() of the edit


def recent_edit_snippets(edits: list[RecentEdit], language_id: str, budget: int, now: float) -> list[Snippet]:
    """The regions most recently edited in other open documents of the same language, newest first, within `budget`
    characters: what the developer was just working on is often what they are about to use. They do not change
    while the user types in this document, so the KV cache keeps them."""
    out: list[Snippet] = []
    fresh = [e for e in edits if e.language_id == language_id and now - e.at <= RECENT_EDIT_MAX_AGE_S]
    for e in sorted(fresh, key=lambda e: e.at, reverse=True)[:RECENT_EDIT_DOCS]:
        lines = e.text.splitlines()
        first = max(0, e.line - RECENT_EDIT_LINES)
        body = "\n".join(lines[first : e.line + RECENT_EDIT_LINES + 1]).rstrip()
        text = f"{line_comment(language_id)} {e.path} (recently edited)\n{body}"
        if body.strip() and len(text) + 1 <= budget:
            budget -= len(text) + 1
            out.append(Snippet("recent_edit", text, path=e.path, start_line=first))
    return out


def recent_edits(documents: Iterable[Document], snapshot: DocumentSnapshot) -> list[RecentEdit]:
    """Snapshots of the other open documents of the snapshot's language that were edited, and not within the last
    RECENT_EDIT_SETTLE_S, the most recent few only (twice what the prompt takes, for those whose region turns out
    blank): one per open document would make every request cost O(open documents)."""
    settled = time.monotonic() - RECENT_EDIT_SETTLE_S
    others = [
        d for d in documents
        if d.uri != snapshot.uri and d.edited_line is not None and d.language_id == snapshot.language_id
        and d.edited_at <= settled
    ]  # fmt: skip
    return [
        RecentEdit(d.uri.rsplit("/", 1)[-1], d.language_id, d.readable_text, d.edited_line, d.edited_at)
        for d in heapq.nlargest(2 * RECENT_EDIT_DOCS, others, key=lambda d: d.edited_at)
        if d.edited_line is not None
    ]
