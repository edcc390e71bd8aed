"""The structural next-edit candidates and the filters, in process (server/features/next_edit/): each case edits a
document as a user would, then follows the chain of suggestions to its end and checks the whole file."""

from __future__ import annotations

import asyncio

import pytest

from waferline.benchmarks.next_edit_session import Session
from waferline.server.features.next_edit.filters import refusal
from waferline.server.features.next_edit.source import Edit
from waferline.server.features.next_edit.substitution import misspelling
from waferline.syntax.edit_history import EditEvent

SHAPES = """import math


def area(value, scale=2):
    total = value * value

    def inner(value):
        return value + total

    return total * scale + value.real + inner(value)


class Point:
    def __init__(self, x, y):
        self.x = x
        self.y = y

    def norm(self):
        return math.hypot(self.x, self.y)

    def scaled(self, k):
        return Point(self.x * k, self.y * k).norm() + self.norm()
"""


@pytest.mark.parametrize(
    ("needle", "old", "new", "expected"),
    [
        ("area(value", "value", "amount", SHAPES.replace("value * value", "amount * amount")
         .replace("value.real + inner(value)", "amount.real + inner(amount)").replace("area(value", "area(amount")),
        ("total = ", "total", "t", SHAPES.replace("total", "t")),
        ("self.x = x", "x", "left", SHAPES.replace("self.x", "self.left")),
        ("def norm", "norm", "length", SHAPES.replace("def norm", "def length").replace("self.norm()",
                                                                                           "self.length()")),
    ],
)  # fmt: skip
def test_rename_followed_to_the_whole_file(needle: str, old: str, new: str, expected: str) -> None:
    s = Session(SHAPES)
    s.edit(needle, old, new)
    assert s.follow() == expected


def test_a_changed_use_is_not_a_rename() -> None:
    s = Session(SHAPES)
    s.edit("total * scale", "total", "scale")  # the new name exists: the user meant another variable
    assert s.ask() is None
    s = Session("def f(a):\n    b = a\n    return a + b\n")
    s.edit("return a", "a", "c")  # a use after the binding: which variable it reads changed
    assert s.ask() is None


def test_rename_in_a_language_without_scope_rules_is_not_proposed() -> None:
    s = Session("function f(value)\n  return value\nend\n", "lua")  # Lua: no scope rules (lexical*.py)
    s.edit("f(value", "value", "amount")
    assert s.ask() is None


SIGNATURE = """def area(w, h):
    return w * h


def main(w, h, depth):
    print(area(w, h))
    return area(1, 2) + area(w, h=h)
"""


def _signature(header: str, calls: str, body: str = "w * h") -> str:
    return f"def {header}:\n    return {body}\n\n\ndef main(w, h, depth):\n{calls}"


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("w, h", "w, h, depth", _signature("area(w, h, depth)",
         "    print(area(w, h, depth))\n    return area(1, 2, depth) + area(w, h=h, depth=depth)\n")),
        ("w, h", "w", _signature("area(w)", "    print(area(w))\n    return area(1) + area(w)\n")),
        ("h", "height", _signature("area(w, height)",
         "    print(area(w, h))\n    return area(1, 2) + area(w, height=h)\n", "w * height")),
        ("w, h", "h, w", _signature("area(h, w)", "    print(area(h, w))\n    return area(2, 1) + area(w, h=h)\n")),
    ],
)  # fmt: skip
def test_signature_change_fixes_the_calls(old: str, new: str, expected: str) -> None:
    s = Session(SIGNATURE)
    s.edit("area(w, h)", old, new)
    assert s.follow() == expected


def test_added_parameter_without_a_caller_variable_is_left_alone() -> None:
    s = Session("def f(a):\n    return a\n\n\nprint(f(1))\n")
    s.edit("f(a)", "a", "a, b")
    assert s.ask() is None, "b is not known at the call site"


def test_signature_change_in_other_open_documents_goes_with_the_code_action() -> None:
    other = "file:///p/main.py"
    s = Session(
        "def area(w, h):\n    return w * h\n", others={other: "from pkg.shapes import area\n\nx = area(1, 2)\n"}
    )
    s.edit("area(w, h)", "w, h", "w")
    assert s.ask() is None, "no edit of this document: nothing for the request"
    proposal = s.next_edits.propose(s.doc, 0, for_action=True)
    assert proposal is not None and proposal.edit.uri == other
    text = s.documents[other].text.text
    e = proposal.edit
    assert text[: e.start] + e.new + text[e.end :] == "from pkg.shapes import area\n\nx = area(1)\n"


def test_substitution_on_sibling_lines() -> None:
    text = "def t(self):\n    self.assertEquals(a, 1)\n    self.assertEquals(b, 2)\n\n    self.assertEquals(c, 3)\n"
    s = Session(text)
    at = text.index("Equals") + 5
    s.replace(at, at + 1, "")
    assert s.follow() == text.replace("assertEquals", "assertEqual", 2), "the block ends at the blank line"


def test_substitution_in_any_language() -> None:
    text = 'x := m.Get("a")\ny := m.Get("b")\n'
    s = Session(text, "go")
    s.edit("m.Get", "Get", "Lookup")
    assert s.follow() == text.replace("Get", "Lookup")


MISSPELT = '''"""Keeps the bookeeping of signals."""


def send(signal):
    # bookeeping: who listens
    return signal


def bookeeping():  # a name in code keeps its spelling
    """The bookeeping, as a string."""
    return "bookeeping"
'''


def test_a_misspelling_fixed_in_prose_is_fixed_across_the_file_but_not_in_names() -> None:
    s = Session(MISSPELT)
    at = MISSPELT.index("bookeeping") + len("book")
    s.replace(at, at, "k")
    expected = MISSPELT.replace("bookeeping", "bookkeeping").replace("def bookkeeping", "def bookeeping")
    assert s.follow() == expected


def test_a_misspelt_name_fixed_in_code_is_not_followed_across_the_file() -> None:
    far = "\n".join(f"    step{i} = {i}" for i in range(40))
    text = f"def run(obj):\n    obj.recieve()\n{far}\n    obj.recieve()  # recieve again\n"
    s = Session(text)
    at = text.index("recieve") + len("rec")
    s.replace(at, at + 2, "ei")
    # the attribute's other use is the rename candidate's (it follows attributes through the file); the comment's word
    # is not followed from a name in code
    assert s.follow() == text.replace("obj.recieve()", "obj.receive()")


@pytest.mark.parametrize(
    ("old", "new", "fixed"),
    [("bookeeping", "bookkeeping", True), ("recieve", "receive", True), ("Labels", "labels", False),
     ("item", "items", False), ("values", "amounts", False), ("a.b_c", "a.bc", False), ("colour", "color", True)],
)  # fmt: skip
def test_what_counts_as_a_misspelling(old: str, new: str, fixed: bool) -> None:
    assert misspelling(old, new) is fixed


@pytest.mark.parametrize(
    ("language", "text"),
    [("python", "def f(err):\n    print(err)\n    print(err)\n"),
     ("go", "func f(err error) {\n\tprint(err)\n\tprint(err)\n}\n")],
)  # fmt: skip
def test_a_variable_renamed_by_deleting_letters_is_left_to_the_rename_candidate(language: str, text: str) -> None:
    # `err` typed over as `e` is the deletion of `rr`: the new word is still a variable (a use here, which the
    # rename candidate does not follow), not a fragment for the sibling lines
    s = Session(text, language)
    s.edit("print(err", "err", "e")
    assert s.ask() is None


def test_rejected_edit_is_not_offered_again_at_that_version() -> None:
    s = Session(SHAPES)
    s.edit("total = ", "total", "t")
    first = asyncio.run(s.next_edits.answer(s.doc, s.doc.text.version, 0))[0]
    s.next_edits.end(first.id, "rejected")
    second = s.ask()
    assert second is not None and second.start != first.edit.start


TEXT = "import os\nx = compute(1)\ny = 2\n"


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (Edit(14, 21, "compute"), "no-op"),
        (Edit(13, 14, "  "), "whitespace only"),
        (Edit(7, 9, "sys"), "import lines only"),
        (Edit(14, 21, "compute(1"), "breaks the parse"),
    ],
)
def test_filters(edit: Edit, reason: str) -> None:
    assert refusal(TEXT, edit, "python", None, None, parsed=True) == reason


def test_filters_against_the_last_edit() -> None:
    # the user just typed "compute" over "calc": [14, 21) is their new text
    last = EditEvent(14, "calc", "compute", 0.0)
    assert refusal(TEXT, Edit(14, 21, "calc"), "python", last, (14, 21), True) == "undoes the last edit"
    assert refusal(TEXT, Edit(14, 21, ""), "python", last, (14, 21), True) == "deletes what was just inserted"
    assert refusal(TEXT, Edit(26, 27, "3"), "python", last, (14, 21), True) is None


def test_a_rename_typed_after_a_pause_is_still_one_rename(monkeypatch: pytest.MonkeyPatch) -> None:
    """The old name deleted, a pause longer than the history's 1 s, the new name typed: two events in the history,
    joined by the structural matcher because they are at the same spot."""
    clock = [100.0]
    monkeypatch.setattr("waferline.syntax.edit_history.time.monotonic", lambda: clock[0])
    s = Session(SHAPES)
    at = SHAPES.index("total = ")
    s.replace(at, at + len("total"), "")
    clock[0] += 3.0
    for i, ch in enumerate("t"):
        s.replace(at + i, at + i, ch)
    assert len(s.next_edits.history(s.doc.uri).events) == 2, "the pause made two events"
    assert s.follow() == SHAPES.replace("total", "t")
