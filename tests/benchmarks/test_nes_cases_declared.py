"""The Rust, Java, C and C++ structural cases of `waferline eval-nes`: the shipped files load, each case is a rename of
one name at its declaration whose intended file renames that name and nothing else, every case's package is one
of benchmarks/nes_declared_packages.txt under a permissive licence; the generator's own steps (the package list, a
Debian source package unpacked with its licences); and, where the compilers are installed, each oracle itself
(rustc's HIR, javac's attribution, libclang) on the scopes a rename must follow."""

from __future__ import annotations

import importlib.util
import io
import re
import shutil
import tarfile
from pathlib import Path

import pytest
from nes_case_checks import check_rename_case  # tests/support (on sys.path: tests/conftest.py)

from waferline.benchmarks.nes_cases_declared import (
    HERE,
    added_parameter_cases,
    added_parameters,
    answers,
    package_list,
    unpack_source,
    wanted,
)  # fmt: skip
from waferline.benchmarks.nes_cases_go import permissive
from waferline.benchmarks.nes_eval import DATA, intended, read_cases

LANGUAGES = ("rust", "java", "c", "cpp")


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text)


@pytest.mark.parametrize("language", LANGUAGES)
def test_shipped_cases_are_well_formed(language: str) -> None:
    assert (DATA / f"structural-{language}.jsonl.gz").stat().st_size < 250_000
    cases = read_cases(DATA, [f"structural-{language}"])
    listed = {(name, version) for lang, name, version, *_ in package_list(HERE / "nes_declared_packages.txt")
              if lang == language}  # fmt: skip
    assert {c["language"] for c in cases} == {language}
    kinds = {f"rename-parameter-{language}", f"rename-local-{language}", f"silent-unused-parameter-{language}"}
    added = f"add-parameter-{language}"
    assert {c["category"] for c in cases} == kinds | {added}
    assert len({c["id"] for c in cases}) == len(cases)
    for c in cases:
        src = c["source"]
        assert (src["package"], src["version"]) in listed and permissive(src["licence"])
        assert "test" not in src["file"].lower().rsplit("/", 1)[-1]
        if c["category"] == added:
            (edit,) = c["edits"]
            assert edit["start"] == edit["end"] and edit["text"].startswith(", ")
            variable = _words(edit["text"].split(":")[0] if language == "rust" else edit["text"])[-1]
            calls = len(c["expected"])
            assert calls >= 1 and all(e["text"].count(f", {variable}") >= 1 for e in c["expected"])
            assert _words(intended(c)).count(variable) >= _words(c["before"]).count(variable) + 1 + calls
            continue
        check_rename_case(c)


def test_the_lists_and_the_check_list_are_apart() -> None:
    shipped = package_list(HERE / "nes_declared_packages.txt")
    check = package_list(HERE / "nes_declared_packages_check.txt")
    assert {lang for lang, *_ in shipped} == {lang for lang, *_ in check} == set(LANGUAGES)
    assert not {name for _, name, *_ in shipped} & {name for _, name, *_ in check}
    itoa = next(p for p in shipped if p[1] == "librust-itoa-dev")
    assert itoa == ("rust", "librust-itoa-dev", "1.0.1-2", "MIT OR Apache-2.0", "src", [])
    uv = next(p for p in shipped if p[1] == "libuv1")
    assert uv[3:] == ("MIT", "src", ["include", "src"])
    yaml = next(p for p in shipped if p[1] == "yaml-cpp")
    assert yaml == ("cpp", "yaml-cpp", "0.7.0+dfsg-8", "X11", "src", ["include", "src"]) and permissive(yaml[3])


def test_wanted_keeps_sources_not_tests() -> None:
    body = "x\n" * 300
    assert wanted("src/parse.rs", body, "rust") and wanted("org/a/B.java", body, "java")
    assert not wanted("src/tests/a.rs", body, "rust") and not wanted("org/a/BTest.java", body, "java")
    assert not wanted("src/a.c", "x\n", "c"), "too small"
    assert not wanted("src/a.c", body.replace("x", "\tx"), "c"), "tabs"
    assert not wanted("src/a.h", body, "c")
    assert wanted("src/node.cpp", body, "cpp") and wanted("re2/dfa.cc", body, "cpp")
    assert not wanted("re2/testing/dump.cc", body, "cpp") and not wanted("src/a.hpp", body, "cpp")


COPYRIGHT = """Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/

Files: *
License: BSD-3-clause or GPL-2

Files: lib/gz*.c
License: zlib
"""


def _tar(path: Path, files: dict[str, str]) -> Path:
    with tarfile.open(path, "w:xz") as tar:
        for name, text in files.items():
            body = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    return path


def test_unpack_source_reads_the_orig_tree_and_its_copyright(tmp_path: Path) -> None:
    _tar(tmp_path / "libz_1.5+dfsg-5.debian.tar.xz", {"debian/copyright": COPYRIGHT})
    _tar(tmp_path / "libz_1.5+dfsg.orig.tar.xz", {"z-1.5/lib/a.c": "int a;\n", "z-1.5/lib/gzip.c": "int g;\n"})
    root, copyright_text = unpack_source(tmp_path, "libz", "1.5+dfsg-5", tmp_path / "out")
    assert (root / "lib" / "a.c").read_text() == "int a;\n" and copyright_text == COPYRIGHT
    with pytest.raises(SystemExit):
        unpack_source(tmp_path, "libz", "1.6-1", tmp_path / "out2")


def _crate(folder: Path, lib: str) -> Path:
    """A crate of one file, src/lib.rs (returned), edition 2021."""
    (folder / "src").mkdir()
    (folder / "Cargo.toml").write_text('[package]\nedition = "2021"\n', encoding="utf-8")
    (folder / "src" / "lib.rs").write_text(lib, encoding="utf-8")
    return folder / "src" / "lib.rs"


RUST = """pub struct P { pub x: i32 }

pub fn f(a: i32, unused: i32) -> P {
    let x = a + 1;
    let x = x * 2;
    debug_assert!(x > 0);
    let p = P { x };
    let q = P { x: a };
    let s = format!("{x}");
    if let Some(v) = Some(a) { return P { x: v + s.len() as i32 }; }
    let P { x } = q;
    let _ = x;
    p
}
"""


@pytest.mark.skipif(shutil.which("rustc") is None, reason="the oracle needs rustc")
def test_rustc_hir_oracle(tmp_path: Path) -> None:
    lib = _crate(tmp_path, RUST)
    (answer,) = answers("rust", tmp_path, "src", [lib], []).values()
    found = {(c["kind"], c["name"], c["start"]): c["locations"] for c in answer["candidates"]}
    at = RUST.index
    assert found[("parameter", "a", at("a: i32"))] == [at("a + 1"), at("a }"), at("a) {")]
    assert found[("parameter", "unused", at("unused"))] == []
    assert found[("local", "v", at("v) ="))] == [at("v + s")]
    assert ("local", "x", at("x = x")) not in found, "the second x: a shorthand `P { x }` and `{x}` use it"
    assert found[("local", "x", at("x = a"))] == [at("x * 2")], "the first x: read by the second let"
    assert ("local", "x", at("x } = q")) not in found, "a pattern's shorthand: the field's name too"
    assert answer["skipped"]["a field shorthand"] == 2


JAVA = """class A {
    int x;
    int f(int x, int unused) {
        int y = x + this.x;
        Runnable r = () -> { int z = x; };
        for (int i = 0; i < y; i++) { y += i; }
        return y;
    }
}
"""


@pytest.mark.skipif(shutil.which("java") is None, reason="the oracle needs a JDK")
def test_javac_oracle(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    a = tmp_path / "src" / "A.java"
    a.write_text(JAVA, encoding="utf-8")
    (answer,) = answers("java", tmp_path, "src", [a], []).values()
    found = {(c["kind"], c["name"], c["start"]): c["locations"] for c in answer["candidates"]}
    at = JAVA.index
    assert found[("parameter", "x", at("x, int"))] == [at("x + this"), at("x; }")], "this.x is the field"
    assert found[("parameter", "unused", at("unused"))] == []
    y = at("y = x")
    assert found[("local", "y", y)] == [m.start() for m in re.finditer(r"\by\b", JAVA) if m.start() > y]
    assert found[("local", "i", at("i = 0"))] == [at("i < y"), at("i++"), at("i; }")]


C = """#define FIELD(h) ((h)->n)
struct s { int n; };
int f(struct s *h, int unused) {
  int n = FIELD(h);
  int m = n + h->n;
  { int n = 2; m += n; }
  return m;
}
#define DROPS(a, b) ((a) + 1)
int h(int p, int q) {
  return DROPS(p, q);
}
#define TWICE(v) ((v) + (v))
int g(int k) {
#ifdef X
  k++;
#endif
  return TWICE(k);
}
"""


@pytest.mark.skipif(importlib.util.find_spec("clang") is None or shutil.which("cc") is None,
                    reason="the oracle needs libclang (the nes-cases extra) and a C compiler")  # fmt: skip
def test_libclang_oracle(tmp_path: Path) -> None:
    c = tmp_path / "a.c"
    c.write_text(C, encoding="utf-8")
    (answer,) = answers("c", tmp_path, ".", [c], []).values()
    found = {(cand["kind"], cand["name"], cand["start"]): cand["locations"] for cand in answer["candidates"]}
    at = C.index
    assert found[("parameter", "h", at("h, int"))] == [at("h);"), at("h->n;")]
    assert found[("parameter", "unused", at("unused"))] == []
    assert found[("local", "n", at("n = FIELD"))] == [at("n + h")], "not the field, not the inner n"
    assert found[("local", "n", at("n = 2"))] == [at("n; }\n  return")]
    assert not [k for k in found if k[1] == "k"], "g holds an #ifdef: left out"
    assert found[("parameter", "p", at("p, int q"))] == [at("p, q);")]
    assert not [k for k in found if k[1] == "q"], "DROPS never reads q: unsure, left out"
    assert answer["skipped"]["a preprocessor line in the function"] == 1


NEEDS_CLANG_CPP = pytest.mark.skipif(
    importlib.util.find_spec("clang") is None or shutil.which("c++") is None,
    reason="the oracle needs libclang (the nes-cases extra) and a C++ compiler",
)


def _cpp_file(folder: Path, name: str, text: str) -> tuple[Path, str]:
    """A C++ file of `text` in `folder`, and a function giving the offset of a needle in it."""
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path, text.index


CPP = """#include <vector>
namespace ns {
struct P {
  int x;
  P(int x) : x(x) {}
  template <typename T> T f(T a, int unused) const {
    auto g = [a](T k) { int t = k; return a + t; };
    return g(a) + this->x;
  }
};
int sum(const std::vector<int>& v) {
  int t = 0;
  for (const auto& e : v) t += e;
  struct L { int m(int t) { return t; } };
  return t;
}
}  // namespace ns
"""


@NEEDS_CLANG_CPP
def test_libclang_oracle_in_cpp(tmp_path: Path) -> None:
    cpp, at = _cpp_file(tmp_path, "a.cpp", CPP)
    (answer,) = answers("cpp", tmp_path, ".", [cpp], []).values()
    assert not answer["skipped"]
    found = {(cand["kind"], cand["name"], cand["start"]): cand["locations"] for cand in answer["candidates"]}
    assert found[("parameter", "x", at("x) : x"))] == [at("x) {}")], "the initialiser's argument, not the field"
    assert found[("parameter", "a", at("a, int"))] == [at("a](T"), at("a + t"), at("a) + this")], "its capture"
    assert found[("parameter", "unused", at("unused"))] == []
    assert found[("parameter", "k", at("k) {"))] == [at("k; return")], "a lambda's parameter"
    assert found[("local", "t", at("t = k"))] == [at("t; };")], "a lambda's local"
    assert found[("local", "e", at("e : v"))] == [at("e;\n")], "the range-for's variable"
    assert found[("local", "t", at("t = 0"))] == [at("t += e"), at("t;\n}\n}")], "not the local class's t"
    assert not [k for k in found if k[2] > at("struct L") and k[2] < at("return t;\n}\n}")], "not its members"


def test_added_parameter_cases_pass_the_variable_at_every_call() -> None:
    text = "int f(int a) {\n  return a;\n}\nint g(int a, int n) {\n  return f(a) + f(1);\n}\n"
    found = [{"function": "f", "at": text.index(") {"), "text": ", int n", "variable": "n",
              "calls": [text.index(") +"), text.index(");\n}\n", text.index("f(1"))]}]  # fmt: skip
    (case,) = added_parameter_cases(text, found, "c")
    assert case["category"] == "add-parameter-c" and case["edits"] == [{"start": 11, "end": 11, "text": ", int n"}]
    assert intended(case) == text.replace("f(int a)", "f(int a, int n)").replace("f(a) + f(1)", "f(a, n) + f(1, n)")


JAVA_CALLS = """class B {
    private int f(int a) { return a * 2; }
    private int g(int a) { return a; }
    public int h(int a, int n) { return f(a) + f(n) + g(a); }
    public int k(int b, int n) { return f(b); }
    public int m(int n) { n++; java.util.function.IntSupplier r = () -> g(1); return r.getAsInt(); }
}
"""


@pytest.mark.skipif(shutil.which("java") is None, reason="the oracle needs a JDK")
def test_javac_signature_oracle(tmp_path: Path) -> None:
    b = tmp_path / "src" / "B.java"
    b.parent.mkdir()
    b.write_text(JAVA_CALLS, encoding="utf-8")
    (answer,) = added_parameters("java", tmp_path, "src", [b], []).values()
    (found,) = answer["candidates"]
    at = JAVA_CALLS.index
    assert found["function"] == "f" and found["variable"] == "n" and found["at"] == at("a) { return a * 2") + 1
    assert found["text"] == ", int n", "the callers' own parameter, as they spell it"
    assert found["calls"] == [at("a) + f(n)") + 1, at("n) + g(a)") + 1, at("b); }") + 1]
    assert answer["skipped"]["the intended file does not compile"] == 1, "g(1, n) in a lambda: n is not final"
    assert answer["skipped"]["not a private method"] == 4, "h, k, m and the implicit constructor"


C_CALLS = """static int f(int a) { return a * 2; }
static int g(int a) { return a; }
int h(int a, long n) { return f(a) + g(a); }
int k(int b, long n) { return f(b) + g(b); }
int p(int n) { return g(n); }
int (*q)(int) = g;
"""


@pytest.mark.skipif(importlib.util.find_spec("clang") is None or shutil.which("cc") is None,
                    reason="the oracle needs libclang (the nes-cases extra) and a C compiler")  # fmt: skip
def test_libclang_signature_oracle(tmp_path: Path) -> None:
    c = tmp_path / "b.c"
    c.write_text(C_CALLS, encoding="utf-8")
    (answer,) = added_parameters("c", tmp_path, ".", [c], []).values()
    (found,) = answer["candidates"]
    at = C_CALLS.index
    assert (found["function"], found["text"], found["variable"]) == ("f", ", long n", "n")
    assert found["at"] == at("a) { return a * 2") + 1 and found["calls"] == [at("a) + g") + 1, at("b) + g") + 1]
    assert answer["skipped"]["a mention of the function that is not a call clang sees"] == 1, "g's pointer use"


CPP_CALLS = """#include <ostream>
struct Node { int size() const { return 1; } };
namespace yaml {
static int Width(const Node& node, int indent) { return node.size() + indent; }
static int Twice(int a) { return 2 * a; }
static int Twice(long a) { return 2 * a; }
static int Half(int a) { return a / 2; }
int Emit(const Node& node, int indent, std::ostream& out) {
  auto later = [&]() { return Width(node, 0); };
  return Width(node, indent) + later() + Twice(indent) + yaml::Half(indent);
}
struct Emitter {
  int Go(const Node& node, int indent, std::ostream& out) { return Width(node, 1) + Half(indent); }
};
}  // namespace yaml
"""


@NEEDS_CLANG_CPP
def test_libclang_signature_oracle_in_cpp(tmp_path: Path) -> None:
    cpp, at = _cpp_file(tmp_path, "b.cpp", CPP_CALLS)
    (answer,) = added_parameters("cpp", tmp_path, ".", [cpp], []).values()
    (found,) = answer["candidates"]
    assert (found["function"], found["text"], found["variable"]) == ("Width", ", std::ostream& out", "out")
    assert found["at"] == at(" int indent) {") + len(" int indent")
    assert found["calls"] == [at(", 0)") + 3, at("indent) + later") + 6, at("1) + Half") + 1], "a method's call too"
    assert answer["skipped"]["an overload's or a qualified call"] == 1, "yaml::Half"
    assert answer["skipped"]["a mention of the function that is not a call clang sees"] == 1, "the other Twice"


RUST_CALLS = """pub fn f(a: u32) -> u32 {
    a * 2
}

pub fn g(a: u32) -> u32 {
    a
}

pub fn h(a: u32, n: u64) -> u32 {
    f(a) + g(a)
}

pub fn k(b: u32, n: u64) -> u32 {
    let c = |x: u32| f(x);
    c(b) + g(b)
}

pub fn p(n: u64) -> u32 {
    let n = n as u32;
    let ptr: fn(u32) -> u32 = g;
    ptr(n)
}

pub fn q(a: u32) -> u32 {
    a
}

pub fn r(a: u32, s: String) -> u32 {
    q(a) + q(a)
}
"""


@pytest.mark.skipif(shutil.which("rustc") is None, reason="the check needs rustc")
def test_rust_signature_candidates_are_type_checked(tmp_path: Path) -> None:
    lib = _crate(tmp_path, RUST_CALLS)
    (answer,) = added_parameters("rust", tmp_path, "src", [lib], []).values()
    (found,) = answer["candidates"]
    at = RUST_CALLS.index
    assert (found["function"], found["text"], found["variable"]) == ("f", ", n: u64", "n")
    assert found["at"] == at(": u32) -> u32 {\n    a * 2") + 5
    assert found["calls"] == [at("a) + g(a)") + 1, at("x);") + 1], "the closure's call passes the caller's n"
    assert answer["skipped"]["a mention of the function that is not a plain call"] == 1, "g as a fn pointer"
    assert answer["skipped"]["the intended crate does not type-check"] == 1, "q(a, s) + q(a, s) moves s twice"
    assert lib.read_text(encoding="utf-8") == RUST_CALLS
