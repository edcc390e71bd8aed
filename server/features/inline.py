"""Inline completion: from a cursor to a suggestion, through the syntax plan, the engine and the finishing rules.

`InlineCompletions` is the feature: the registration module (server/handlers.py) calls `answer` for every
textDocument/inlineCompletion request (and textDocument/completion for clients without inline completion). One
request travels: a ticket for its document (server/shedding.py: a newer request or change makes it stale, and a
stale request is answered empty at whichever stage it is noticed, before the plan, the repository lookup or the
engine) -> a `DocumentSnapshot` -> typed-through cache (the user typed the start of the
suggestion on screen: answer the rest at once) -> `plan_completion` (complete here at all? single or multi-line?
what context, which stop rules?) -> an `EditRequest` laid out so that typing only appends to the prompt, with the
model's previous text for the document (less what was typed of it since) as its draft -> the engine worker
(superseded by a newer request for the same document) -> `finish_completion` (cut at a syntactic boundary, balance
brackets, refuse what does not parse) -> the confidence gate -> a `Suggestion` whose range covers what it replaces.
After a suggestion from the model is shown, the next one is precomputed while the engine is idle and nothing else
waits, on the assumption that this one is accepted.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from waferline.engine.api import Completion, EditRequest
from waferline.server.background import Background
from waferline.server.document import Document, DocumentSnapshot
from waferline.server.features.context_memo import ContextMemo
from waferline.server.features.engine_request import edit_request, skip_reason, window
from waferline.server.features.recent_edits import recent_edit_snippets, recent_edits
from waferline.server.features.suggestion_cache import Suggestion, SuggestionCache
from waferline.server.options import Options
from waferline.server.shedding import Ticket, Tickets
from waferline.server.stats import Stats
from waferline.syntax.confidence import Evidence, document_features
from waferline.syntax.context import Snippet
from waferline.syntax.plan import CompletionPlan, plan_completion
from waferline.syntax.postprocess import Finished, finish_completion
from waferline.syntax.repetition import loop_start
from waferline.syntax.text import units_len
from waferline.syntax.tree import SyntaxTree

if TYPE_CHECKING:
    from waferline.server.repository.workspace import Indexing
    from waferline.server.worker import Prepare, Worker

log = logging.getLogger(__name__)

# (text, plan) -> snippets from outside the document for the prompt (definitions from the repository index,
# server/repository/workspace.py, and other documents' recent edits); put before the document's own context, they
# stay the same while the user types, so the engine's KV cache keeps them.
RepositoryContext = Callable[[str, CompletionPlan], list[Snippet]]


BUSY_WINDOW_S = 1.0  # requests for more than one document within this long: no precomputing (a load, not a typist)


def precompute_session(session_id: str) -> str:
    return session_id + "#precompute"


class Superseded(Exception):
    """A newer request for the same document took this one's place; the client gets an empty answer."""


class InlineCompletions:
    """The inline-completion feature: each open document's typed-through cache, and from a request to a suggestion.

    `documents` are the server's open documents (other documents' recent edits go into the prompt), `repository`
    the workspace index (definitions from other files), `background` where precomputing runs."""

    def __init__(
        self, worker: Worker, stats: Stats, documents: Mapping[str, Document], background: Background,
        repository: Indexing | None = None,
    ) -> None:  # fmt: skip
        self.worker = worker
        self.stats = stats
        self.documents = documents
        self.background = background
        self.repository = repository
        self.tickets = Tickets(documents)  # each document's newest request: older ones are shed (server/shedding.py)
        self._caches: dict[str, SuggestionCache] = {}
        # each document's outside context, kept while its window stays put
        self.context_memo = ContextMemo(on_hit=lambda: stats.count("context_kept"))

    def forget(self, uri: str | None = None) -> None:
        """Drop the remembered suggestions of one document (closed, opened again), or of all (new options or engine):
        they are not to be reused."""
        self.context_memo.forget(uri)
        if uri is None:
            self._caches.clear()
        else:
            self._caches.pop(uri, None)
            self.tickets.drop(uri)

    def cache(self, uri: str) -> SuggestionCache:
        return self._caches.setdefault(uri, SuggestionCache())

    async def answer(self, doc: Document, offset: int, options: Options, *, explicit: bool) -> Suggestion | None:
        """The suggestion at `offset` of `doc` for a completion request, with the bookkeeping every request shares:
        counting it, timing it, answering empty when superseded (by a newer change or request for the document, at
        whichever stage it is noticed), and precomputing the next suggestion after a model answer. None also when the
        user typed on while the model ran (the answer is cached for the next request)."""
        t0 = time.perf_counter()
        self.stats.requests += 1
        if doc.out_of_sync is not None:  # its text is known to be wrong: nothing computed on it may be shown
            self.stats.out_of_sync_answers += 1
            self.stats.empty += 1
            return None
        ticket = self.tickets.issue(doc)
        timings: dict[str, float] = {}
        try:
            # One turn of the event loop: the requests that arrived with this one (a backlog the transport read at
            # once) take their tickets first, so if a newer one is for this document, this one is shed before it
            # parses anything. Unloaded, the turn costs microseconds.
            await asyncio.sleep(0)
            self._shed_if_stale(ticket, "plan")
            snapshot = doc.snapshot()
            s = await self.suggest(
                snapshot, offset, options, explicit=explicit, context=self.context_for(snapshot), timings=timings,
                ticket=ticket,
            )  # fmt: skip
        except asyncio.CancelledError:  # $/cancelRequest: pygls answers RequestCancelled
            self.stats.cancelled += 1
            raise
        except Superseded:  # a newer request for this document took over: answer empty, at once
            self.stats.cancelled += 1
            self.stats.add_latency((time.perf_counter() - t0) * 1000.0)
            return None
        finally:
            self.tickets.done(ticket)
        self.stats.add_latency((time.perf_counter() - t0) * 1000.0)
        if s is not None and s.source == "model":
            self.stats.add_phases(timings)
        if s is not None and not snapshot.current(doc):
            s = None  # typed on while the model ran (the answer is cached for the next request), or the document
            # went out of sync: not shown here
        if s is None:
            self.stats.empty += 1
            return None
        self.stats.answered += 1
        if s.source == "cache":
            self.stats.cache_answers += 1
        else:
            self.background.spawn(self._precompute(snapshot, s, options))
        return s

    def context_for(self, snapshot: DocumentSnapshot) -> RepositoryContext:
        """Context from outside the document for its prompt: definitions from the repository index, then the
        regions recently edited in other open documents, within what the plan leaves (plan.context_budget)."""
        repository = self.repository
        definitions = repository.completion_context(snapshot.uri) if repository is not None else None
        # Snapshots taken here, on the event loop: the lookup itself runs on a helper thread.
        edits = recent_edits(self.documents.values(), snapshot)

        def look_up(text: str, plan: CompletionPlan) -> list[Snippet]:
            found = definitions(text, plan) if definitions is not None else []
            budget = plan.context_budget - sum(len(s.text) + 1 for s in found)
            return found + recent_edit_snippets(edits, snapshot.language_id, budget, time.monotonic())

        def context(text: str, plan: CompletionPlan) -> list[Snippet]:
            if definitions is None and repository is not None:  # the index is not built yet: nothing worth keeping
                return look_up(text, plan)
            return self.context_memo.get(snapshot.uri, plan, lambda: look_up(text, plan))

        return context

    async def suggest(
        self, snapshot: DocumentSnapshot, offset: int, options: Options, *, explicit: bool,
        context: RepositoryContext | None = None, timings: dict[str, float] | None = None, ticket: Ticket | None = None,
    ) -> Suggestion | None:  # fmt: skip
        """The suggestion at `offset` of the snapshot, or None.

        Raises Superseded when a newer request for the document replaced this one: at the engine, or before the
        engine when `ticket` (from `answer`, which sheds a request stale before planning) has turned stale by then.
        `timings` receives where the milliseconds went: plan (incremental parse + plan), context, queue, prefill,
        decode, finish.
        """
        ms = timings if timings is not None else {}
        text, language_id = snapshot.text, snapshot.language_id
        reason = skip_reason(text, options)
        if reason is not None:
            log.debug("no completion: %s", reason)
            return None
        cache = self.cache(snapshot.uri)
        threshold = options.min_confidence_invoked if explicit else options.min_confidence
        if options.typed_through_cache and (hit := cache.lookup(text, offset, threshold)) is not None:
            if hit.source == "held":  # typed through a suggestion still under the gate: the model would repeat it
                self.stats.held_through += 1
                return None
            return hit
        built = await self.request_at(
            snapshot, offset, options, explicit=explicit, context=context, ticket=ticket, timings=ms
        )
        if built is None:
            return None
        plan, request, prepare = built
        self._shed_if_stale(ticket, "engine")
        # The model's previous text for this document, where what was typed since is its start: the cheapest draft.
        # Not while several documents are typed in at once: there its k-token steps cost the engine more than they
        # save (bench-load 50 x 10 keys/s: drain 0.92 s without it, 1.5-2.2 s with it; docs/benchmarks-load.md).
        busy = self.tickets.typed_in(BUSY_WINDOW_S) > 1
        request.draft = "" if busy else cache.draft(text, offset)
        request.lookup = "" if busy or request.draft else cache.latest_output()
        completion = await self.worker.complete(request, prepare=prepare)
        if completion is None or (ticket is not None and ticket.superseded()):
            raise Superseded  # a newer request for the document is under way: its answer is the one to finish
        if completion.complete and completion.chosen == "model":
            cache.remember_output(text, offset, completion.text)
        ms.update(
            queue=completion.queue_s * 1000, prefill=completion.prefill_s * 1000, decode=completion.decode_s * 1000
        )
        t = time.perf_counter()
        finished = finish_without_loops(text, offset, language_id, completion.text, plan)
        ms["finish"] = (time.perf_counter() - t) * 1000
        if finished is None or not finished.insert_text:
            log.debug("model output %r dropped (stop %s)", completion.text, completion.stop_reason)
            return None
        evidence = evidence_of(completion, text, offset, finished.insert_text)
        confidence = evidence.confidence(finished.insert_text) if evidence is not None else None
        feats = evidence.features(finished.insert_text) if evidence is not None else None
        # Shown or held back, typing its start is answered from the cache (a held-back one gated again on its rest):
        # greedy decoding would write the same again. One cut by the token limit or the time budget as well: the
        # model is asked again once the user has typed past it.
        cache.remember(text, offset, finished.insert_text, finished.replace_end_offset, confidence, evidence)
        if confidence is not None and confidence < threshold:
            log.debug("suggestion %r hidden: confidence %.3f < %.3f", finished.insert_text, confidence, threshold)
            self.stats.held_back += 1
            return None
        if completion.chosen == "candidate":
            self.stats.copied += 1
        return Suggestion(finished.insert_text, offset, finished.replace_end_offset, "model", confidence, feats)

    async def request_at(
        self, snapshot: DocumentSnapshot, offset: int, options: Options, *, explicit: bool = False,
        context: RepositoryContext | None = None, ticket: Ticket | None = None, timings: dict[str, float] | None = None,
        warming: bool = False,
    ) -> tuple[CompletionPlan, EditRequest, Prepare | None] | None:  # fmt: skip
        """The plan at `offset` and the engine request it makes (and what adds its candidates on the engine thread):
        what a request sends and what a warm-up prefills (features/warm.py), built by the same code so that the two
        prompts are the same. None where the plan says not to complete, unless `warming`: typing there may change
        that, and appends to the same prompt. `timings` receives plan and context milliseconds."""
        ms = timings if timings is not None else {}
        t = time.perf_counter()
        text, language_id = snapshot.text, snapshot.language_id
        # Several documents typed in at once: a window start that holds longer (syntax/plan.py _quantum).
        steady = self.tickets.typed_in(BUSY_WINDOW_S) > 1
        plan = plan_completion(
            text, offset, language_id, snapshot.syntax, explicit=explicit, in_strings=options.complete_in_strings,
            steady_window=steady, max_context_chars=window(self.worker, options),
        )  # fmt: skip
        ms["plan"], t = (time.perf_counter() - t) * 1000, time.perf_counter()
        if not plan.complete and not warming:
            log.debug("no completion: %s", plan.reason)
            return None
        if context is not None:  # index lookups: off the event loop, skipped if stale by the time a thread is free
            plan.context[:0] = await asyncio.to_thread(self._context_unless_stale, context, text, plan, ticket)
            ms["context"] = (time.perf_counter() - t) * 1000
        request, prepare = edit_request(snapshot.session_id, plan, options, busy=steady)
        return plan, request, prepare

    def _shed_if_stale(self, ticket: Ticket | None, stage: str) -> None:
        """Raise Superseded, counting it, when the request is stale on reaching `stage` ("plan" or "engine")."""
        if ticket is not None and ticket.stale():
            self.stats.count(f"shed_before_{stage}")
            raise Superseded

    def _context_unless_stale(
        self, context: RepositoryContext, text: str, plan: CompletionPlan, ticket: Ticket | None
    ) -> list[Snippet]:
        """On a helper thread: the repository context, or nothing for a request gone stale while it queued here."""
        if ticket is not None and ticket.stale():  # read-only checks of the loop's state: at worst one lookup too many
            self.stats.count("context_skipped")
            return []
        return context(text, plan)

    def idle(self) -> bool:
        """Nothing waits for the engine or for an answer, and only one document is being typed in: the background
        may use the time."""
        return not self.worker.busy() and self.tickets.waiting() == 0 and self.tickets.typed_in(BUSY_WINDOW_S) <= 1

    async def _precompute(self, snapshot: DocumentSnapshot, shown: Suggestion, options: Options) -> None:
        if not options.precompute:
            return
        if not self.idle():  # requests are waiting: they come first
            self.stats.count("precompute_yielded")
            return
        if await self.precompute_next(snapshot, shown, options, self.context_for(snapshot)):
            self.stats.precomputed += 1

    async def precompute_next(
        self, snapshot: DocumentSnapshot, shown: Suggestion, options: Options, context: RepositoryContext | None = None
    ) -> bool:
        """Compute the suggestion that would follow `shown` once accepted, if the engine is idle; True if cached."""
        if not options.precompute or self.worker.busy():
            return False
        text, language_id = snapshot.text, snapshot.language_id
        after = text[: shown.offset] + shown.text + text[shown.replace_end :]
        cursor = shown.offset + len(shown.text)

        def plan_after() -> CompletionPlan:
            # A tree of the text as it would be after the accept: parsed on a helper thread, off the event loop.
            tree = SyntaxTree(language_id, after)
            chars = window(self.worker, options)
            plan = plan_completion(
                after, cursor, language_id, tree, in_strings=options.complete_in_strings, max_context_chars=chars
            )
            if plan.complete and context is not None:
                plan.context[:0] = context(after, plan)
            return plan

        plan = await asyncio.to_thread(plan_after)
        if not plan.complete:
            return False
        if not self.idle() or self.documents.get(snapshot.uri) is None:  # real requests came in meanwhile
            self.stats.count("precompute_yielded")
            return False
        # Its own KV session: the text after an accept that may not happen must not displace the document's prompt
        # from the document's session (the next keystroke's request would prefill its whole window again).
        request, prepare = edit_request(precompute_session(snapshot.session_id), plan, options)
        cache = self.cache(snapshot.uri)
        request.draft = cache.draft(after, cursor)  # the model's text past what was shown, if it wrote more
        completion = await self.worker.precompute(request, document=snapshot.session_id, prepare=prepare)
        if completion is None or not completion.complete:
            return False  # preempted by typing: a cut-short completion is not worth keeping
        if completion.chosen == "model":
            cache.remember_output(after, cursor, completion.text)  # a draft once the user accepts, shown or not
        finished = await asyncio.to_thread(finish_without_loops, after, cursor, language_id, completion.text, plan)
        if finished is None or not finished.insert_text:
            return False
        evidence = evidence_of(completion, after, cursor, finished.insert_text)
        confidence = evidence.confidence(finished.insert_text) if evidence is not None else None
        cache.remember(after, cursor, finished.insert_text, finished.replace_end_offset, confidence, evidence)
        return confidence is None or confidence >= options.min_confidence  # held back, it still spares the model


def evidence_of(completion: Completion, text: str, offset: int, shown: str) -> Evidence | None:
    """What the calibrated confidence of showing `shown` (this completion's suggestion at `offset` of `text`) is
    computed from; None when the engine reports no token probabilities (it cannot tell, so it is not gated)."""
    if not completion.token_logprobs:
        return None
    return Evidence(
        tuple(completion.token_logprobs), tuple(completion.token_ends), completion.stop_logprob,
        completion.stop_reason, completion.text, copied=completion.chosen == "candidate",
        document=document_features(text, offset, shown),
    )  # fmt: skip


def finish_without_loops(
    text: str, offset: int, language_id: str, completion: str, plan: CompletionPlan
) -> Finished | None:
    """finish_completion of the model's text cut before any piece it repeats over and over (repetition.py)."""
    start = loop_start(completion)
    if start is not None:
        log.debug("model output %r repeats itself from %d", completion, start)
        completion = completion[:start]
    return finish_completion(text, offset, language_id, completion, plan)


def advance(line: int, character: int, text: str, encoding: str) -> tuple[int, int]:
    """The position after `text` when it starts at (line, character): for the end of a suggestion's range."""
    breaks = text.count("\n") + text.count("\r") - text.count("\r\n")
    if breaks == 0:
        return line, character + units_len(text, encoding)
    last = max(text.rfind("\n"), text.rfind("\r"))
    return line + breaks, units_len(text[last + 1 :], encoding)
