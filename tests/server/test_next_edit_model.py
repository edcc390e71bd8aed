"""The model candidate's window, its stop rule and the edit it makes (server/features/next_edit/model.py)."""

from __future__ import annotations

import math

from waferline.engine.api import Completion
from waferline.server.features.next_edit.model import converged_at, rewrite_edit, rewrite_request
from waferline.syntax.edit_history import EditEvent
from waferline.syntax.next_edit_prompt import WINDOW_LINES, history_comment, window_at

TEXT = "".join(f"line{i}\n" for i in range(20))


def completion(text: str, reason: str = "stop_token", p: float = 0.9) -> Completion:
    ends = list(range(1, len(text) + 1))
    return Completion(text=text, stop_reason=reason, token_logprobs=[math.log(p)] * len(text), token_ends=ends)


def test_window_is_whole_lines_around_the_cursor() -> None:
    w = window_at(TEXT, TEXT.index("line10") + 2)
    assert w.old == "".join(f"line{i}\n" for i in range(10 - WINDOW_LINES, 10 + WINDOW_LINES + 1))
    assert window_at(TEXT, 0).start == 0 and window_at(TEXT, len(TEXT)).end == len(TEXT)


def test_stops_once_it_re_converges_after_departing() -> None:
    old = ["a\n", "b\n", "c\n", "d\n", "e\n"]
    assert converged_at("a\nb\n", old) is None  # not departed
    assert converged_at("a\nB\nc\n", old) is None  # one line back is not enough
    assert converged_at("a\nB\nc\nd\n", old) == 4
    request = rewrite_request("s", TEXT, window_at(TEXT, 50), [], "python", 64, 0.5)
    assert request.draft == window_at(TEXT, 50).old and request.should_stop is not None
    assert not request.should_stop("line0\n") and request.suffix == TEXT[window_at(TEXT, 50).end :]


def test_the_edit_is_the_rewrite_trimmed_and_gated() -> None:
    w = window_at("a\nb\nc\nd\ne\n", 0)
    edit = rewrite_edit(w, completion("a\nB\nc\nd\n"), 0.5)
    assert edit is not None and (edit.start, edit.end, edit.new) == (2, 3, "B")
    assert rewrite_edit(w, completion("a\nB\nc\nd\n", p=0.2), 0.5) is None, "not confident"
    assert rewrite_edit(w, completion(w.old), 0.0) is None, "no change"
    assert rewrite_edit(w, completion("a\nB", reason="max_tokens"), 0.0) is None, "cut short mid-window"


def test_history_comment_lists_the_edits() -> None:
    events = [EditEvent(0, "value", "amount", 0.0)]
    assert history_comment(events, "python") == "# edit:\n# - value\n# + amount\n"
    assert history_comment([], "python") == ""
