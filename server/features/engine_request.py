"""What a keystroke asks the engine: whether a document gets completions at all, the prompt text a plan makes, and the
`EditRequest` for it (features/inline.py answers requests with them, features/warm.py warms their prompts,
features/actions reuse the prompt's prefix).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

from waferline.engine.api import EditRequest
from waferline.server.features.prompt_lookup import line_candidates
from waferline.server.options import Options
from waferline.syntax.plan import DEFAULT_CONTEXT_CHARS, CompletionPlan
from waferline.syntax.postprocess import should_stop

if TYPE_CHECKING:
    from waferline.server.worker import Worker


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


def edit_request(
    session_id: str, plan: CompletionPlan, options: Options, *, busy: bool = False
) -> tuple[EditRequest, Callable[[EditRequest], EditRequest] | None]:
    """The engine request for a plan, and what adds its prompt-lookup candidates to it (None: none to add), which
    the worker runs on the engine thread when the job starts: a job superseded in the queue never pays for them.
    Stable context goes first and the prefix last (the engine's FIM template puts the suffix before both for models
    trained suffix-prefix-middle), so a keystroke only appends tokens. `busy` (several documents typed in at once):
    a multi-line suggestion gets no more tokens than a single-line one, since the engine answers each document in
    turn and a 64-token block costs as much as several other documents' answers."""
    multiline_tokens = min(options.max_multiline_tokens, options.max_tokens) if busy else options.max_multiline_tokens
    request = EditRequest(
        session_id=session_id,
        prefix=prompt_prefix(plan),
        suffix=plan.suffix,
        max_new_tokens=multiline_tokens if plan.multiline else options.max_tokens,
        temperature=options.temperature,
        time_budget_s=options.time_budget_ms / 1000.0,
        should_stop=lambda partial: should_stop(partial, plan),
    )
    if not options.prompt_lookup or plan.multiline:
        return request, None

    def with_candidates(request: EditRequest) -> EditRequest:
        return dataclasses.replace(request, candidates=line_candidates(plan.prefix, plan.suffix))

    return request, with_candidates


def window(worker: Worker, options: Options) -> int:
    """The plan's context size for the loaded model: what its context holds beside the tokens to generate."""
    chars = worker.context_chars(max(options.max_tokens, options.max_multiline_tokens))
    return DEFAULT_CONTEXT_CHARS if chars is None else chars
