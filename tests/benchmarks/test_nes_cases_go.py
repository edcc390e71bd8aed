"""The Go structural cases of `waferline eval-nes`: the shipped file loads, each case is a rename of one name at its
declaration whose intended file renames that name and nothing else, every case's package is one of
benchmarks/nes_go_packages.txt under a permissive licence; the generator's own steps (a .deb read without dpkg, a
debian/copyright's licences, offsets in characters); and, where `go` is installed, the go/types oracle itself on
the scopes a rename must follow."""

from __future__ import annotations

import io
import shutil
import tarfile
from pathlib import Path

import pytest
from nes_case_checks import check_rename_case  # tests/support (on sys.path: tests/conftest.py)

from waferline.benchmarks.nes_cases_go import (
    PERMISSIVE,
    char_offsets,
    deb_files,
    licence_of,
    licences,
    package_list,
    rename_candidates,
    unpack,
)  # fmt: skip
from waferline.benchmarks.nes_eval import DATA, read_cases

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
COPYRIGHT = """Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: m

Files: *
Copyright: 2020 Someone
License: Expat

Files: path.go
       internal/*
Copyright: 2009 Others
License: BSD-3-clause

Files: gpl.go
License: GPL-2+

Files: debian/*
License: GPL-2+
"""


def test_shipped_go_cases_are_well_formed() -> None:
    assert (DATA / "structural-go.jsonl.gz").stat().st_size < 250_000
    cases = read_cases(DATA, ["structural-go"])
    listed = {(name, version) for name, version, _, _ in package_list(BENCHMARKS / "nes_go_packages.txt")}
    assert {c["language"] for c in cases} == {"go"}
    kinds = ("rename-parameter-go", "rename-local-go", "rename-receiver-go", "silent-unused-parameter-go")
    assert {c["category"] for c in cases} == set(kinds)
    assert len({c["id"] for c in cases}) == len(cases)
    for c in cases:
        src = c["source"]
        assert (src["package"], src["version"]) in listed and src["licence"] in PERMISSIVE
        assert src["file"].endswith(".go") and not src["file"].endswith("_test.go")
        check_rename_case(c)


def test_the_check_list_is_apart_from_the_shipped_one() -> None:
    shipped = {name for name, *_ in package_list(BENCHMARKS / "nes_go_packages.txt")}
    check = {name for name, *_ in package_list(BENCHMARKS / "nes_go_packages_check.txt")}
    assert shipped and check and not shipped & check


def test_licences_of_a_machine_readable_copyright() -> None:
    paragraphs = licences(COPYRIGHT)
    assert paragraphs[0] == (["*"], "MIT")
    assert licence_of("context.go", paragraphs) == "MIT"
    assert licence_of("path.go", paragraphs) == licence_of("internal/json/a.go", paragraphs) == "BSD-3-Clause"
    assert licence_of("gpl.go", paragraphs) == "GPL-2+"


def _deb(path: Path, files: dict[str, str]) -> Path:
    """A .deb as dpkg-deb writes one: an `ar` archive of debian-binary, control.tar.xz and data.tar.xz."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:xz") as tar:
        for name, text in files.items():
            body = text.encode()
            info = tarfile.TarInfo("./" + name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    out = b"!<arch>\n"
    for name, body in (("debian-binary", b"2.0\n"), ("control.tar.xz", b"x"), ("data.tar.xz", data.getvalue())):
        header = f"{name:<16}{0:<12}{0:<6}{0:<6}{100644:<8}{len(body):<10}`\n".encode()
        out += header + body + (b"\n" if len(body) % 2 else b"")
    path.write_bytes(out)
    return path


def test_unpack_reads_a_deb_and_keeps_permissive_sources_only(tmp_path: Path) -> None:
    body = "package m\n\nfunc f(a int) int {\n\treturn a\n}\n" + "// padding\n" * 60
    src = "usr/share/gocode/src/example.com/m/"
    deb = _deb(tmp_path / "golang-example-m-dev_1.0-1_all.deb", {
        src + "m.go": body, src + "path.go": body, src + "gpl.go": body, src + "m_test.go": body,
        src + "testdata/t.go": body, src + "_examples/e.go": body, src + "small.go": "package m\n",
        "usr/share/gocode/src/example.com/other/o.go": body,
        "usr/share/doc/golang-example-m-dev/copyright": COPYRIGHT,
    })  # fmt: skip
    assert dict(deb_files(deb))[src + "m.go"] == body.encode()
    files, every, refused = unpack(deb, "MIT", "example.com/m", tmp_path / "gopath")
    assert [(path, licence) for path, _, licence in files] == [("m.go", "MIT"), ("path.go", "BSD-3-Clause")]
    assert refused == {"GPL-2+": 1}
    assert {f.name for f in every} == {"m.go", "path.go", "gpl.go", "t.go", "e.go", "small.go"}, "no test file"
    assert (tmp_path / "gopath" / "src" / "example.com" / "other" / "o.go").is_file(), "there for the imports"
    with pytest.raises(SystemExit):
        unpack(deb, "Apache-2.0", "example.com/m", tmp_path / "gopath2")


def test_char_offsets_of_a_non_ascii_text() -> None:
    data = "é := 1\nx := é\n".encode()
    chars = char_offsets(data)
    assert chars[data.index(b"x")] == "é := 1\nx := é\n".index("x")
    assert chars[len(data)] == len("é := 1\nx := é\n")


GO_FILE = """package p

import "fmt"

type T struct{ name string }

func f(name string, n int) (out int, err error) {
	t := T{name: name}
	m := map[string]int{name: 1}
	x, err := g(name)
	if name := "inner"; name != "" {
		fmt.Println(name)
	}
	switch v := interface{}(x).(type) {
	case int:
		out = v
	}
	_ = m
	return out + len(t.name), err
}

func g(s string) (int, error) { return len(s), nil }
"""


@pytest.mark.skipif(shutil.which("go") is None, reason="the oracle needs Go (apt-get install golang-go)")
def test_the_go_types_oracle_follows_go_scopes(tmp_path: Path) -> None:
    folder = tmp_path / "src" / "p"
    folder.mkdir(parents=True)
    (folder / "p.go").write_text(GO_FILE, encoding="utf-8")
    (answer,) = rename_candidates([folder / "p.go"], tmp_path).values()
    found = {(c["kind"], c["name"], c["start"]): c["locations"] for c in answer["candidates"]}
    at = GO_FILE.index
    param = found[("parameter", "name", at("(name string") + 1)]
    assert param == [at("name}"), at("name: 1"), at("name)")], "a map's key is; T{name: }'s is a field"
    inner = found[("local", "name", at("name := "))]
    assert inner == [at("name != "), at("name)\n\t}")]
    assert found[("parameter", "err", at("err error"))] == [at("err := g"), at("err\n}")], "a := again assigns"
    assert found[("local", "v", at("v := "))] == [at("v\n\t}")], "a type switch's variable, every clause"
    assert found[("parameter", "n", at("n int"))] == [], "unused: a silent case"
