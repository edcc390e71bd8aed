"""The model candidate (option `nextEditModel`, off by default): the model rewrites an editable window around the
cursor, with the old window as its speculative draft, and where its text departs from the old one is the edit.

The window is the cursor's line and WINDOW_LINES lines on each side (whole lines). The prompt is a
fill-in-the-middle request whose middle is the window as it should be now: the file around the window, the
document's recent edits as comment lines (syntax/edit_history.py, newest last) and the old window itself, laid out
by syntax/next_edit_prompt.py (the layout training/next_edit_data.py trains on). The old window goes with the
request as its `draft` (EditRequest.draft: engine/speculate.py verifies it several tokens per step, and prompt
lookup re-aligns the draft after a change), so a window the model keeps as it is costs a few steps, not one step
per token. Generation stops when the text re-converges with the old
window for CONVERGED_LINES lines after it departed from it (the rest of the window is the old text), or at the
window's end.

The edit is the old and new window with their common start and end trimmed; it is shown only when the model's
confidence in the tokens that changed (the geometric mean of their probabilities) reaches `nextEditMinConfidence`,
and through the same filters as a structural one. `waferline train --next-edit` trains a model on this objective
(docs/next-edit.md, "Training the next-edit objective").
"""

from __future__ import annotations

import math

from waferline.engine.api import Completion, EditRequest
from waferline.server.features.next_edit.source import Edit
from waferline.syntax.edit_history import EditEvent
from waferline.syntax.next_edit_prompt import Window, prompt_parts

CONVERGED_LINES = 2


def rewrite_request(session_id: str, text: str, w: Window, events: list[EditEvent], language_id: str,
                    max_new_tokens: int, time_budget_s: float) -> EditRequest:  # fmt: skip
    old_lines = w.old.splitlines(keepends=True)

    def converged(partial: str) -> bool:
        return converged_at(partial, old_lines) is not None

    prefix, suffix = prompt_parts(text, w, events, language_id)
    return EditRequest(
        session_id=session_id,
        prefix=prefix,
        suffix=suffix,
        max_new_tokens=max_new_tokens,
        time_budget_s=time_budget_s,
        should_stop=converged,
        draft=w.old,
    )


def converged_at(partial: str, old_lines: list[str]) -> int | None:
    """After the text departed from the old window: the old line index where its last CONVERGED_LINES complete
    lines end, when they are old lines again (the text has re-converged), else None."""
    new_lines = partial.splitlines(keepends=True)
    complete = [ln for ln in new_lines if ln.endswith("\n")]
    if len(complete) < CONVERGED_LINES + 1:
        return None
    same = 0
    while same < min(len(complete), len(old_lines)) and complete[same] == old_lines[same]:
        same += 1
    if same == len(complete):
        return None  # not departed yet
    tail = complete[-CONVERGED_LINES:]
    for j in range(same + 1, len(old_lines) - CONVERGED_LINES + 1):
        if old_lines[j : j + CONVERGED_LINES] == tail and len(complete) - CONVERGED_LINES > same:
            return j + CONVERGED_LINES
    return None


def rewrite_edit(w: Window, completion: Completion, min_confidence: float) -> Edit | None:
    """The edit the model's rewrite makes of the window, or None (no change, cut short, or not confident)."""
    found = rewrite(w, completion)
    return found[0] if found is not None and found[1] >= min_confidence else None


def rewrite(w: Window, completion: Completion) -> tuple[Edit, float] | None:
    """The edit the model's rewrite makes of the window and the model's confidence in it, or None (no change, or
    cut short)."""
    if not completion.complete:
        return None
    text = completion.text
    old_lines = w.old.splitlines(keepends=True)
    at = converged_at(text, old_lines)
    if at is not None:
        kept = "".join(ln for ln in text.splitlines(keepends=True) if ln.endswith("\n"))
        new = kept + "".join(old_lines[at:])
    elif completion.stop_reason in ("stop_token", "stop_string"):
        new = text if text.endswith("\n") or not w.old.endswith("\n") else text + "\n"
    else:
        return None  # the budget ran out mid-window
    p = 0
    while p < min(len(new), len(w.old)) and new[p] == w.old[p]:
        p += 1
    q = 0
    while q < min(len(new), len(w.old)) - p and new[-1 - q] == w.old[-1 - q]:
        q += 1
    if p == len(new) == len(w.old):
        return None
    sure = confidence(completion, p, len(text) - q if at is None else p + 1)
    return Edit(w.start + p, w.end - q, new[p : len(new) - q]), sure


def confidence(completion: Completion, start: int, end: int) -> float:
    """The geometric mean probability of the tokens that wrote `[start, end)` of the completion's text."""
    ends = completion.token_ends
    logprobs = completion.token_logprobs
    if not logprobs or len(ends) != len(logprobs):
        return 0.0
    chosen = [lp for i, lp in enumerate(logprobs) if ends[i] > start and (i == 0 or ends[i - 1] < max(end, start + 1))]
    return math.exp(sum(chosen) / len(chosen)) if chosen else 0.0
