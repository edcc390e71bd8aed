"""Next-edit suggestions: from the user's last edit to the edit that should follow it, anywhere in the document.

`NextEdits` is the feature the registration module calls: `changed` records every applied `didChange` in the
document's `EditHistory` (an edit that is exactly a suggestion just offered is recorded as accepted at once, so it
never coalesces with the user's own typing), `answer` serves `textDocument/copilotInlineEdit` and
`waferline/inlineEdit`: a ticket per request (server/shedding.py; a newer request for the document supersedes this
one), a stale version answered empty, the structural candidates first (features/next_edit/candidates.py, no model),
each checked by the filters (features/next_edit/filters.py) and against the edits the user rejected at this version.
`shown`, `ended` and `accepted` count the client's notifications and the acceptance command (`waferline/stats`'s
`inlineEdit`).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from waferline.server.features.next_edit.candidates import Candidate, structural_candidates
from waferline.server.features.next_edit.elsewhere import IndexedFiles, other_file_edits
from waferline.server.features.next_edit.filters import refusal
from waferline.server.features.next_edit.model import rewrite, rewrite_request
from waferline.server.features.next_edit.source import Edit, Source
from waferline.server.shedding import Tickets
from waferline.server.stats import percentile
from waferline.syntax.edit_history import EditEvent, EditHistory, join, map_offset
from waferline.syntax.next_edit_prompt import window_at
from waferline.syntax.text import TextChange

if TYPE_CHECKING:
    from waferline.server.document import Document
    from waferline.server.options import Options
    from waferline.server.worker import Worker

END_REASONS = ("accepted", "rejected", "ignored", "typedThrough")
USER_EVENTS = 4  # the user's newest edits a structural candidate may follow from
MAX_PENDING = 64  # offered proposals remembered for acceptance and the end notifications
COUNTERS = ("requests", "shown", "accepted", "rejected", "ignored", "typedThrough", "empty", "stale", "cancelled",
            "structural", "model", "inlineFallback", "codeActions", "modelRuns", "modelSteps", "modelAcceptedTokens",
            "modelNewTokens")  # fmt: skip


@dataclass(frozen=True)
class Proposal:
    """One next edit offered to the client: `edit` of the document `uri` at `version` (str offsets of its text),
    with `others`, the edits of other documents that belong to it (a code action applies them together)."""

    id: str
    uri: str
    version: int
    edit: Edit
    kind: str  # "structural" or "model"
    source: str  # which candidate: "rename", "signature", "substitution", "model"
    others: tuple[Edit, ...] = ()
    confidence: float | None = None  # a model edit's: the geometric mean probability of the tokens that changed


@dataclass
class Counters:
    values: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0))
    latencies_ms: list[float] = field(default_factory=list)
    model_latencies_ms: list[float] = field(default_factory=list)  # requests the model answered with an edit

    def add(self, name: str, n: int = 1) -> None:
        self.values[name] += n

    def snapshot(self) -> dict[str, object]:
        def pct(values: list[float], q: float) -> float | None:
            v = percentile(values, q)
            return None if v is None else round(v, 2)

        steps = self.values["modelSteps"]
        return {**self.values, "latency_ms_p50": pct(self.latencies_ms, 50),
                "latency_ms_p95": pct(self.latencies_ms, 95),
                "model_edit_latency_ms_p50": pct(self.model_latencies_ms, 50),
                "model_tokens_per_step": round((steps + self.values["modelAcceptedTokens"]) / steps, 3)
                if steps else None}  # fmt: skip


class NextEdits:
    def __init__(
        self, documents: Mapping[str, Document], worker: Worker | None = None, indexed: IndexedFiles | None = None
    ) -> None:
        self.documents = documents
        self.worker = worker
        self.indexed = indexed  # the workspace index's files that use a name (a signature's call sites elsewhere)
        self.histories: dict[str, EditHistory] = {}
        self.pending: dict[str, Proposal] = {}
        self.rejected: set[tuple[str, int, int, int, str]] = set()  # (uri, version, start, end, new)
        self.ended: set[str] = set()
        self.tickets = Tickets(documents)
        self.counters = Counters()
        self.client_requests = False  # the client asked for a next edit: it needs no inline-completion fallback
        self._ids = itertools.count(1)

    # -- the document's edits --------------------------------------------------------------------------------------
    def history(self, uri: str) -> EditHistory:
        return self.histories.setdefault(uri, EditHistory())

    def changed(self, doc: Document, before_version: int, edits: list[tuple[str, TextChange | str]]) -> None:
        """Record one applied didChange: each (text before it, change) in order."""
        history = self.history(doc.uri)
        for before, change in edits:
            if isinstance(change, str):
                history.record_full(before, change, version=doc.text.version)
                continue
            old = before[change.start : change.old_end]
            offered = len(edits) == 1 and self._matches_offer(doc.uri, before_version, change, old)
            history.record(change.start, old, change.new_text, version=doc.text.version, accepted=offered)

    def _matches_offer(self, uri: str, version: int, change: TextChange, old: str) -> bool:
        return any(
            p.uri == uri and p.version == version and p.edit.start == change.start and p.edit.end == change.old_end
            and p.edit.new == change.new_text for p in self.pending.values()
        )  # fmt: skip

    def closed(self, uri: str) -> None:
        self.histories.pop(uri, None)
        self.tickets.drop(uri)
        for key in [k for k, p in self.pending.items() if p.uri == uri]:
            del self.pending[key]

    # -- requests --------------------------------------------------------------------------------------------------
    async def answer(
        self, doc: Document, version: int | None, offset: int, options: Options | None = None
    ) -> list[Proposal]:
        """The next edit for a request at `offset` of the document the client has at `version` ([] for none): a
        structural one, else (option `nextEditModel`) the model's."""
        t0 = time.perf_counter()
        self.counters.add("requests")
        self.client_requests = True
        ticket = self.tickets.issue(doc)
        try:
            if version is not None and version != doc.text.version:
                self.counters.add("stale")
                return self._empty()
            proposal = self.propose(doc, offset)
            if proposal is None and options is not None and options.next_edit_model and self.worker is not None:
                proposal = await self._model_proposal(doc, offset, options)
            if ticket.superseded():
                self.counters.add("cancelled")
                return []
            if ticket.stale():
                self.counters.add("stale")
                return self._empty()
            if proposal is None:
                return self._empty()
            self.counters.add(proposal.kind)
            return [proposal]
        finally:
            self.tickets.done(ticket)
            self.counters.latencies_ms.append((time.perf_counter() - t0) * 1000.0)
            del self.counters.latencies_ms[:-10_000]

    async def _model_proposal(self, doc: Document, offset: int, options: Options) -> Proposal | None:
        assert self.worker is not None
        if not self.worker.loaded() or doc.syntax.is_plain_text:
            return None
        t0 = time.perf_counter()
        snapshot = doc.snapshot()
        window = window_at(snapshot.text, offset)
        history = self.histories.get(doc.uri)
        events = [e for e, _ in reversed(history.user_events(8))] if history is not None else []
        request = rewrite_request(snapshot.session_id + "#next-edit", snapshot.text, window, events,
                                  doc.language_id, options.max_multiline_tokens + len(window.old) // 3,
                                  max(0.5, options.time_budget_ms / 1000.0))  # fmt: skip
        completion = await self.worker.complete(request)
        if completion is None:
            return None
        self.counters.add("modelRuns")
        self.counters.add("modelSteps", completion.decode_steps)
        self.counters.add("modelAcceptedTokens", completion.accepted_tokens)
        self.counters.add("modelNewTokens", completion.new_tokens)
        if doc.text.version != snapshot.version:
            return None
        found = rewrite(window, completion)
        if found is None or found[1] < options.next_edit_min_confidence:
            return None
        edit, sure = found
        last = history.last_user_event() if history is not None else None
        newest, span = (last[0], _span_now(last[0], last[1])) if last is not None else (None, None)
        parsed = doc.syntax.root is not None and not doc.syntax.root.has_error
        if refusal(snapshot.text, edit, doc.language_id, newest, span, parsed) is not None:
            return None
        proposal = Proposal(f"ne-{next(self._ids)}", doc.uri, snapshot.version, edit, "model", "model",
                            confidence=round(sure, 4))  # fmt: skip
        self.pending[proposal.id] = proposal
        self.counters.model_latencies_ms.append((time.perf_counter() - t0) * 1000.0)
        return proposal

    def _empty(self) -> list[Proposal]:
        self.counters.add("empty")
        return []

    def propose(self, doc: Document, offset: int, *, for_action: bool = False) -> Proposal | None:
        """The best structural next edit for the document as it is now, remembered for acceptance, or None; only
        `for_action` (a code action) may it be an edit of another document."""
        found = self.candidate(doc, offset, for_action=for_action)
        if found is None:
            return None
        proposal = Proposal(f"ne-{next(self._ids)}", doc.uri, doc.text.version, found.edit, "structural",
                            found.source, found.others)  # fmt: skip
        self.pending[proposal.id] = proposal
        while len(self.pending) > MAX_PENDING:
            del self.pending[next(iter(self.pending))]
        return proposal

    def candidate(self, doc: Document, offset: int, *, for_action: bool = False) -> Candidate | None:
        """The first structural candidate the filters let through: from the user's newest edit, else from one of
        the few before it (a rename stays pending while the user types elsewhere)."""
        history = self.histories.get(doc.uri)
        root = doc.syntax.root
        if history is None or root is None or doc.out_of_sync is not None:
            return None  # no history, no tree, or a text known to differ from the client's
        events = history.user_events(USER_EVENTS)
        if not events:
            return None
        newest_events = 1  # the events that are the user's newest edit (its join with the one before, and itself)
        if len(events) > 1 and events[1][1][:1] == [events[0][0]]:  # the user's two newest edits, nothing between
            joined = join(events[1][0], events[0][0])  # at the same spot: one edit, however long the pause
            if joined is not None:
                events.insert(0, (joined, events[0][1]))
                newest_events = 2
        text = doc.readable_text
        src = Source(text, root, doc.syntax.source)
        others = {uri: d for uri, d in self.documents.items() if uri != doc.uri}
        elsewhere = (lambda change: other_file_edits(change, doc.uri, others, self.indexed)) if for_action else None
        parsed = not root.has_error
        newest, newest_later = events[0]
        newest_span = _span_now(newest, newest_later)
        for n, (whole, later) in enumerate(events):
            event = whole.trimmed()
            span = _span_now(event, later)
            if span is None:
                continue
            accepted = [e for e in later if e.accepted]
            found_any = structural_candidates(
                src,
                doc.uri,
                doc.language_id,
                *span,
                event,
                later,
                accepted,
                offset,
                elsewhere,
                newest=n < newest_events,
            )
            for found in found_any:
                key = (doc.uri, doc.text.version, found.edit.start, found.edit.end, found.edit.new)
                if key in self.rejected or (found.edit.uri is not None and not for_action):
                    continue  # another document's edit goes with the code action only
                if (
                    found.edit.uri is not None
                    or refusal(text, found.edit, doc.language_id, newest, newest_span, parsed) is None
                ):
                    return found
        return None

    # -- what the client reports -----------------------------------------------------------------------------------
    def shown(self, item_id: str) -> None:
        if item_id in self.pending:
            self.counters.add("shown")

    def end(self, item_id: str, reason: str) -> None:
        """`waferline/didEndInlineEdit`: counted once per item (an accept's command and its notification agree)."""
        proposal = self.pending.get(item_id)
        if proposal is None or item_id in self.ended:
            return
        self.ended.add(item_id)
        self.counters.add(reason)
        if reason == "rejected":
            e = proposal.edit
            self.rejected.add((proposal.uri, proposal.version, e.start, e.end, e.new))

    def accept(self, item_id: str) -> None:
        """`waferline.acceptInlineEdit`: the client applied the edit; it is marked in the history if the change
        that applied it was not already recognised as this edit."""
        proposal = self.pending.get(item_id)
        if proposal is None:
            return
        history = self.histories.get(proposal.uri)
        if history is not None:
            e = proposal.edit
            doc = self.documents.get(proposal.uri)
            old = doc.text.text[e.start : e.start + len(e.new)] if doc is not None else ""
            if old == e.new:  # the newest matching event, unless `changed` marked it already
                for i in range(len(history.events) - 1, -1, -1):
                    ev = history.events[i]
                    if ev.start == e.start and ev.new == e.new:
                        if not ev.accepted:
                            history.mark_accepted(ev.start, ev.old, ev.new, version=ev.version)
                        break
        self.end(item_id, "accepted")


def _span_now(event: EditEvent, later: list[EditEvent]) -> tuple[int, int] | None:
    """Where the event's new text is now (after the `later` events), None where one of them rewrote it."""
    start, end = map_offset(event.start, later), map_offset(event.new_end, later)
    return None if start is None or end is None else (start, end)
