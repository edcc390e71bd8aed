"""The per-document edit history of next-edit suggestions (syntax/edit_history.py)."""

from __future__ import annotations

import random

from waferline.syntax.edit_history import MAX_EVENTS, EditHistory, map_offset


def undo_all(history: EditHistory, text: str) -> str:
    for e in reversed(history.events):
        assert text[e.start : e.new_end] == e.new
        text = text[: e.start] + e.old + text[e.new_end :]
    return text


def test_typing_a_word_over_a_selection_is_one_event() -> None:
    h, text = EditHistory(), "def f(value): return value\n"
    h.record(6, "value", "a", version=2, now=0.0)
    for i, ch in enumerate("mount"):
        h.record(7 + i, "", ch, version=3 + i, now=0.1 * (i + 1))
    (event,) = h.events
    assert (event.start, event.old, event.new) == (6, "value", "amount")
    assert event.version == 7 and not event.accepted
    del text


def test_backspacing_then_typing_coalesces_and_typing_it_back_leaves_nothing() -> None:
    h = EditHistory()
    h.record(5, "e", "", version=2, now=0.0)  # "value" -> "valu"
    h.record(4, "u", "", version=3, now=0.2)  # -> "val"
    assert [(e.start, e.old, e.new) for e in h.events] == [(4, "ue", "")]
    h.record(4, "", "ue", version=4, now=0.4)
    assert list(h.events) == []


def test_a_pause_or_a_distant_edit_starts_a_new_event() -> None:
    h = EditHistory()
    h.record(0, "", "a", version=2, now=0.0)
    h.record(1, "", "b", version=3, now=5.0)  # same place, after a pause
    h.record(50, "", "c", version=4, now=5.1)  # elsewhere
    assert [(e.start, e.new) for e in h.events] == [(0, "a"), (1, "b"), (50, "c")]


def test_accepted_events_never_coalesce_and_user_events_skip_them() -> None:
    h = EditHistory()
    h.record(0, "x", "y", version=2, now=0.0)
    h.record(10, "x", "y", version=3, now=0.1)
    assert h.mark_accepted(10, "x", "y", version=3)
    h.record(11, "", "z", version=4, now=0.2)  # touches the accepted event's span
    assert [(e.start, e.old, e.new, e.accepted) for e in h.events] == [
        (0, "x", "y", False), (10, "x", "y", True), (11, "", "z", False)
    ]  # fmt: skip
    assert [e.start for e, _ in h.user_events(4)] == [11, 0]
    _, later = h.user_events(4)[1]
    assert [e.start for e in later] == [10, 11]


def test_full_text_change_is_diffed_into_edits() -> None:
    before = "def f(value):\n    return value\n"
    after = "def f(amount):\n    return value + 1\n"
    h = EditHistory()
    h.record_full(before, after, version=2, now=0.0)
    assert undo_all(h, after) == before
    assert [(e.start, e.old, e.new) for e in h.events] == [(6, "value", "amount"), (31, "", " + 1")], (
        "a retyped word is one edit (not 'v' deleted and 'lue' -> 'mount'), and not one replacement of everything"
    )


def test_bounded_by_count_and_by_characters() -> None:
    h = EditHistory()
    for i in range(40):
        h.record(i * 100, "", "x", version=i, now=float(i * 10))
    assert len(h.events) == MAX_EVENTS and h.events[-1].start == 3900
    h.record(0, "", "y" * 20_000, version=99, now=1e6)
    assert len(h.events) == 1, "one event over the budget stays alone"


def test_random_edits_can_always_be_undone_from_the_history() -> None:
    rng = random.Random(3)
    for _ in range(2000):
        original = "".join(rng.choice("ab \n") for _ in range(rng.randint(0, 12)))
        h, text = EditHistory(), original
        for k in range(rng.randint(1, 6)):
            a = rng.randint(0, len(text))
            b = rng.randint(a, len(text))
            new = "".join(rng.choice("xyz") for _ in range(rng.randint(0, 3)))
            h.record(a, text[a:b], new, version=k, now=rng.choice([0.0, 0.5, 3.0]) * k)
            text = text[:a] + new + text[b:]
        assert undo_all(h, text) == original


def test_map_offset_through_later_events() -> None:
    h = EditHistory()
    h.record(10, "abc", "x", version=2, now=0.0)
    later = list(h.events)
    assert map_offset(5, later) == 5
    assert map_offset(20, later) == 18
    assert map_offset(11, later) is None


def test_a_long_chain_keeps_the_users_edit_it_follows() -> None:
    h = EditHistory()
    h.record(0, "value", "amount", version=1, now=0.0)
    for i in range(3 * MAX_EVENTS):
        start = 100 + 10 * i
        h.record(start, "value", "amount", version=2 + i, now=float(10 + i), accepted=True)
    event, later = h.user_events(1)[0]
    assert event.start == 0 and len(later) == 3 * MAX_EVENTS
