"""The structural next-edit candidates in Rust, Java, C and C++ (features/next_edit/lexical_declared.py,
lexical_rust.py, lexical_java_c.py, signature_declared.py): a rename of a parameter or local, or a signature change,
followed to the end of its chain and the whole file checked; and the renames that would not be exact, refused."""

from __future__ import annotations

import pytest

from waferline.benchmarks.next_edit_session import Session

RUST = """fn area(w: i32, h: i32) -> i32 {
    let total = w * h;
    let p = Point { x: w, y: h };
    if total > 10 {
        let total = 0;
        return total;
    }
    let c = |k: i32| k * w;
    total + c(h) + p.x + other::w
}
"""

JAVA = """class Shape {
  int w;

  Shape(int w) {
    this.w = w;
  }

  int area(int h) {
    int total = w * h;
    for (int i = 0; i < h; i++) {
      total += i;
    }
    return total + this.w + h;
  }
}
"""

C = """#include <stdio.h>

static int area(int w, int *h) {
  int total = w * *h;
  for (int i = 0; i < w; i++) {
    total += i;
  }
  {
    int w = 2;
    total += w;
  }
  return total + point.h;
}
"""


@pytest.mark.parametrize(
    ("needle", "old", "new", "expected"),
    [
        # a parameter: its function, a closure's capture included, not the path `other::w` nor the field `p.x`
        ("area(w", "w", "width", RUST.replace("(w: i32", "(width: i32").replace("w * h", "width * h")
         .replace("x: w,", "x: width,").replace("k * w", "k * width")),
        # a `let`: from the statement on, not the `total` of the nested block's own `let` (another variable)
        ("let p", "p", "pt", RUST.replace("let p =", "let pt =").replace("p.x", "pt.x")),
        ("let c", "c", "scaled", RUST.replace("let c =", "let scaled =").replace("c(h)", "scaled(h)")),
        ("|k", "k", "factor", RUST.replace("|k: i32| k", "|factor: i32| factor")),
    ],
)  # fmt: skip
def test_rename_followed_in_rust(needle: str, old: str, new: str, expected: str) -> None:
    s = Session(RUST, "rust")
    s.edit(needle, old, new)
    assert s.follow() == expected


def test_rust_let_shadowing_its_own_name_reads_the_old_one() -> None:
    # `let x = x + 1;` reads the `x` before it: the second `let`'s rename follows its uses after it only
    text = "fn f(a: i32) -> i32 {\n    let x = a;\n    let x = x + 1;\n    x * 2\n}\n"
    s = Session(text, "rust")
    s.edit("let x = x", "x", "y")
    assert s.follow() == text.replace("let x = x + 1;\n    x * 2", "let y = x + 1;\n    y * 2")
    s = Session(text, "rust")
    s.edit("let x = a", "x", "y")
    # the first x is shadowed by the second let: read in its initialiser, not after it (semver's parse.rs)
    assert s.follow() == text.replace("let x = a;\n    let x = x + 1;", "let y = a;\n    let x = y + 1;")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # semver's `for lhs in lhs`, and a closure whose parameter has the name (semver's display.rs)
        ("fn f(x: Vec<i32>) -> i32 {\n    for x in x {\n        g(x);\n    }\n    0\n}\n",
         "fn f(z: Vec<i32>) -> i32 {\n    for x in z {\n        g(x);\n    }\n    0\n}\n"),
        ("fn f(x: i32) -> i32 {\n    let g = |x: i32| x;\n    g(x)\n}\n",
         "fn f(z: i32) -> i32 {\n    let g = |x: i32| x;\n    g(z)\n}\n"),
        ("fn f(x: i32) -> i32 {\n    {\n        let x = x * 2;\n        g(x);\n    }\n    x\n}\n",
         "fn f(z: i32) -> i32 {\n    {\n        let x = z * 2;\n        g(x);\n    }\n    z\n}\n"),
    ],
)  # fmt: skip
def test_rust_shadowing_is_followed_around_the_other_variable(text: str, expected: str) -> None:
    s = Session(text, "rust")
    s.edit("f(x", "x", "z")
    assert s.follow() == expected


def test_rust_shadowing_in_a_match_arm_is_followed_around_it() -> None:
    text = "fn f(x: i32, o: Option<i32>) -> i32 {\n    match o {\n        Some(x) => x,\n        _ => x,\n    }\n}\n"
    s = Session(text, "rust")
    s.edit("f(x", "x", "z")
    assert s.follow() == text.replace("f(x", "f(z").replace("_ => x", "_ => z"), "the arm's own x is skipped"


def test_rust_pattern_bindings_are_followed() -> None:
    text = (
        "fn f(o: Option<(i32, i32)>) -> i32 {\n    if let Some((a, b)) = o {\n        return a + b;\n    }\n"
        "    match o {\n        Some((v, _)) => v,\n        None => 0,\n    }\n}\n"
    )
    s = Session(text, "rust")
    s.edit("(a, b)", "a", "left")
    assert s.follow() == text.replace("(a, b)", "(left, b)").replace("a + b", "left + b")
    s = Session(text, "rust")
    s.edit("Some((v", "v", "first")
    assert s.follow() == text.replace("Some((v", "Some((first").replace("=> v", "=> first")


@pytest.mark.parametrize(
    ("text", "needle", "old", "new", "why"),
    [
        ("fn f(x: i32) -> P {\n    P { x, y: 0 }\n}\n", "f(x", "x", "z", "the shorthand `P { x }` names the field"),
        ("fn f(x: i32) {\n    println!(\"{x}\");\n    g(x);\n}\n", "f(x", "x", "z", "a macro's tokens"),
        ("fn f(x: i32) {\n    g(x);\n    h!(x);\n}\n", "f(x", "x", "z", "a macro's tokens"),
        ("fn f(x: i32, y: i32) -> i32 {\n    x + y\n}\n", "f(x", "x", "y", "y is taken"),
        ("fn f(x: i32) -> i32 {\n    let y = 1;\n    x + y\n}\n", "f(x", "x", "y", "y is taken in the body"),
        ("fn f(x: i32) -> i32 {\n    let y = x;\n    y + x\n}\n", "y + x", "x", "z", "a use, not a declaration"),
        ("fn f(p: P) -> i32 {\n    let P { x, .. } = p;\n    x\n}\n", "let P { x", "x", "z", "a pattern's shorthand"),
        ("fn f(o: Option<i32>) -> i32 {\n    match o {\n        Some(N) => N,\n        _ => 0,\n    }\n}\n",
         "Some(N", "N", "M", "N may be a constant"),
        ("const k: i32 = 1;\nfn f(o: i32) -> i32 {\n    match o {\n        k => k,\n    }\n}\n", "        k =>", "k",
         "j", "k is a constant"),
    ],
)  # fmt: skip
def test_rust_renames_that_would_not_be_exact_are_not_shown(text: str, needle: str, old: str, new: str,
                                                             why: str) -> None:  # fmt: skip
    s = Session(text, "rust")
    s.edit(needle, old, new)
    assert s.ask() is None, why


def test_rust_nested_items_hold_other_variables() -> None:
    # a nested `fn` cannot see the function's locals: its own `x` is left alone; one named like the new name refuses
    text = "fn f(x: i32) -> i32 {\n    fn g(x: i32) -> i32 {\n        x\n    }\n    g(x) + x\n}\n"
    s = Session(text, "rust")
    s.edit("f(x", "x", "n")
    assert s.follow() == text.replace("f(x", "f(n").replace("g(x) + x", "g(n) + n")
    s = Session(text, "rust")
    s.edit("f(x", "x", "g")
    assert s.ask() is None


@pytest.mark.parametrize(
    ("needle", "old", "new", "expected"),
    [
        # the constructor's parameter, not the field `this.w` of the same name
        ("Shape(int w", "w", "width", JAVA.replace("Shape(int w", "Shape(int width").replace("= w;", "= width;")),
        ("area(int h", "h", "height", JAVA.replace("area(int h", "area(int height").replace("w * h", "w * height")
         .replace("i < h", "i < height").replace("this.w + h", "this.w + height")),
        ("int total", "total", "sum", JAVA.replace("total", "sum")),
        ("i = 0", "i", "k", JAVA.replace("int i = 0; i < h; i++", "int k = 0; k < h; k++").replace("+= i", "+= k")),
    ],
)  # fmt: skip
def test_rename_followed_in_java(needle: str, old: str, new: str, expected: str) -> None:
    s = Session(JAVA, "java")
    s.edit(needle, old, new)
    assert s.follow() == expected


def test_java_local_named_like_a_field_starts_at_its_declaration() -> None:
    # before the local's declaration `w` is the field: left alone
    text = "class S {\n  int w;\n\n  int f() {\n    int a = w;\n    int w = 2;\n    return a + w;\n  }\n}\n"
    s = Session(text, "java")
    s.edit("int w = 2", "w", "v")
    assert s.follow() == text.replace("int w = 2;\n    return a + w", "int v = 2;\n    return a + v")


@pytest.mark.parametrize(
    ("text", "needle", "old", "new", "why"),
    [
        ("class S {\n  int f(int a) {\n    int b = a;\n    return a + b;\n  }\n}\n", "f(int a", "a", "b", "b is taken"),
        ("class S {\n  int f(int a) {\n    return a + b;\n  }\n}\n", "f(int a", "a", "b", "b (a field) is read"),
        ("class S {\n  int f(int a) {\n    int b = a;\n    return a + b;\n  }\n}\n", "a + b", "a", "c", "a use"),
        ("class S {\n  void f(int a) {\n    r(new R() {\n      void run() {\n        g(a);\n      }\n    });\n"
         "    g(a);\n  }\n}\n", "f(int a", "a", "c", "an anonymous class may inherit its own a"),
        ("class S {\n  void f(int a) {\n    switch (e) {\n      case a:\n        g(a);\n    }\n  }\n}\n", "f(int a",
         "a", "c", "case a: an enum constant"),
        ("class S {\n  void f(Object a) {\n    if (o instanceof T a) {\n    }\n    g(a);\n  }\n}\n",
         "f(Object a", "a", "c", "a pattern binds a again"),
    ],
)  # fmt: skip
def test_java_renames_that_would_not_be_exact_are_not_shown(text: str, needle: str, old: str, new: str,
                                                             why: str) -> None:  # fmt: skip
    s = Session(text, "java")
    s.edit(needle, old, new)
    assert s.ask() is None, why


@pytest.mark.parametrize("language", ["c", "cpp"])
def test_rename_followed_in_c(language: str) -> None:
    # the parameter `h`, not the field `point.h`; the nested block's own `w` alone; the parameter `w`, shadowed in
    # the nested block, refused
    s = Session(C, language)
    s.edit("*h)", "h", "hp")
    assert s.follow() == C.replace("*h)", "*hp)").replace("* *h;", "* *hp;")
    s = Session(C, language)
    s.edit("int total", "total", "sum")
    assert s.follow() == C.replace("total", "sum")
    s = Session(C, language)
    s.edit("int w = 2", "w", "v")
    assert s.follow() == C.replace("int w = 2;\n    total += w", "int v = 2;\n    total += v")
    s = Session(C, language)
    s.edit("area(int w", "w", "width")
    assert s.ask() is None


@pytest.mark.parametrize(
    ("text", "needle", "old", "new", "why"),
    [
        ("#define TWICE() (x + x)\nint f(int x) {\n  return TWICE() + x;\n}\n", "f(int x", "x", "y", "a macro reads x"),
        ("int f(int x) {\n#ifdef DEBUG\n  g(x);\n#endif\n  return x;\n}\n", "f(int x", "x", "y", "#ifdef in f"),
        ("int f(int x) {\n  int y = x;\n  return x + y;\n}\n", "f(int x", "x", "y", "y is taken"),
        ("int f(int x) {\n  {\n    int x = 2;\n    g(x);\n  }\n  return x;\n}\n", "f(int x", "x", "y", "shadowed"),
        ("int f(int x) {\n  return x;\n}\n", "return x", "x", "y", "a use"),
        ("int g;\nint f(int x) {\n  return x + g;\n}\n", "f(int x", "x", "g", "the global g is read"),
    ],
)  # fmt: skip
def test_c_renames_that_would_not_be_exact_are_not_shown(text: str, needle: str, old: str, new: str,
                                                          why: str) -> None:  # fmt: skip
    s = Session(text, "c")
    s.edit(needle, old, new)
    assert s.ask() is None, why


def test_cpp_lambda_captures_and_member_initialisers_follow_the_parameter() -> None:
    text = (
        "struct P {\n  int x;\n  P(int x) : x(x) {}\n  int f(int a) {\n    auto g = [a](int k) { return a + k; };\n"
        "    return g(a) + this->x;\n  }\n};\n"
    )
    s = Session(text, "cpp")
    s.edit("P(int x", "x", "px")
    assert s.follow() == text.replace("P(int x) : x(x)", "P(int px) : x(px)")
    s = Session(text, "cpp")
    s.edit("f(int a", "a", "n")
    assert s.follow() == text.replace("f(int a", "f(int n").replace("[a]", "[n]").replace("a + k", "n + k").replace(
        "g(a)", "g(n)"
    )


def test_a_use_of_a_local_renamed_is_not_a_substitution_on_the_lines_around() -> None:
    # before: the text substitution would rename `total` on the sibling lines, reading another variable
    text = "fn f(a: i32) -> i32 {\n    let total = a;\n    g(total);\n    h(total);\n    total\n}\n"
    s = Session(text, "rust")
    s.edit("g(total", "total", "sum")
    assert s.ask() is None


RUST_CALLS = """fn area(w: i32, h: i32) -> i32 {
    w * h
}

fn main(w: i32, h: i32, depth: i32) -> i32 {
    let a = area(1, 2) + area(h, w);
    println!("{}", area(w, h));
    a
}
"""


@pytest.mark.parametrize(
    ("new", "expected"),
    [
        ("w: i32, h: i32, depth: i32", "area(1, 2, depth) + area(h, w, depth)"),
        ("w: i32", "area(1) + area(h)"),
        ("h: i32, w: i32", "area(2, 1) + area(w, h)"),
    ],
)
def test_signature_change_fixes_the_calls_in_rust(new: str, expected: str) -> None:
    s = Session(RUST_CALLS, "rust")
    s.edit("area(w: i32, h: i32) ->", "w: i32, h: i32", new)
    text = s.follow()
    assert text.split("let a = ", 1)[1].startswith(expected + ";"), text
    assert 'println!("{}", area(w, h));' in text, "a macro's tokens are left alone"


def test_signature_change_fixes_the_calls_in_java_and_c() -> None:
    java = (
        "class S {\n  int area(int w, int h) {\n    return w * h;\n  }\n\n  int main(int w, int h, int depth) {\n"
        "    return area(w, h) + this.area(1, 2) + other.area(3, 4);\n  }\n}\n"
    )
    s = Session(java, "java")
    s.edit("area(int w, int h) {", "int w, int h", "int w, int h, int depth")
    expected = java.replace("(int w, int h) {\n    return", "(int w, int h, int depth) {\n    return")
    assert s.follow() == expected.replace("area(w, h) + this.area(1, 2)", "area(w, h, depth) + this.area(1, 2, depth)")
    overloaded = java.replace("  int main", "  int area(int w) {\n    return w;\n  }\n\n  int main")
    s = Session(overloaded, "java")
    s.edit("area(int w, int h) {", "int w, int h", "int w, int h, int depth")
    assert s.ask() is None, "an overload of the name: which one a call binds to is not followed"
    c = "int area(int w, int h) {\n  return w * h;\n}\n\nint main(int w, int h) {\n"
    c += "  return area(w, h) + area(1, 2);\n}\n"
    s = Session(c, "c")
    s.edit("area(int w, int h) {", "int w, int h", "int w")
    assert s.follow() == c.replace("area(int w, int h)", "area(int w)").replace("area(w, h)", "area(w)").replace(
        "area(1, 2)", "area(1)"
    )
    s = Session(c, "c")
    s.edit("area(int w, int h) {", "int w, int h", "int w, int h, int depth")
    assert s.ask() is None, "main has no `depth` to pass"


def test_java_signature_change_fixes_calls_in_nested_classes_that_cannot_inherit_the_name() -> None:
    # jsoup's Cleaner: createSafeElement(sourceEl) is called from the nested CleaningVisitor (before: left alone)
    java = (
        "class S {\n  private int area(int w) {\n    return w;\n  }\n\n  class In {\n    int f(int w, int d) {\n"
        "      return area(w) + this.area(w);\n    }\n  }\n\n  class Sub extends Base {\n    int g(int w, int d) {\n"
        "      return area(w);\n    }\n  }\n\n  class Own {\n    int area(int w) {\n      return 0;\n    }\n"
        "    int h(int w, int d) {\n      return area(w);\n    }\n  }\n\n  int k(int w, int d) {\n"
        "    return area(w) + new Object() {\n      int m(int d) {\n        return area(d);\n      }\n"
        "    }.m(d);\n  }\n}\n"
    )
    s = Session(java, "java")
    s.edit("area(int w) {\n    return w;", "int w", "int w, int d")
    text = s.follow()
    assert "return area(w, d) + this.area(w);" in text, "In's own `this.area` is In's"
    assert text.count("area(w, d)") == 2, "In's call and k's call"
    assert "      return area(w);\n    }\n  }\n\n  class Own" in text, "Sub may inherit an area"
    assert "int h(int w, int d) {\n      return area(w);" in text, "Own declares its own area"
    assert "return area(d);" in text, "an anonymous class may inherit one"


def test_rust_let_else_binding_is_followed_unless_it_may_be_a_constant() -> None:
    text = "fn f(o: Option<i32>) -> i32 {\n    let Some(v) = o else {\n        return 0;\n    };\n    v + 1\n}\n"
    s = Session(text, "rust")
    s.edit("Some(v", "v", "n")
    assert s.follow() == text.replace("Some(v", "Some(n").replace("v + 1", "n + 1")
    s = Session(text.replace("v", "V"), "rust")
    s.edit("Some(V", "V", "N")
    assert s.ask() is None


def test_paths_and_qualified_names_are_not_the_variable() -> None:
    rust = "fn f(io: i32) -> i32 {\n    std::io::stdin();\n    io::read();\n    io + 1\n}\n"
    s = Session(rust, "rust")
    s.edit("f(io", "io", "n")
    assert s.follow() == rust.replace("f(io", "f(n").replace("io + 1", "n + 1")
    cpp = "int f(int max) {\n  return std::max(max, 2) + max;\n}\n"
    s = Session(cpp, "cpp")
    s.edit("f(int max", "max", "top")
    assert s.follow() == cpp.replace("int max", "int top").replace("(max, 2) + max", "(top, 2) + top")
    java = "class S {\n  int f(int util) {\n    java.util.List<String> l = null;\n    return util;\n  }\n}\n"
    s = Session(java, "java")
    s.edit("f(int util", "util", "u")
    assert s.follow() == java.replace("int util", "int u").replace("return util", "return u")


def test_c_token_pasting_macro_used_by_the_function_refuses_its_renames() -> None:
    # `a##j` makes `a0` out of `STEP(0)`, through STEPS too (hardware/torch_backend/fused_packed.c's chains: gcc
    # rejected the renamed file); a function that uses no such macro is still followed
    text = (
        "#define STEP(j) a##j += 1\n#define STEPS() do { STEP(0); STEP(1); } while (0)\n"
        "int f(void) {\n  int a0 = 0, a1 = 0;\n  STEPS();\n  return a0 + a1;\n}\n\n"
        "int g(void) {\n  int a0 = 0;\n  return a0;\n}\n"
    )
    s = Session(text, "c")
    s.edit("int a0", "a0", "b0")
    assert s.ask() is None
    s = Session(text, "c")
    s.edit("int a0 = 0;\n  return", "a0", "b0")
    assert s.follow() == text.replace("int a0 = 0;\n  return a0", "int b0 = 0;\n  return b0")


def test_c_define_reading_a_field_of_the_name_does_not_refuse_the_rename() -> None:
    # libuv's fs-poll.c: `#define uv__make_close_pending(h) uv__want_endgame((h)->loop, (h))` names a field `loop`,
    # which no rename of a variable `loop` changes (before: every rename of `loop` in the file refused)
    text = (
        "#define PENDING(h) endgame((h)->loop, (h))\n#define READS() (loop + 1)\n"
        "int f(int loop) {\n  return loop * 2;\n}\n"
    )
    s = Session(text.replace("#define READS() (loop + 1)\n", ""), "c")
    s.edit("f(int loop", "loop", "lp")
    assert s.follow() == text.replace("#define READS() (loop + 1)\n", "").replace("loop * 2", "lp * 2").replace(
        "f(int loop", "f(int lp"
    )
    s = Session(text, "c")
    s.edit("f(int loop", "loop", "lp")
    assert s.ask() is None, "READS() may read the variable"
    # libuv's tty.c: `#define isatty(fd) isreallyatty(fd)`: the body's fd is the macro's parameter
    text = "#define isatty(fd) really(fd)\nint f(int fd) {\n  return isatty(fd);\n}\n"
    s = Session(text, "c")
    s.edit("f(int fd", "fd", "fd2")
    assert s.follow() == text.replace("f(int fd", "f(int fd2").replace("isatty(fd);", "isatty(fd2);")


@pytest.mark.parametrize(
    ("text", "needle", "old", "new", "expected"),
    [
        # ryu's, hex's, semver's: the standard library's expression macros read the variable like any expression
        ("fn f(e: i32) -> u32 {\n    debug_assert!(e >= 0);\n    (e as u32 * 7) >> 2\n}\n", "f(e", "e", "e2",
         "fn f(e2: i32) -> u32 {\n    debug_assert!(e2 >= 0);\n    (e2 as u32 * 7) >> 2\n}\n"),
        ("fn f(f: &mut W, c: u8) -> R {\n    write!(f, \"bad {:?} at {}\", c, c.len())\n}\n", "W, c", "c", "ch",
         "fn f(f: &mut W, ch: u8) -> R {\n    write!(f, \"bad {:?} at {}\", ch, ch.len())\n}\n"),
        # a field, a method, a path's part among the tokens are not the variable; a nested expression macro is read
        ("fn f(x: S) {\n    assert_eq!(x.x, S::x(), \"{}\", format!(\"{:?}\", x));\n}\n", "f(x", "x", "z",
         "fn f(z: S) {\n    assert_eq!(z.x, S::x(), \"{}\", format!(\"{:?}\", z));\n}\n"),
        ("fn f(n: usize) -> Vec<u8> {\n    vec![0; n]\n}\n", "f(n", "n", "len",
         "fn f(len: usize) -> Vec<u8> {\n    vec![0; len]\n}\n"),
    ],
)  # fmt: skip
def test_rust_expression_macros_are_followed(text: str, needle: str, old: str, new: str, expected: str) -> None:
    s = Session(text, "rust")
    s.edit(needle, old, new)
    assert s.follow() == expected


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("fn f(x: i32) {\n    println!(\"{}\", y = x);\n}\n", "a named argument"),
        ("fn f(x: i32) {\n    assert!(v.iter().all(|x| x > 0), \"{}\", x);\n}\n", "a closure may bind x"),
        ("fn f(x: S) {\n    assert!(x.ok() && m!(x));\n}\n", "a crate's macro among the tokens"),
        ("fn f(x: S) {\n    assert!(matches!(x, S::A));\n}\n", "matches! holds a pattern"),
        ("fn f(x: S) {\n    dbg!(S { x });\n}\n", "a `{...}` group: a shorthand"),
        ("fn f(x: i32) {\n    println!(\"{x:?}\");\n}\n", "an inline format argument"),
    ],
)  # fmt: skip
def test_rust_expression_macros_refuse_what_they_cannot_follow(text: str, why: str) -> None:
    s = Session(text, "rust")
    s.edit("f(x", "x", "z")
    assert s.ask() is None, why
