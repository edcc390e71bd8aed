"""The Go structural cases of `waferline eval-nes`, made from Go modules' sources as Debian packages them
(golang-github-*-dev: the module's .go files under /usr/share/gocode/src) with Go's own type checker
(benchmarks/nes_go_renames.go, go/types), independently of the tree-sitter code under test
(server/features/next_edit/lexical.py), and shipped as data (benchmarks/data/nes/structural-go.jsonl.gz):

    apt-get download PACKAGE=VERSION ...   (each package of benchmarks/nes_go_packages.txt, into DIR)
    python -m waferline.benchmarks.nes_cases_go --debs DIR [--out DIR]

`go` (the golang-go package) must be on PATH. Each case is the format of benchmarks/nes_structural.py's: a
parameter, a local or a method's receiver renamed at its declaration (the user's edit) and the whole file as
intended once every other identifier go/types resolves to that object is renamed too (categories
rename-parameter-go, rename-local-go, rename-receiver-go), and, to be silent, a parameter the function never uses
renamed (silent-unused-parameter-go). Each case records its language, package, version, licence (the file's own,
from the package's machine-readable debian/copyright) and file.
"""

from __future__ import annotations

import argparse
import fnmatch
import io
import json
import os
import random
import re
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from waferline.benchmarks.nes_cases import _write
from waferline.benchmarks.nes_cases_ts import choose, file_cases

HERE = Path(__file__).resolve().parent
SRC = "usr/share/gocode/src/"
MAX_FILE_CHARS = 20_000  # larger files make the shipped data large, not the cases harder
PERMISSIVE = {"MIT", "X11", "BSD-2-Clause", "BSD-3-Clause", "Apache-2.0", "ISC"}
# bsd-3-google: re2's debian/copyright names the BSD-3-Clause text so (read by hand, 2026-12-05)
SPDX = {"expat": "MIT", "mit": "MIT", "x11": "X11", "bsd-2-clause": "BSD-2-Clause", "bsd-3-clause": "BSD-3-Clause",
        "bsd-3-google": "BSD-3-Clause", "apache-2.0": "Apache-2.0", "isc": "ISC"}  # fmt: skip


def package_list(path: Path) -> list[tuple[str, str, str, str]]:
    """(Debian package, version, licence of its `Files: *`, module root under gocode/src) per line of the list."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version, licence, root = line.split()
            out.append((name, version, licence, root.rstrip("/")))
    return out


def deb_files(deb: Path) -> Iterator[tuple[str, bytes]]:
    """(path, bytes) of each regular file of a .deb's data archive (an `ar` archive holding data.tar.*)."""
    data = deb.read_bytes()
    if not data.startswith(b"!<arch>\n"):
        raise ValueError(f"{deb}: not a .deb")
    at = 8
    while at + 60 <= len(data):
        name, size = data[at : at + 16].decode().strip().rstrip("/"), int(data[at + 48 : at + 58].decode())
        body = data[at + 60 : at + 60 + size]
        if name.startswith("data.tar"):
            with tarfile.open(fileobj=io.BytesIO(body)) as tar:
                for member in tar.getmembers():
                    if member.isfile():
                        yield member.name.removeprefix("./"), tar.extractfile(member).read()  # type: ignore[union-attr]
            return
        at += 60 + size + size % 2
    raise ValueError(f"{deb}: no data.tar")


def licences(copyright_text: str) -> list[tuple[list[str], str]]:
    """(globs, SPDX licence) of each `Files:` paragraph of a machine-readable debian/copyright, in order; a choice
    of licences (`MIT or Apache-2.0`) is written `MIT OR Apache-2.0`."""
    out = []
    for paragraph in re.split(r"\n\s*\n", copyright_text):
        files = re.search(r"^Files:((?:.*\n?)(?:[ \t].*\n?)*)", paragraph, re.M)
        licence = re.search(r"^License:[ \t]*(\S.*?)[ \t]*$", paragraph, re.M)
        if files and licence:
            names = re.split(r"\s+or\s+", licence.group(1), flags=re.I)
            out.append((files.group(1).split(), " OR ".join(SPDX.get(n.lower(), n) for n in names)))
    return out


def permissive(licence: str | None) -> bool:
    """The licence, or one of a choice of licences, is one of PERMISSIVE."""
    return licence is not None and any(n in PERMISSIVE for n in licence.split(" OR "))


def licence_of(path: str, paragraphs: list[tuple[list[str], str]]) -> str | None:
    """The licence of `path` (relative to the upstream source): the last paragraph whose glob matches it."""
    found = None
    for globs, licence in paragraphs:
        if any(fnmatch.fnmatchcase(path, g) for g in globs):
            found = licence
    return found


def wanted(path: str, text: str) -> bool:
    """A source file of the cases: not a test, an example or test data; 500 to MAX_FILE_CHARS characters, LF."""
    parts = path.split("/")
    if not path.endswith(".go") or any(p.startswith(("_", ".")) or p == "testdata" for p in parts):
        return False
    return "test" not in path.lower() and 500 <= len(text) <= MAX_FILE_CHARS and "\r" not in text


def unpack(
    deb: Path, listed: str, root: str, gopath: Path
) -> tuple[list[tuple[str, Path, str]], list[Path], dict[str, int]]:
    """Unpacks every .go file of the package into GOPATH (for the type checker's imports); returns (path in the
    module, file, licence) of the case files, every file of the module that is not a test (each package is
    type-checked whole), and the files left out by licence. `listed`: the licence the list gives, which must be
    the `Files: *` paragraph's."""
    entries = dict(deb_files(deb))
    copyright_text = next((v.decode("utf-8") for k, v in entries.items() if k.endswith("/copyright")), "")
    paragraphs = licences(copyright_text)
    star = next((licence for globs, licence in paragraphs if globs == ["*"]), None)
    if star != listed:
        raise SystemExit(f"{deb}: `Files: *` is {star}, the list says {listed}")
    out: list[tuple[str, Path, str]] = []
    every: list[Path] = []
    refused: dict[str, int] = {}
    for name, data in sorted(entries.items()):
        if not name.startswith(SRC) or not name.endswith(".go"):
            continue
        target = gopath / "src" / name.removeprefix(SRC)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        inside = name.removeprefix(SRC)
        if not inside.startswith(root + "/"):
            continue
        path = inside.removeprefix(root + "/")
        if not path.endswith("_test.go"):
            every.append(target)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if not wanted(path, text):
            continue
        licence = licence_of(path, paragraphs)
        if licence is None or not permissive(licence):
            refused[str(licence)] = refused.get(str(licence), 0) + 1
            continue
        out.append((path, target, licence))
    return out, every, refused


def rename_candidates(files: list[Path], gopath: Path) -> dict[str, dict[str, Any]]:
    """nes_go_renames.go's answer per file (by its absolute path), its offsets in characters."""
    env = {**os.environ, "GOPATH": str(gopath), "GO111MODULE": "off", "GOFLAGS": "", "GOOS": "linux",
           "GOARCH": "amd64", "CGO_ENABLED": "0"}  # fmt: skip
    program = gopath / "nes_go_renames"
    subprocess.run(["go", "build", "-o", str(program), str(HERE / "nes_go_renames.go")], check=True, env=env,
                   cwd=gopath)  # fmt: skip
    done = subprocess.run([str(program), *map(str, files)], capture_output=True, text=True, env=env, cwd=gopath)
    if done.returncode != 0:
        raise RuntimeError(f"nes_go_renames failed ({done.returncode}): {done.stderr[-2000:]}")
    out = {}
    for line in done.stdout.splitlines():
        answer = json.loads(line)
        chars = char_offsets(Path(answer["file"]).read_bytes())
        for c in answer["candidates"]:
            c["start"], c["locations"] = chars[c["start"]], [chars[b] for b in c["locations"]]
        out[answer["file"]] = answer
    return out


def char_offsets(data: bytes) -> dict[int, int]:
    """The character offset of each character's first byte (go/token's offsets are bytes)."""
    out, at = {}, 0
    for i, ch in enumerate(data.decode("utf-8")):
        out[at] = i
        at += len(ch.encode("utf-8"))
    out[at] = len(out)
    return out


def go_cases(debs: Path, listing: Path, seed: int = 0, per_category: int = 40) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    found: dict[str, list[dict[str, Any]]] = {}
    skipped: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        gopath = Path(tmp)
        chosen, checked = [], []
        for name, version, licence, root in package_list(listing):
            deb = next(iter(sorted(debs.glob(f"{name}_{version.split(':')[-1]}_*.deb"))), None)
            if deb is None:
                raise SystemExit(f"no {name}_{version}_*.deb in {debs} (apt-get download {name}={version})")
            files, every, refused = unpack(deb, licence, root, gopath)
            checked.extend(every)
            for why, n in refused.items():
                skipped[f"files under {why}"] = skipped.get(f"files under {why}", 0) + n
            chosen.append((name, version, licence, files))
        answers = rename_candidates(checked, gopath)
        for name, version, _, files in chosen:
            for path, f, file_licence in files:
                answer = answers[str(f.resolve())]
                for why, n in answer["skipped"].items():
                    skipped[why] = skipped.get(why, 0) + n
                source = {"package": name, "version": version, "licence": file_licence, "file": path}
                for case in file_cases(f.read_text(encoding="utf-8"), answer["candidates"], "go", rng):
                    found.setdefault(case["category"], []).append({**case, "language": "go", "source": source})
    print(f"candidates left out: {skipped}")
    return choose(found, rng, per_category)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--debs", type=Path, required=True, help="folder of the .deb files `apt-get download` wrote")
    parser.add_argument("--list", type=Path, default=HERE / "nes_go_packages.txt", help="the packages and licences")
    parser.add_argument("--per-category", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=HERE / "data" / "nes")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    cases = go_cases(args.debs, args.list, args.seed, args.per_category)
    _write(args.out / "structural-go.jsonl.gz", cases)
    print(f"{len(cases)} Go structural cases -> {args.out / 'structural-go.jsonl.gz'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
