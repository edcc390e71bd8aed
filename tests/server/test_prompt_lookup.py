"""Prompt lookup: which completions of the current line the server offers the engine."""

from __future__ import annotations

from waferline.server.features.prompt_lookup import line_candidates

POINT = """class P:
    def __init__(self, x, y):
        self._x = x
        self._y = y

    def dist(self, other):
        dx = self._x - other._x
        dy = self."""


def test_the_text_after_the_same_characters_elsewhere() -> None:
    found = line_candidates(POINT, "\n        return dx")
    assert found[0] == "_x - other._x"  # after "= self." on the nearest line
    assert "_y = y" in found and len(found) <= 4


def test_the_most_similar_line() -> None:
    prefix = "    result = compute(alpha, beta)\n    print(result)\n    resul"
    assert "t = compute(alpha, beta)" in line_candidates(prefix, "\n")


def test_auto_closed_brackets_stay_and_other_text_after_the_cursor_means_none() -> None:
    assert line_candidates("    foo(a, b)\n    bar = foo(", ")\n") == ("a, b",)
    assert line_candidates("    foo(a, b)\n    bar = foo(", "x)\n") == ()


def test_nothing_typed_or_nothing_to_copy() -> None:
    assert line_candidates("def f():\n    ", "\n") == ()
    assert line_candidates("zzz", "") == ()
