"""The next-edit prompt's layout, shared by the server's model candidate (server/features/next_edit/model.py) and
the training rows for that objective (training/next_edit_data.py), so that what is trained on and what is asked
cannot drift apart: the editable window around the cursor (whole lines), the user's recent edits rendered as
comment lines, and the prompt they make (`prompt_parts`). Plain text in, plain text out; below the server and
training alike.

The prompt is a fill-in-the-middle request whose middle is the window as it should be: the prefix is the file before
the window (its last PREFIX_CHARS, whole lines), then the recent edits as comment lines, then the old window itself
between two marker comments (`rewrite:` and `as:`), so the model sees what it rewrites right before it writes it;
the suffix is the file after the window (its first SUFFIX_CHARS, whole lines). Short on purpose: the prompt's
prefill is most of the first edit's latency.
"""

from __future__ import annotations

from dataclasses import dataclass

from waferline.syntax.edit_history import EditEvent
from waferline.syntax.languages import line_comment

WINDOW_LINES = 5
HISTORY_EVENTS = 6  # of the user's newest edits, rendered into the prompt
HISTORY_CHARS = 600
PREFIX_CHARS = 1_000  # of the file before the window (about 330 tokens of the shipped tokenizer)
SUFFIX_CHARS = 400  # of the file after it


@dataclass(frozen=True)
class Window:
    start: int  # str offsets of the whole lines the model rewrites
    end: int
    old: str


def window_at(text: str, offset: int) -> Window:
    line_start = text.rfind("\n", 0, offset) + 1
    start = line_start
    for _ in range(WINDOW_LINES):
        if start == 0:
            break
        start = text.rfind("\n", 0, start - 1) + 1
    end = offset
    for _ in range(WINDOW_LINES + 1):
        nl = text.find("\n", end)
        if nl < 0:
            end = len(text)
            break
        end = nl + 1
    return Window(start, end, text[start:end])


def history_comment(events: list[EditEvent], language_id: str) -> str:
    """The user's recent edits as comment lines the prompt starts with: `- old` / `+ new` per edit."""
    mark = line_comment(language_id)
    lines: list[str] = []
    for e in events[-HISTORY_EVENTS:]:
        lines.append(f"{mark} edit:")
        lines += [f"{mark} - {ln}" for ln in e.old.splitlines()[:4]]
        lines += [f"{mark} + {ln}" for ln in e.new.splitlines()[:4]]
    text = "\n".join(lines)
    return (text[-HISTORY_CHARS:] + "\n") if text else ""


def prompt_parts(text: str, w: Window, events: list[EditEvent], language_id: str) -> tuple[str, str]:
    """(prefix, suffix) of the next-edit request for window `w` of `text`; its middle is the window rewritten."""
    mark = line_comment(language_id)
    before, after = text[: w.start], text[w.end :]
    if len(before) > PREFIX_CHARS:
        nl = before.find("\n", len(before) - PREFIX_CHARS)
        before = before[nl + 1 :] if nl >= 0 else before[-PREFIX_CHARS:]
    if len(after) > SUFFIX_CHARS:
        nl = after.rfind("\n", 0, SUFFIX_CHARS)
        after = after[: nl + 1] if nl > 0 else after[:SUFFIX_CHARS]
    old = w.old if not w.old or w.old.endswith("\n") else w.old + "\n"
    prefix = before + history_comment(events, language_id) + f"{mark} rewrite:\n" + old + f"{mark} as:\n"
    return prefix, after
