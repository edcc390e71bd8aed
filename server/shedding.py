"""Load shedding: whether queued work for a document is still wanted, checked before each costly stage.

An editor sends a didChange and a completion request for every key and never waits for the answers, so under load
requests queue up inside the server (behind the event loop, the repository lookups' threads, the engine). Only the
newest request of a document can still be shown; every older one is stale the moment a newer change or request for
its document arrives. `Tickets` gives each request a ticket when it arrives; `Ticket.stale()` is True once a newer
request for the same document has arrived, the document's text changed since it arrived, or the document
was closed. Features check it after every await, before parsing, planning, looking up the repository or queueing
engine work, and answer a stale request empty at once: its work is free before it is done, not superseded after it
waited in every queue (the engine's own superseding, engine/jobs.py, remains the last line).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from waferline.server.document import Document


@dataclass(frozen=True)
class Ticket:
    tickets: Tickets
    doc: Document
    revision: int  # the document's text when the request arrived (DocumentText.revision: versions may repeat)
    number: int

    def stale(self) -> bool:
        """A newer request or change for the document arrived, or the document was closed (or opened again)."""
        return self.superseded() or self.doc.text.revision != self.revision

    def superseded(self) -> bool:
        """A newer request for the document arrived, or the document was closed (or opened again): nothing this
        request computes can be shown or reused. (A newer change alone leaves a model answer worth caching: the
        request that follows the change may find it typed through.)"""
        return (
            self.tickets.latest.get(self.doc.uri) != self.number
            or self.tickets.documents.get(self.doc.uri) is not self.doc
        )


class Tickets:
    """The newest request of each open document (one int per document, dropped on close)."""

    def __init__(self, documents: Mapping[str, Document]) -> None:
        self.documents = documents
        self.latest: dict[str, int] = {}
        self.issued_at: dict[str, float] = {}  # uri -> when its latest request arrived (time.monotonic())
        self._issued = 0

    def issue(self, doc: Document) -> Ticket:
        """A ticket for a request that arrived now: every older ticket of the document turns stale."""
        self._issued += 1
        self.latest[doc.uri] = self._issued
        self.issued_at[doc.uri] = time.monotonic()
        return Ticket(self, doc, doc.text.revision, self._issued)

    def done(self, ticket: Ticket) -> None:
        """The request was answered: nothing newer is waiting for this document unless a later ticket was issued."""
        if self.latest.get(ticket.doc.uri) == ticket.number:
            del self.latest[ticket.doc.uri]

    def drop(self, uri: str) -> None:
        self.latest.pop(uri, None)
        self.issued_at.pop(uri, None)

    def waiting(self) -> int:
        """Documents with a request not yet answered: real work the background yields to."""
        return len(self.latest)

    def typed_in(self, window_s: float) -> int:
        """Documents that had a request in the last `window_s` seconds: more than one means more than one typist
        (or a replay), a load the background should leave the engine to."""
        since = time.monotonic() - window_s
        return sum(1 for at in self.issued_at.values() if at >= since)
