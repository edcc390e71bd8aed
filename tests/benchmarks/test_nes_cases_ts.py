"""The JavaScript and TypeScript structural cases of `waferline eval-nes`: the shipped file loads, each case is a
rename of one name at its declaration whose intended file renames that name and nothing else, every case's package
and licence are those of benchmarks/nes_packages.txt; and the generator's own steps (no node, no network)."""

from __future__ import annotations

import io
import random
import tarfile
from pathlib import Path

from nes_case_checks import check_rename_case  # tests/support (on sys.path: tests/conftest.py)

from waferline.benchmarks.nes_cases_ts import file_cases, package_list, source_files
from waferline.benchmarks.nes_eval import DATA, after_user, intended, read_cases

LISTING = Path(__file__).resolve().parents[2] / "benchmarks" / "nes_packages.txt"
SUFFIX = {"javascript": "js", "typescript": "ts"}


def test_shipped_js_ts_cases_are_well_formed() -> None:
    assert (DATA / "structural-js.jsonl.gz").stat().st_size < 300_000
    cases = read_cases(DATA, ["structural-js"])
    listed = {(name, version): licence for name, version, licence, _ in package_list(LISTING)}
    assert {c["language"] for c in cases} == {"javascript", "typescript"}
    categories = {c["category"] for c in cases}
    for kind in ("rename-parameter", "rename-local", "silent-unused-parameter"):
        assert {f"{kind}-js", f"{kind}-ts"} <= categories
    assert len({c["id"] for c in cases}) == len(cases)
    for c in cases:
        assert c["kind"] == "structural" and c["category"].endswith("-" + SUFFIX[c["language"]])
        src = c["source"]
        assert listed[(src["package"], src["version"])] == src["licence"]
        assert src["file"].endswith(".ts" if c["language"] == "typescript" else (".js", ".cjs"))
        check_rename_case(c, name=r"[A-Za-z_$][\w$]*", word=r"[\w$]")


def test_file_cases_rename_every_location_and_keep_unused_parameters_silent() -> None:
    text = "function f(a, b) {\n  const total = a + 1;\n  return total * a;\n}\n"
    a, b, total = text.index("a,"), text.index("b)"), text.index("total")
    candidates = [
        {"kind": "parameter", "name": "a", "start": a, "locations": [text.index("a +"), text.index("a;")]},
        {"kind": "parameter", "name": "b", "start": b, "locations": []},
        {"kind": "local", "name": "total", "start": total, "locations": [text.index("total *")]},
        {"kind": "local", "name": "unread", "start": 0, "locations": []},
    ]
    cases = file_cases(text, candidates, "js", random.Random(0))
    by = {c["category"]: c for c in cases}
    assert set(by) == {"rename-parameter-js", "silent-unused-parameter-js", "rename-local-js"}
    p = by["rename-parameter-js"]
    new = p["edits"][0]["text"]
    assert intended(p) == text.replace("a,", f"{new},").replace("a +", f"{new} +").replace("a;", f"{new};")
    assert intended(by["silent-unused-parameter-js"]) == after_user(by["silent-unused-parameter-js"])
    assert intended(by["rename-local-js"]).count(by["rename-local-js"]["edits"][0]["text"]) == 2


def test_file_cases_skip_a_location_whose_text_is_not_the_name() -> None:
    text = "function f(a) {\n  return b;\n}\n"
    wrong = {"kind": "parameter", "name": "a", "start": text.index("a)"), "locations": [text.index("b;")]}
    assert file_cases(text, [wrong], "ts", random.Random(0)) == []


def test_source_files_keep_the_listed_sources_only(tmp_path: Path) -> None:
    body = "function f(a) {\n  return a;\n}\n" * 30
    members = {"package/lib/a.js": body, "package/lib/b.d.ts": body, "package/lib/c.min.js": body,
               "package/lib/test/d.js": body, "package/src/e.ts": body, "package/index.js": body,
               "package/lib/small.js": "x", "package/lib/crlf.js": body.replace("\n", "\r\n")}  # fmt: skip
    tarball = tmp_path / "p-1.0.0.tgz"
    with tarfile.open(tarball, "w:gz") as tar:
        for name, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    found = source_files(tarball, ["lib/", "index.js"], tmp_path / "out")
    assert [name for name, _ in found] == ["index.js", "lib/a.js"]
    assert all(f.read_text(encoding="utf-8") == body for _, f in found)
