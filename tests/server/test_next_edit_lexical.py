"""The structural next-edit candidates in JavaScript, TypeScript and Go (features/next_edit/lexical.py,
rename_lexical.py, signature_lexical.py): a rename or a signature change followed to the end of its chain, the whole
file checked; and the renames that would not be exact, refused."""

from __future__ import annotations

import pytest
from next_edit_session import Session

JS = """function area(value, scale = 2) {
  const total = value * value;
  function inner(value) {
    return value + total;
  }
  return total * scale + inner(value);
}

class Point {
  constructor(x, y) {
    this.x = x;
    this.y = y;
  }

  norm() {
    return Math.hypot(this.x, this.y);
  }

  scaled(k) {
    return Math.hypot(this.x * k, this.y * k) + this.norm();
  }
}

console.log(area(3), area(4, 5));
"""

GO = """package shapes

func area(w int, h int) int {
	total := w * h
	if total > 10 {
		total := 0
		return total
	}
	return total + w
}

func main(w int, h int, depth int) {
	println(area(w, h))
	println(area(1, 2) + area(h, w))
}
"""


@pytest.mark.parametrize("language", ["javascript", "typescript", "typescriptreact"])
@pytest.mark.parametrize(
    ("needle", "old", "new", "expected"),
    [
        ("area(value", "value", "amount", JS.replace("area(value", "area(amount")
         .replace("value * value", "amount * amount").replace("inner(value);", "inner(amount);")),
        ("const total", "total", "t", JS.replace("total", "t")),
        ("this.x = x", "x", "left", JS.replace("this.x", "this.left")),
        ("norm() {", "norm", "length", JS.replace("norm()", "length()")),
        ("function area", "area", "surface", JS.replace("area(", "surface(")),
    ],
)  # fmt: skip
def test_rename_followed_in_javascript_and_typescript(language: str, needle: str, old: str, new: str,
                                                       expected: str) -> None:  # fmt: skip
    s = Session(JS, language)
    s.edit(needle, old, new)
    assert s.follow() == expected


@pytest.mark.parametrize(
    ("needle", "old", "new", "expected"),
    [
        ("area(w int", "w", "width", GO.replace("area(w int, h int) int {\n\ttotal := w * h",
         "area(width int, h int) int {\n\ttotal := width * h").replace("total + w", "total + width")),
        ("total := w", "total", "sum", GO.replace("total := w * h\n\tif total > 10", "sum := w * h\n\tif sum > 10")
         .replace("return total + w", "return sum + w")),
        ("func area", "area", "surface", GO.replace("area(", "surface(")),
    ],
)  # fmt: skip
def test_rename_followed_in_go(needle: str, old: str, new: str, expected: str) -> None:
    s = Session(GO, "go")
    s.edit(needle, old, new)
    assert s.follow() == expected


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("w int, h int) int {\n\ttotal", "w int, h int, depth int) int {\n\ttotal",
         "println(area(w, h, depth))\n\tprintln(area(1, 2, depth) + area(h, w, depth))"),
        ("w int, h int) int {\n\ttotal", "w int) int {\n\ttotal", "println(area(w))\n\tprintln(area(1) + area(h))"),
        ("w int, h int) int {\n\ttotal", "h int, w int) int {\n\ttotal",
         "println(area(h, w))\n\tprintln(area(2, 1) + area(w, h))"),
    ],
)  # fmt: skip
def test_signature_change_fixes_the_calls_in_go(old: str, new: str, expected: str) -> None:
    text = GO.replace("total := w * h", "total := 0")
    s = Session(text, "go")
    at = text.index(old)
    s.replace(at, at + len(old), new)
    calls = s.follow().split("func main(w int, h int, depth int) {\n\t", 1)[1]
    assert calls.startswith(expected), calls


@pytest.mark.parametrize("language", ["javascript", "typescript"])
def test_signature_change_fixes_the_calls_in_javascript(language: str) -> None:
    text = (
        "function area(w, h) {\n  return w * h;\n}\n\nfunction main(w, h, depth) {\n"
        "  return area(w, h) + area(1, 2);\n}\n"
    )
    s = Session(text, language)
    s.edit("area(w, h) {", "w, h", "w, h, depth")
    assert s.follow() == text.replace("area(w, h)", "area(w, h, depth)", 1).replace(
        "area(w, h) + area(1, 2)", "area(w, h, depth) + area(1, 2, depth)"
    )
    s = Session(text, language)
    s.edit("area(w, h) {", "w, h", "w")
    assert s.follow() == text.replace("area(w, h)", "area(w)").replace("area(1, 2)", "area(1)")


@pytest.mark.parametrize(
    ("text", "needle", "old", "new", "why"),
    [
        ("function f(a) {\n  return {a, b: a};\n}\n", "f(a", "a", "c", "a shorthand {a} would change its key"),
        ("function f(a) {\n  const b = a;\n  return a + b;\n}\n", "f(a", "a", "b", "b is taken in the scope"),
        ("function f(a) {\n  const b = a;\n  return a + b;\n}\n", "return a", "a", "c", "a use, not a declaration"),
        (
            "class P {\n  constructor(o) {\n    this.x = o.x;\n  }\n}\n",
            "this.x",
            "x",
            "y",
            "o.x may be the same member",
        ),
    ],
)
def test_renames_that_would_not_be_exact_are_not_shown(text: str, needle: str, old: str, new: str, why: str) -> None:
    s = Session(text, "javascript")
    s.edit(needle, old, new)
    assert s.ask() is None, why


def test_go_composite_literal_keys_are_refused() -> None:
    text = "package m\n\nfunc f(name string) T {\n\treturn T{name: name}\n}\n"
    s = Session(text, "go")
    s.edit("f(name", "name", "label")
    assert s.ask() is None, "T{name: name}: the key is a field's name or the variable, not known"


@pytest.mark.parametrize("language", ["javascript", "typescript"])
def test_a_dollar_name_is_one_word_in_javascript(language: str) -> None:
    # `$` is part of a JavaScript name: renaming the unused `$0` is not the substitution `0` -> `0Obj` on the lines
    # around it (semver's range.js, an eval-nes case)
    text = "// 1.2 - 3.4 => >=1.2.0 <3.5.0-0\nconst f = ($0, a) =>\n  a;\n"
    s = Session(text, language)
    s.edit("($0", "$0", "$0Obj")
    assert s.ask() is None
    used = "const f = ($el, a) =>\n  $el.x + a;\n// $el.x\n"
    s = Session(used, language)
    s.edit("($el", "$el", "$node")
    assert s.follow() == used.replace("($el", "($node").replace("  $el.x", "  $node.x")


@pytest.mark.parametrize("language", ["javascript", "typescript"])
def test_a_shorthand_of_the_name_in_another_function_does_not_refuse_the_rename(language: str) -> None:
    # another function's `{path}` is another variable's (immer's patches.ts, an eval-nes case); one inside the scope,
    # even in a nested block, still refuses it
    text = "function f(path) {\n  return 'at ' + path;\n}\n\nfunction g(path, op) {\n  return {op, path};\n}\n"
    s = Session(text, language)
    s.edit("f(path", "path", "where")
    assert s.follow() == text.replace("f(path", "f(where").replace("+ path", "+ where")
    nested = "function f(path) {\n  if (path) {\n    return {path};\n  }\n  return path;\n}\n"
    s = Session(nested, language)
    s.edit("f(path", "path", "where")
    assert s.ask() is None


@pytest.mark.parametrize("language", ["javascript", "typescript"])
def test_var_declared_twice_in_a_function_is_one_variable(language: str) -> None:
    # express's utils.js (an eval-nes case): both `var at` are the function's one variable; a `var` beside a
    # parameter of the name is still refused
    text = (
        "function f(s) {\n  var at = s.indexOf(';');\n  for (;;) {\n    var at = s.indexOf(';', at);\n  }\n"
        "  return at;\n}\n"
    )
    s = Session(text, language)
    s.edit("var at", "at", "pos")
    assert s.follow() == text.replace("at =", "pos =").replace("at)", "pos)").replace("return at", "return pos")
    twice = "function f(at) {\n  var at = 2;\n  return at;\n}\n"
    s = Session(twice, language)
    s.edit("var at", "at", "pos")
    assert s.ask() is None
