"""The next-edit prompt's layout, shared by the server's model candidate (server/features/next_edit/model.py) and
the training rows for that objective (training/next_edit_data.py), so that what is trained on and what is asked
cannot drift apart: the editable window around the cursor (whole lines) and the user's recent edits rendered as
comment lines the prompt starts with. Plain text in, plain text out; below the server and training alike.
"""

from __future__ import annotations

from dataclasses import dataclass

from waferline.syntax.edit_history import EditEvent
from waferline.syntax.languages import line_comment

WINDOW_LINES = 5
HISTORY_EVENTS = 6  # of the user's newest edits, rendered into the prompt
HISTORY_CHARS = 1_200


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
