"""The structural next-edit candidates in JavaScript, TypeScript and Go (features/next_edit/lexical.py,
rename_lexical.py, signature_lexical.py): a rename or a signature change followed to the end of its chain, the whole
file checked; and the renames that would not be exact, refused."""

from __future__ import annotations

import re

import pytest

from waferline.benchmarks.next_edit_session import Session

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


# Go: the scope of a variable declared in a function begins after its statement (`x := x` reads the outer x), a
# function's parameters and its body's top level are one block (`v, err :=` there assigns a parameter `err`), and a
# `:=` that declares a name again in its block is a use of it (go/types' reading: the eval-nes Go cases)
GO_EQUAL = (
    "package m\n\nfunc (a *W) Equal(b N) bool {\n\tif b, ok := b.(*W); ok {\n\t\treturn a.x == b.x\n\t}\n"
    "\treturn false\n}\n"
)
GO_BLOCK = (
    "package m\n\nfunc f(n int) int {\n\ttotal := n\n\t{\n\t\tm := total\n\t\ttotal := m * 2\n\t\tn = total\n\t}\n"
    "\treturn total + n\n}\n"
)
GO_SWITCH = (
    "package m\n\nfunc f(opts []O, v any) int {\n\tfor _, opt := range opts {\n"
    "\t\tswitch opt := opt.filter(); opt.(type) {\n\t\tcase int:\n\t\t\treturn opt.n\n\t\t}\n\t}\n"
    "\tswitch v := v.(type) {\n\tcase int:\n\t\treturn v\n\t}\n\treturn 0\n}\n"
)


@pytest.mark.parametrize(
    ("text", "needle", "old", "new", "expected"),
    [
        (GO_EQUAL, "if b", "b", "c", GO_EQUAL.replace("if b,", "if c,").replace("== b.x", "== c.x")),
        (GO_EQUAL, "(b N", "b", "other", GO_EQUAL.replace("(b N", "(other N").replace("b.(*W)", "other.(*W)")),
        (GO_BLOCK, "total := n", "total", "sum",
         GO_BLOCK.replace("total := n", "sum := n").replace("m := total", "m := sum").replace("total + n", "sum + n")),
        (GO_SWITCH, "_, opt", "opt", "o", GO_SWITCH.replace("_, opt", "_, o").replace("opt.filter", "o.filter")),
        (GO_SWITCH, "switch opt", "opt", "p", GO_SWITCH.replace("switch opt", "switch p")
         .replace("opt.(type)", "p.(type)").replace("opt.n", "p.n")),
        (GO_SWITCH, "v any", "v", "value", GO_SWITCH.replace("v any", "value any").replace("v.(type)", "value.(type)")),
    ],
)  # fmt: skip
def test_a_go_local_is_in_scope_after_its_statement(text: str, needle: str, old: str, new: str, expected: str) -> None:
    s = Session(text, "go")
    s.edit(needle, old, new)
    assert s.follow() == expected


def test_go_select_and_range_declare_with_colon_equals_only() -> None:
    text = (
        "package m\n\nfunc f(ch chan int, v int, m map[int]int) (k int) {\n\tselect {\n\tcase v := <-ch:\n"
        "\t\treturn v\n\t}\n\tfor k = range m {\n\t}\n\treturn v + k\n}\n"
    )
    s = Session(text, "go")
    s.edit("v int", "v", "w")
    assert s.follow() == text.replace("v int", "w int").replace("v + k", "w + k"), "the case's own v is another"
    s = Session(text, "go")
    s.edit("case v", "v", "got")
    assert s.follow() == text.replace("case v", "case got").replace("return v\n", "return got\n")
    s = Session(text, "go")
    s.edit("(k int)", "k", "key")
    assert s.follow() == text.replace("(k int)", "(key int)").replace("for k =", "for key =").replace("+ k", "+ key")


def test_go_colon_equals_again_assigns_the_variable() -> None:
    text = (
        "package m\n\nfunc f() (err error) {\n\ta, err := g()\n\tb, err := g()\n\tif err != nil {\n"
        "\t\tc, err := g()\n\t\treturn h(c, err)\n\t}\n\treturn h(a, b, err)\n}\n"
    )
    s = Session(text, "go")
    s.edit("(err error", "err", "e")
    inner = "c, err := g()\n\t\treturn h(c, err)"
    renamed = re.sub(r"\berr\b", "e", text)
    assert s.follow() == renamed.replace(inner.replace("err", "e"), inner)
    s = Session(text, "go")
    s.edit("b, err", "err", "e")
    assert s.ask() is None, "a use of the result err, not a declaration"
    s = Session(text, "go")
    s.edit("c, err", "err", "e")
    assert s.follow() == text.replace(inner, inner.replace("err", "e")), "the block's own err"


def test_go_composite_literal_keys_of_a_known_type() -> None:
    # the literal's type decides what a key is: a struct declared in the file names fields, a map, slice or array
    # (by its literal or declared in the file) takes expressions, and so does a lowercase key of another package's
    # type (its unexported fields cannot be keys); an element of elided type is its outer literal's
    text = (
        "package m\n\ntype T struct{ name string }\ntype M map[string]int\n\nfunc f(name string) []any {\n"
        "\treturn []any{&T{name: name}, M{name: 1}, map[string]T{name: {name: name}}, []T{{name: name}},\n"
        "\t\turl.Values{name: nil}}\n}\n"
    )
    s = Session(text, "go")
    s.edit("f(name", "name", "label")
    expected = text.replace("f(name", "f(label").replace("T{name: name}", "T{name: label}").replace(
        "M{name: 1}", "M{label: 1}").replace("T{name: {name: name}}", "T{label: {name: label}}").replace(
        "{{name: name}}", "{{name: label}}").replace("Values{name:", "Values{label:")  # fmt: skip
    assert s.follow() == expected
    for unknown in ("Other{name: 1}", "[]Other{{name: 1}}", "map[string]Other{name: {name: 1}}"):
        s = Session(text.replace("url.Values{name: nil}", unknown), "go")
        s.edit("f(name", "name", "label")
        assert s.ask() is None, unknown
    exported = "package m\n\nfunc f(Name string) any {\n\treturn url.Values{Name: nil}\n}\n"
    s = Session(exported, "go")
    s.edit("f(Name", "Name", "Label")
    assert s.ask() is None, "another package's exported field, or the variable"


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
