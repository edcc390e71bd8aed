"""Each open document's recent edits, the main input of next-edit suggestions (features/next_edit/).

Keystrokes arrive one `didChange` each; what a next edit follows is what the user *did*: renamed `value` to
`amount`, added a parameter. `EditHistory` coalesces edits that touch the span of the previous one and come within
COALESCE_S of it into one `EditEvent` (old text -> new text at a start offset), keeps the newest MAX_EVENTS or
fewer within a budget of characters, and marks the events that were an accepted suggestion (the client's
`waferline.acceptInlineEdit`), so a candidate can tell the user's own edit from the chain it started. A full-text
`didChange` is diffed against the previous text (difflib), so it is recorded as the edits it made, not as one
replacement of everything. (Other documents' last edited regions for the completion prompt are
features/recent_edits.py's; this history is per document and holds the texts.)
"""

from __future__ import annotations

import difflib
import time
from collections import deque
from dataclasses import dataclass, replace

COALESCE_S = 1.0  # edits of the same span within this long are one event (a word typed, a name retyped)
MAX_EVENTS = 16
MAX_CHARS = 8_000  # old + new text kept over all events (about 2,000 tokens of the shipped model's tokenizer)
MAX_CHAIN = 1024  # accepted suggestions kept after the user's newest edit (a rename through a long file)
MAX_DIFF_CHARS = 200_000  # a full-text change of a larger document is recorded as one replacement, not diffed
JOIN_GAP = 8  # a diff's changes this close on one line are one edit (a word retyped shares letters with the old)


@dataclass(frozen=True)
class EditEvent:
    """`old` at `[start, start + len(old))` of the text before became `new` at `[start, start + len(new))`."""

    start: int
    old: str
    new: str
    at: float  # time.monotonic() of its last edit
    accepted: bool = False  # the edit was an accepted suggestion, not typed by the user
    version: int = 0  # the document's version after it

    @property
    def new_end(self) -> int:
        return self.start + len(self.new)

    @property
    def old_end(self) -> int:
        return self.start + len(self.old)

    @property
    def size(self) -> int:
        return len(self.old) + len(self.new)

    def trimmed(self) -> EditEvent:
        """The same edit without the text its old and new sides share at both ends ("w, h)" -> "w, height)" is
        "" -> "eight" after "w, h")."""
        p = 0
        while p < min(len(self.old), len(self.new)) and self.old[p] == self.new[p]:
            p += 1
        q = 0
        while q < min(len(self.old), len(self.new)) - p and self.old[-1 - q] == self.new[-1 - q]:
            q += 1
        if p == 0 and q == 0:
            return self
        return replace(self, start=self.start + p, old=self.old[p : len(self.old) - q],
                       new=self.new[p : len(self.new) - q])  # fmt: skip


def map_offset(offset: int, later: list[EditEvent]) -> int | None:
    """Where `offset` of an older text is after the `later` events, None when one of them rewrote it."""
    for e in later:
        if offset >= e.old_end:
            offset += len(e.new) - len(e.old)
        elif offset > e.start:
            return None
    return offset


class EditHistory:
    """One document's recent edits, oldest first."""

    def __init__(self) -> None:
        self.events: deque[EditEvent] = deque()

    def record(
        self, start: int, old: str, new: str, *, version: int, now: float | None = None, accepted: bool = False
    ) -> None:
        """One edit of the text: `old` at `start` replaced by `new` (`accepted`: a suggestion the client applied)."""
        if old == new:
            return
        now = time.monotonic() if now is None else now
        last = self.events[-1] if self.events else None
        if accepted:
            self.events.append(EditEvent(start, old, new, now, accepted=True, version=version))
        elif (
            last is not None and not last.accepted and now - last.at <= COALESCE_S
            and start <= last.new_end and start + len(old) >= last.start
        ):  # fmt: skip
            self.events[-1] = _merge(last, start, old, new, now, version)
            if self.events[-1].old == self.events[-1].new:  # typed and deleted again: nothing happened
                self.events.pop()
        else:
            self.events.append(EditEvent(start, old, new, now, version=version))
        self._trim()

    def record_full(self, before: str, after: str, *, version: int, now: float | None = None) -> None:
        """A full-text replacement, recorded as the edits that turn `before` into `after`."""
        if before == after:
            return
        if len(before) + len(after) > MAX_DIFF_CHARS:
            self.record(0, before, after, version=version, now=now)
            return
        matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
        groups: list[list[int]] = []  # [i1, i2, j1, j2] of changes, those close together on a line joined
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                continue
            if groups and i1 - groups[-1][1] <= JOIN_GAP and "\n" not in before[groups[-1][1] : i1]:
                groups[-1][1], groups[-1][3] = i2, j2  # "value" -> "amount" is one edit, not "v" and "lue"
            else:
                groups.append([i1, i2, j1, j2])
        shift = 0
        for i1, i2, j1, j2 in groups:
            self.record(i1 + shift, before[i1:i2], after[j1:j2], version=version, now=now)
            shift += (j2 - j1) - (i2 - i1)

    def mark_accepted(self, start: int, old: str, new: str, *, version: int) -> bool:
        """The newest event that is exactly this edit was an accepted suggestion (True when one was found)."""
        for i in range(len(self.events) - 1, -1, -1):
            e = self.events[i]
            if e.start == start and e.old == old and e.new == new:
                self.events[i] = replace(e, accepted=True)
                return True
        return False

    def last_user_event(self) -> tuple[EditEvent, list[EditEvent]] | None:
        """The newest event the user made, with the events after it (accepted suggestions; oldest first)."""
        found = self.user_events(1)
        return found[0] if found else None

    def user_events(self, limit: int) -> list[tuple[EditEvent, list[EditEvent]]]:
        """The newest `limit` events the user made, newest first, each with every event after it."""
        events, out = list(self.events), []
        for i in range(len(events) - 1, -1, -1):
            if not events[i].accepted:
                out.append((events[i], events[i + 1 :]))
                if len(out) == limit:
                    break
        return out

    def _trim(self) -> None:
        """The oldest events go first, but never the user's newest one or the accepted suggestions after it: a
        chain (every use of a renamed name) reads them, however long it is (up to MAX_CHAIN events)."""
        newest_user = next((i for i in range(len(self.events) - 1, -1, -1) if not self.events[i].accepted), 0)
        chars = sum(e.size for e in self.events)
        while newest_user > 0 and (len(self.events) > MAX_EVENTS or chars > MAX_CHARS):
            chars -= self.events.popleft().size
            newest_user -= 1
        while len(self.events) > MAX_CHAIN:
            self.events.popleft()


def join(first: EditEvent, second: EditEvent) -> EditEvent | None:
    """Two events one after the other at the same spot (`second` touches `first`'s new text) as one, whatever the
    time between them: the old name deleted, a pause, the new one typed is one rename. None when they do not touch
    or cancel out."""
    if first.accepted or second.accepted or not (second.start <= first.new_end and second.old_end >= first.start):
        return None
    joined = _merge(first, second.start, second.old, second.new, second.at, second.version)
    return None if joined.old == joined.new else joined


def _merge(last: EditEvent, start: int, old: str, new: str, now: float, version: int) -> EditEvent:
    """`last` followed by an edit of `[start, start + len(old))` that touches its new span, as one event from the
    text before `last`: what the edit removed outside that span joins `last.old`, what it kept of it `new`."""
    end = start + len(old)
    before_part = old[: max(0, last.start - start)]
    after_part = old[last.new_end - start :] if end > last.new_end else ""
    kept_from, kept_to = max(start, last.start) - last.start, min(end, last.new_end) - last.start
    merged_new = last.new[:kept_from] + new + last.new[kept_to:]
    return EditEvent(min(start, last.start), before_part + last.old + after_part, merged_new, now, version=version)
