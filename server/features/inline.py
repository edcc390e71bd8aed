"""Inline completion: from a cursor to a suggestion, through the syntax plan, the engine and the finishing rules.

One request travels: typed-through cache (the user typed the start of the suggestion on screen: answer the rest
at once) -> `plan_completion` (complete here at all? single or multi-line? what context, which stop rules?) ->
an `EditRequest` laid out so that typing only appends to the prompt -> the engine worker (superseded by a newer
request for the same document) -> `finish_completion` (cut at a syntactic boundary, balance brackets, refuse what
does not parse) -> a `Suggestion` whose range covers what it replaces. After a suggestion from the model is shown,
the next one is precomputed while the engine is idle, on the assumption that this one is accepted.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from waferline.engine.api import Completion, EditRequest
from waferline.server.confidence import features, load_calibration
from waferline.server.options import Options
from waferline.server.prompt_lookup import line_candidates
from waferline.server.syntax.context import Snippet
from waferline.server.syntax.plan import CompletionPlan, plan_completion
from waferline.server.syntax.postprocess import Finished, finish_completion, should_stop
from waferline.server.syntax.repetition import loop_start
from waferline.server.syntax.tree import SyntaxTree
from waferline.server.text import units_len

if TYPE_CHECKING:
    from waferline.server.worker import Worker

log = logging.getLogger(__name__)

CACHE_ENTRIES = 4  # suggestions remembered per document: the one on screen and a few precomputed ones
# (text, plan) -> definitions from other files for the prompt (server/indexing.py); put before the document's own
# context, they stay the same while the user types, so the engine's KV cache keeps them.
RepositoryContext = Callable[[str, CompletionPlan], list[Snippet]]


@dataclass(frozen=True)
class Suggestion:
    text: str  # what to insert at the cursor
    offset: int  # the cursor, a `str` offset into the text the suggestion was made for
    replace_end: int  # the suggestion replaces [offset, replace_end) (characters the editor auto-closed)
    source: str  # "model" or "cache"
    confidence: float | None = None  # the calibrated chance it is right (server/confidence.py); None from the cache
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


RECENT_EDIT_DOCS = 2  # other open documents whose last edited region goes into the prompt
RECENT_EDIT_LINES = 6  # lines kept on each side of that edit
RECENT_EDIT_MAX_AGE_S = 600.0
LINE_COMMENT = {"python": "#", "lua": "--"}  # the other grammars' languages use //


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
        text = f"{LINE_COMMENT.get(language_id, '//')} {e.path} (recently edited)\n{body}"
        if body.strip() and len(text) + 1 <= budget:
            budget -= len(text) + 1
            out.append(Snippet("recent_edit", text, path=e.path, start_line=first))
    return out


def skip_reason(text: str, options: Options) -> str | None:
    """Why this document gets no completions at all (it is still kept in sync), or None."""
    if not options.enable:
        return "completions disabled (enable = false)"
    if len(text) > options.max_document_bytes:  # characters <= bytes: a cheap bound before encoding
        return f"document over maxDocumentBytes ({options.max_document_bytes})"
    if "\0" in text[:8192]:
        return "binary document"
    return None


def prompt_prefix(plan: CompletionPlan) -> str:
    """The context snippets, each on its own lines as the code they are, then the prefix window: what the model
    reads as "the file so far". The snippets come from outside the window and do not change as the user types."""
    return "".join(s.text.rstrip("\r\n") + "\n" for s in plan.context if s.text.strip()) + plan.prefix


def edit_request(session_id: str, plan: CompletionPlan, options: Options) -> EditRequest:
    """The engine request for a plan. Stable context goes first and the prefix last (the engine's FIM template
    puts the suffix before both for models trained suffix-prefix-middle), so a keystroke only appends tokens."""
    return EditRequest(
        session_id=session_id,
        prefix=prompt_prefix(plan),
        suffix=plan.suffix,
        max_new_tokens=options.max_multiline_tokens if plan.multiline else options.max_tokens,
        temperature=options.temperature,
        time_budget_s=options.time_budget_ms / 1000.0,
        should_stop=lambda partial: should_stop(partial, plan),
        candidates=line_candidates(plan.prefix, plan.suffix) if options.prompt_lookup and not plan.multiline else (),
    )


def precompute_session(session_id: str) -> str:
    return session_id + "#precompute"


def window(worker: Worker, options: Options) -> dict[str, int]:
    """The plan's context size for the loaded model: what its context holds beside the tokens to generate."""
    chars = worker.context_chars(max(options.max_tokens, options.max_multiline_tokens))
    return {} if chars is None else {"max_context_chars": chars}


class Superseded(Exception):
    """A newer request for the same document took this one's place; the client gets an empty answer."""


async def suggest(
    worker: Worker, options: Options, *, session_id: str, language_id: str, text: str, offset: int,
    syntax: SyntaxTree, cache: SuggestionCache, explicit: bool, repository: RepositoryContext | None = None,
    timings: dict[str, float] | None = None,
) -> Suggestion | None:  # fmt: skip
    """The suggestion at `offset` of `text` (a snapshot: the document may change while the model runs), or None.

    Raises Superseded when a newer request for the document replaced this one. `timings` receives where the
    milliseconds went: plan (incremental parse + plan), context, queue, prefill, decode, finish.
    """
    ms = timings if timings is not None else {}
    t = time.perf_counter()
    reason = skip_reason(text, options)
    if reason is not None:
        log.debug("no completion: %s", reason)
        return None
    if options.typed_through_cache and (hit := cache.lookup(text, offset)) is not None:
        return hit
    plan = plan_completion(text, offset, language_id, syntax, explicit=explicit, **window(worker, options))
    ms["plan"], t = (time.perf_counter() - t) * 1000, time.perf_counter()
    if not plan.complete:
        log.debug("no completion: %s", plan.reason)
        return None
    if repository is not None:  # index lookups: off the event loop
        plan.context[:0] = await asyncio.to_thread(repository, text, plan)
        ms["context"], t = (time.perf_counter() - t) * 1000, time.perf_counter()
    completion = await worker.complete(edit_request(session_id, plan, options))
    if completion is None:
        raise Superseded
    ms.update(queue=completion.queue_s * 1000, prefill=completion.prefill_s * 1000, decode=completion.decode_s * 1000)
    t = time.perf_counter()
    finished = finish_without_loops(text, offset, language_id, completion.text, plan)
    ms["finish"] = (time.perf_counter() - t) * 1000
    if finished is None or not finished.insert_text:
        log.debug("model output %r dropped (stop %s)", completion.text, completion.stop_reason)
        return None
    confidence, feats = confidence_of(completion, finished.insert_text)
    threshold = options.min_confidence_invoked if explicit else options.min_confidence
    if confidence is not None and confidence < threshold:
        log.debug("suggestion %r hidden: confidence %.3f < %.3f", finished.insert_text, confidence, threshold)
        return None
    if confidence is None or confidence >= options.min_confidence:  # the cache answers automatic requests too
        cache.remember(text, offset, finished.insert_text, finished.replace_end_offset)
    return Suggestion(finished.insert_text, offset, finished.replace_end_offset, "model", confidence, feats)


def confidence_of(completion: Completion, shown: str) -> tuple[float | None, dict[str, float] | None]:
    """The calibrated confidence of showing `shown` for this completion, and its features; (None, None) when the
    engine reports no token probabilities (it cannot tell, so the suggestion is not gated)."""
    if not completion.token_logprobs:
        return None, None
    feats = features(
        completion.token_logprobs, completion.stop_logprob, completion.stop_reason, completion.text, shown,
        copied=completion.chosen == "candidate",
    )  # fmt: skip
    return load_calibration().confidence(feats), feats


def finish_without_loops(
    text: str, offset: int, language_id: str, completion: str, plan: CompletionPlan
) -> Finished | None:
    """finish_completion of the model's text cut before any piece it repeats over and over (repetition.py)."""
    start = loop_start(completion)
    if start is not None:
        log.debug("model output %r repeats itself from %d", completion, start)
        completion = completion[:start]
    return finish_completion(text, offset, language_id, completion, plan)


async def precompute_next(
    worker: Worker, options: Options, *, session_id: str, language_id: str, text: str, shown: Suggestion,
    cache: SuggestionCache, repository: RepositoryContext | None = None,
) -> bool:  # fmt: skip
    """Compute the suggestion that would follow `shown` once accepted, if the engine is idle; True if cached."""
    if not options.precompute or worker.busy():
        return False
    after = text[: shown.offset] + shown.text + text[shown.replace_end :]
    cursor = shown.offset + len(shown.text)

    def plan_after() -> CompletionPlan:
        # A tree of the text as it would be after the accept: parsed on a helper thread, off the event loop.
        tree = SyntaxTree(language_id, after)
        plan = plan_completion(after, cursor, language_id, tree, explicit=False, **window(worker, options))
        if plan.complete and repository is not None:
            plan.context[:0] = repository(after, plan)
        return plan

    plan = await asyncio.to_thread(plan_after)
    if not plan.complete:
        return False
    # Its own KV session: the text after an accept that may not happen must not displace the document's prompt from
    # the document's session (the next keystroke's request would prefill its whole window again).
    request = edit_request(precompute_session(session_id), plan, options)
    completion = await worker.precompute(request, document=session_id)
    if completion is None or not completion.complete:
        return False  # preempted by typing: a cut-short completion is not worth keeping
    finished = await asyncio.to_thread(finish_without_loops, after, cursor, language_id, completion.text, plan)
    if finished is None or not finished.insert_text:
        return False
    confidence, _ = confidence_of(completion, finished.insert_text)
    if confidence is not None and confidence < options.min_confidence:
        return False
    cache.remember(after, cursor, finished.insert_text, finished.replace_end_offset)
    return True


def advance(line: int, character: int, text: str, encoding: str) -> tuple[int, int]:
    """The position after `text` when it starts at (line, character): for the end of a suggestion's range."""
    breaks = text.count("\n") + text.count("\r") - text.count("\r\n")
    if breaks == 0:
        return line, character + units_len(text, encoding)
    last = max(text.rfind("\n"), text.rfind("\r"))
    return line + breaks, units_len(text[last + 1 :], encoding)
