"""Golden cases for the repetition filter: model output -> where the loop starts (or None)."""

from __future__ import annotations

import pytest

from waferline.syntax.repetition import is_loop, loop_start

LOOPS = [
    # (text, the part kept before the loop)
    ("_x - other._x - other._x - other._x - other._x", ""),  # the run may start at any rotation of its unit
    ("1, 0, 0, 0, 0, 0, 00000000000000", "1"),
    ("return values * factor * factor * factor * factor", "return values"),
    ("foo(a, b)\nfoo(a, b)\nfoo(a, b)\nfoo(a, b)", "foo(a, b)\n"),
    ("x = compute(a)\ny = compute(b)\nx = compute(a)\ny = compute(b)", "x = compute(a)\ny = compute(b)\n"),
    ("self.assertEqual(self.assertEqual(self.assertEqual(self.assertEqual(", ""),
    # lines repeated before a later line repeats within itself (the shipped candidate's blank-line answer): the
    # earlier loop is the one that counts
    (
        "def test_matrix():\n    # GH#44444\n    # GH#44444\n    # GH#44444\n    # GH#4444444444444444444",
        "def test_matrix():\n    # GH#44444\n",
    ),
]
FINE = [
    "return math.pi * self.radius ** 2",
    "[0, 0, 0]",
    "a, b, c = 0, 0, 0",
    "print('-' * 40)",
    "# ----------------------------------------",
    "x == y",
    "'%s %s %s'",
    "}\n    }\n}",
    "end\nend\nend",
    "if a:\n    pass\nelse:\n    pass",
    "        ",
    "",
    "self.x = x\nself.y = y\nself.z = z",
    "0x00000000",  # a literal: a run of 8 digits is under MIN_RUN
]


@pytest.mark.parametrize(("text", "kept"), LOOPS)
def test_loops_are_found_where_they_start(text: str, kept: str) -> None:
    start = loop_start(text)
    assert start is not None, text
    assert text[:start] == kept


@pytest.mark.parametrize("text", FINE)
def test_ordinary_code_is_not_a_loop(text: str) -> None:
    assert not is_loop(text), text
