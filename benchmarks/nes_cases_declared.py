"""The Rust, Java, C and C++ structural cases of `waferline eval-nes`, made from real code as Debian packages it,
with each language's own compiler deciding the intended file, independently of the tree-sitter code under test
(server/features/next_edit/lexical_declared.py, lexical_rust.py, lexical_java_c.py, lexical_cpp.py), and shipped as
data (benchmarks/data/nes/structural-rust.jsonl.gz, structural-java.jsonl.gz, structural-c.jsonl.gz,
structural-cpp.jsonl.gz):

    apt-get download PACKAGE=VERSION          (each `rust` line of benchmarks/nes_declared_packages.txt)
    apt-get source --download-only PACKAGE=VERSION   (each `java`, `c`, `cpp` line: a `deb-src` line must be listed)
    python -m waferline.benchmarks.nes_cases_declared --debs DIR [--languages rust,java,c,cpp] [--out DIR]

Rust: the crate sources librust-*-dev packages ship (/usr/share/cargo/registry/CRATE-VERSION), resolved by rustc
(benchmarks/nes_rust_renames.py: `rustc` on PATH, any recent toolchain). Java: the upstream sources of Debian's
source packages, attributed by javac (benchmarks/nes_java_cases.java: `java` of a JDK 17 or later on PATH). C and
C++ (`.cpp`, `.cc`): the same, analysed by clang (benchmarks/nes_c_renames.py: the PyPI package `libclang`, the
`nes-cases` extra). Each case is the format of benchmarks/nes_structural.py's: a parameter or a local renamed at its
declaration (the user's edit) and the whole file as intended once every other location the compiler resolves to that
variable is renamed too (categories rename-parameter-LANG, rename-local-LANG), and, to be silent, a parameter the
function never uses renamed (silent-unused-parameter-LANG); and a parameter added to a function whose every caller
has a parameter of that name and type, the calls passing it (add-parameter-LANG: benchmarks/nes_rust_signatures.py,
nes_java_cases.java, nes_c_signatures.py). Each case records its language, package, version, licence (the file's
own, from the package's machine-readable debian/copyright: the paragraph that matches it) and file.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import tarfile
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

from waferline.benchmarks.nes_cases import _write
from waferline.benchmarks.nes_cases_go import deb_files, licence_of, licences, permissive
from waferline.benchmarks.nes_cases_ts import choose, file_cases
from waferline.benchmarks.nes_structural import _case

HERE = Path(__file__).resolve().parent
LANGUAGES = ("rust", "java", "c", "cpp")
SUFFIX = {"rust": (".rs",), "java": (".java",), "c": (".c",), "cpp": (".cpp", ".cc")}
MAX_FILE_CHARS = 20_000  # larger files make the shipped data large, not the cases harder
REGISTRY = "usr/share/cargo/registry/"


def package_list(path: Path) -> list[tuple[str, str, str, str, str, list[str]]]:
    """(language, package, version, licence of its `Files: *` (`A/B`: a choice), folder read, include folders)
    per line of the list."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            language, name, version, licence, root, *includes = line.split()
            out.append((language, name, version, licence.replace("/", " OR "), root.rstrip("/"), includes))
    return out


def wanted(path: str, text: str, language: str) -> bool:
    """A source file of the cases: not a test (nor in re2's `testing` folder), a benchmark or an example; 500 to
    MAX_FILE_CHARS characters, LF."""
    parts = path.lower().split("/")
    if not path.endswith(SUFFIX[language]) or any(p in ("tests", "test", "testing", "benches", "examples")
                                                   for p in parts):  # fmt: skip
        return False
    return "test" not in parts[-1] and 500 <= len(text) <= MAX_FILE_CHARS and "\r" not in text and "\t" not in text


def unpack_deb(deb: Path, into: Path) -> tuple[Path, str]:
    """A librust-*-dev package's crate, written under `into`: (the crate's folder, its debian/copyright)."""
    copyright_text, root = "", None
    for name, data in deb_files(deb):
        if name.startswith("usr/share/doc/") and name.endswith("/copyright"):
            copyright_text = data.decode("utf-8")
        elif name.startswith(REGISTRY):
            target = into / name.removeprefix(REGISTRY)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            root = into / name.removeprefix(REGISTRY).split("/")[0]
    if root is None:
        raise SystemExit(f"{deb}: no crate under /{REGISTRY}")
    return root, copyright_text


def unpack_source(folder: Path, name: str, version: str, into: Path) -> tuple[Path, str]:
    """A Debian source package's upstream tree (its .orig tarball), written under `into`, and its debian/copyright."""
    upstream = version.split(":")[-1].rsplit("-", 1)[0]
    orig = next(iter(sorted(folder.glob(f"{name}_{upstream}.orig.tar.*"))), None)
    debian = next(iter(sorted(folder.glob(f"{name}_{version.split(':')[-1]}.debian.tar.*"))), None)
    if orig is None or debian is None:
        raise SystemExit(f"no {name}_{upstream}.orig.tar.* or its .debian.tar.* in {folder} (apt-get source "
                         f"--download-only {name}={version})")  # fmt: skip
    with tarfile.open(debian) as tar:
        member = tar.extractfile("debian/copyright")
        copyright_text = member.read().decode("utf-8") if member is not None else ""
    target = into / name
    with tarfile.open(orig) as tar:
        tar.extractall(target, filter="data")
    tops = [p for p in target.iterdir() if p.is_dir()]
    return (tops[0] if len(tops) == 1 else target), copyright_text


def answers(language: str, root: Path, folder: str, files: list[Path], includes: list[Path]) -> dict[str, Any]:
    """Each file's rename candidates (by its absolute path), by the language's compiler (`folder`: the sources of
    the package, below `root`)."""
    if language == "rust":
        from waferline.benchmarks.nes_rust_renames import hir_tree, renames

        return renames(hir_tree(root / "src" / "lib.rs", _edition(root)), files)
    if language == "java":
        return {f: {"file": f, **line["renames"]} for f, line in java_cases(root, folder).items()}
    from waferline.benchmarks.nes_c_renames import renames as c_renames

    return {str(f): c_renames(f, includes, language) for f in files}


@cache
def java_cases(root: Path, folder: str) -> dict[str, dict[str, Any]]:
    """benchmarks/nes_java_cases.java's answer per file of the package's tree (one compilation; asked once for
    the renames and the added parameters)."""
    every = sorted(str(p) for p in (root / folder).rglob("*.java"))
    done = subprocess.run(["java", str(HERE / "nes_java_cases.java"), *every], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"nes_java_cases failed ({done.returncode}): {done.stderr[-2000:]}")
    print(f"    javac: {done.stderr.strip().splitlines()[-1]}")
    return {a["file"]: a for a in map(json.loads, done.stdout.splitlines())}


def _edition(crate: Path) -> str:
    edition = re.search(r'^edition\s*=\s*"(\d+)"', (crate / "Cargo.toml").read_text(encoding="utf-8"), re.M)
    return edition.group(1) if edition else "2015"


def added_parameters(language: str, root: Path, folder: str, files: list[Path], includes: list[Path]) -> dict[str, Any]:
    """Each file's add-parameter candidates (by its absolute path), by the language's compiler."""
    if language == "rust":
        from waferline.benchmarks.nes_rust_signatures import additions as rust_additions
        from waferline.benchmarks.nes_rust_signatures import crate_copy, type_checks

        with tempfile.TemporaryDirectory() as tmp:
            copy = crate_copy(root, Path(tmp))
            if not type_checks(copy, _edition(root)):
                return {str(f): {"skipped": {"the crate does not type-check": 1}, "candidates": []} for f in files}
            return {str(f): dict(zip(("candidates", "skipped"), rust_additions(
                f, copy, str(f.relative_to(root)), _edition(root)), strict=True)) for f in files}  # fmt: skip
    if language in ("c", "cpp"):
        from waferline.benchmarks.nes_c_signatures import additions

        return {str(f): dict(zip(("candidates", "skipped"), additions(f, includes, language), strict=True))
                for f in files}  # fmt: skip
    if language == "java":
        return {f: line["added"] for f, line in java_cases(root, folder).items()}
    return {}


def added_parameter_cases(text: str, found: list[dict[str, Any]], language: str) -> list[dict[str, Any]]:
    """The add-parameter-LANG cases of one file (benchmarks/nes_structural.py's format): the user types `text` at
    `at`, the intended file also passes `variable` after each call's last argument (`calls`)."""
    out = []
    for a in found[:2]:  # at most 2 of a file, as the renames
        target = text
        for at in sorted([*a["calls"], a["at"]], reverse=True):
            target = target[:at] + (a["text"] if at == a["at"] else ", " + a["variable"]) + target[at:]
        out.append(_case(f"add-parameter-{language}", text, a["at"], a["at"], a["text"], target))
    return out


def declared_cases(
    debs: Path, listing: Path, languages: tuple[str, ...], seed: int = 0, per_category: int = 40
) -> dict[str, list[dict[str, Any]]]:
    """Each language's chosen cases."""
    rng = random.Random(seed)
    found: dict[str, dict[str, list[dict[str, Any]]]] = {language: {} for language in languages}
    skipped: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for language, name, version, listed, folder, includes in package_list(listing):
            if language not in languages:
                continue
            if language == "rust":
                deb = next(iter(sorted(debs.glob(f"{name}_{version.split(':')[-1]}_*.deb"))), None)
                if deb is None:
                    raise SystemExit(f"no {name}_{version}_*.deb in {debs} (apt-get download {name}={version})")
                root, copyright_text = unpack_deb(deb, Path(tmp) / name)
            else:
                root, copyright_text = unpack_source(debs, name, version, Path(tmp))
            paragraphs = licences(copyright_text)
            star = next((licence for globs, licence in paragraphs if globs == ["*"]), None)
            if star != listed:
                raise SystemExit(f"{name}: `Files: *` is {star}, the list says {listed}")
            chosen = []
            for f in sorted(f for suffix in SUFFIX[language] for f in (root / folder).rglob(f"*{suffix}")):
                path = str(f.relative_to(root))
                text = f.read_text(encoding="utf-8", errors="replace")
                licence = licence_of(path, paragraphs)
                if wanted(path, text, language) and not permissive(licence):
                    skipped[f"files under {licence}"] = skipped.get(f"files under {licence}", 0) + 1
                elif wanted(path, text, language):
                    chosen.append((path, f.resolve(), str(licence)))
            paths, folders = [f for _, f, _ in chosen], [root / i for i in includes]
            found_here = answers(language, root.resolve(), folder, paths, folders)
            signatures = added_parameters(language, root.resolve(), folder, paths, folders)
            n = 0
            for path, f, licence in chosen:
                answer = found_here[str(f)]
                for why, k in answer["skipped"].items():
                    skipped[why] = skipped.get(why, 0) + k
                source = {"package": name, "version": version, "licence": licence, "file": path}
                text = f.read_text(encoding="utf-8")
                cases = file_cases(text, answer["candidates"], language, rng)
                added = signatures.get(str(f), {"skipped": {}, "candidates": []})
                cases.extend(added_parameter_cases(text, added["candidates"], language))
                for why, k in added["skipped"].items():
                    skipped[f"add-parameter: {why}"] = skipped.get(f"add-parameter: {why}", 0) + k
                for case in cases:
                    found[language].setdefault(case["category"], []).append(
                        {**case, "language": language, "source": source}
                    )
                    n += 1
            print(f"  {language} {name}: {len(chosen)} files, {n} cases")
    print(f"candidates left out: {skipped}")
    return {language: choose(found[language], rng, per_category) for language in languages}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--debs", type=Path, required=True, help="folder of the .deb and source files apt-get wrote")
    parser.add_argument("--list", type=Path, default=HERE / "nes_declared_packages.txt", help="packages, licences")
    parser.add_argument("--languages", default=",".join(LANGUAGES), help="comma-separated: rust, java, c, cpp")
    parser.add_argument("--per-category", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=HERE / "data" / "nes")
    args = parser.parse_args(argv)
    languages = tuple(lang for lang in args.languages.split(",") if lang)
    if not languages or set(languages) - set(LANGUAGES):
        raise SystemExit(f"--languages: choose from {', '.join(LANGUAGES)}")
    args.out.mkdir(parents=True, exist_ok=True)
    for language, cases in declared_cases(args.debs, args.list, languages, args.seed, args.per_category).items():
        _write(args.out / f"structural-{language}.jsonl.gz", cases)
        print(f"{len(cases)} {language} structural cases -> {args.out / f'structural-{language}.jsonl.gz'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
