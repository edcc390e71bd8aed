"""The JavaScript and TypeScript structural cases of `waferline eval-nes`, made from npm packages' sources with the
TypeScript compiler's language service (benchmarks/nes_ts_renames.js), independently of the tree-sitter code under
test (server/features/next_edit/lexical.py), and shipped as data (benchmarks/data/nes/structural-js.jsonl.gz):

    npm pack NAME@VERSION ...   (each package of benchmarks/nes_packages.txt, into DIR)
    python -m waferline.benchmarks.nes_cases_ts --packages DIR --typescript NODE_MODULES [--out DIR]

`--typescript` is a node_modules folder holding the npm package `typescript`. Each case is the format of
benchmarks/nes_structural.py's: a parameter or a local of a function renamed at its declaration (the user's edit)
and the whole file as intended once every other location `findRenameLocations` gives is renamed too (categories
rename-parameter-js, rename-local-js and their -ts twins), and, to be silent, a parameter the function never uses
renamed (silent-unused-parameter-js, -ts). Each case records its language, package, version, licence and file.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from waferline.benchmarks.nes_cases import _write
from waferline.benchmarks.nes_structural import _case

HERE = Path(__file__).resolve().parent
LANGUAGES = {".js": ("javascript", "js"), ".cjs": ("javascript", "js"), ".ts": ("typescript", "ts")}
PER_FILE = 2  # cases of each category from one file
MAX_FILE_CHARS = 20_000  # larger files make the shipped data large, not the cases harder
SUFFIXES = ("Value", "Item", "Arg", "New", "Obj", "Data")


def package_list(path: Path) -> list[tuple[str, str, str, list[str]]]:
    """(package, version, licence, the paths read) per line of benchmarks/nes_packages.txt."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version, licence, *paths = line.split()
            out.append((name, version, licence, paths))
    return out


def source_files(tarball: Path, paths: list[str], into: Path) -> list[tuple[str, Path]]:
    """(path in the package, extracted file) of each source file of `tarball` under one of `paths`."""
    out = []
    with tarfile.open(tarball) as tar:
        for member in sorted(tar.getmembers(), key=lambda m: m.name):
            name = member.name.removeprefix("package/")
            if not member.isfile() or Path(name).suffix not in LANGUAGES or name.endswith((".d.ts", ".min.js")):
                continue
            if not any(name == p or (p.endswith("/") and name.startswith(p)) for p in paths):
                continue
            if "test" in name.lower() or "/locales/" in name:
                continue
            text = tar.extractfile(member).read().decode("utf-8", "replace")  # type: ignore[union-attr]
            if 500 <= len(text) <= MAX_FILE_CHARS and "\r" not in text:
                target = into / tarball.stem / name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8")
                out.append((name, target))
    return out


def _new_name(text: str, old: str, rng: random.Random) -> str | None:
    for candidate in (old + s for s in rng.sample(SUFFIXES, len(SUFFIXES))):
        if re.search(rf"(?<![\w$]){re.escape(candidate)}(?![\w$])", text) is None:
            return candidate
    return None


def file_cases(text: str, candidates: list[dict[str, Any]], suffix: str, rng: random.Random) -> list[dict[str, Any]]:
    """The cases of one file from the rename candidates nes_ts_renames.js found in it, at most PER_FILE a category."""
    out: list[dict[str, Any]] = []
    per_category: dict[str, int] = {}
    for c in candidates:
        name, start, others = c["name"], c["start"], c["locations"]
        if c["kind"] == "parameter":
            category = "rename-parameter" if others else "silent-unused-parameter"
        elif others:
            category = f"rename-{c['kind']}"  # a local (or Go's receiver)
        else:
            continue  # a local (a receiver) never read: its rename is not a case of these kinds
        category = f"{category}-{suffix}"
        new = _new_name(text, name, rng)
        if new is None or per_category.get(category, 0) >= PER_FILE:
            continue
        target = text
        for at in sorted([start, *others], reverse=True):
            if target[at : at + len(name)] != name:
                break
            target = target[:at] + new + target[at + len(name) :]
        else:
            per_category[category] = per_category.get(category, 0) + 1
            out.append(_case(category, text, start, start + len(name), new, target))
    return out


def rename_candidates(files: list[Path], typescript: Path) -> dict[str, dict[str, Any]]:
    """nes_ts_renames.js's answer per file (by its absolute path)."""
    cmd = ["node", str(HERE / "nes_ts_renames.js"), *map(str, files)]
    env = {**os.environ, "NODE_PATH": str(typescript)}
    done = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    return {line["file"]: line for line in lines}


def ts_cases(packages: Path, typescript: Path, listing: Path, seed: int = 0, per_category: int = 40) -> list[Any]:
    rng = random.Random(seed)
    found: dict[str, list[dict[str, Any]]] = {}
    skipped: dict[str, int] = {"comment mentions left alone (counted, not skipped)": 0}
    with tempfile.TemporaryDirectory() as tmp:
        for name, version, licence, paths in package_list(listing):
            tarball = packages / f"{name}-{version}.tgz"
            if not tarball.is_file():
                raise SystemExit(f"no {tarball} (npm pack {name}@{version})")
            files = source_files(tarball, paths, Path(tmp))
            answers = rename_candidates([f for _, f in files], typescript)
            for path, f in files:
                answer = answers[str(f.resolve())]
                skipped["comment mentions left alone (counted, not skipped)"] += answer["comments_left"]
                for why, n in answer["skipped"].items():
                    skipped[why] = skipped.get(why, 0) + n
                language, suffix = LANGUAGES[f.suffix]
                source = {"package": name, "version": version, "licence": licence, "file": path}
                for case in file_cases(f.read_text(encoding="utf-8"), answer["candidates"], suffix, rng):
                    found.setdefault(case["category"], []).append({**case, "language": language, "source": source})
    print(f"candidates left out: {skipped}")
    return choose(found, rng, per_category)


def choose(found: dict[str, list[dict[str, Any]]], rng: random.Random, per_category: int) -> list[dict[str, Any]]:
    """At most `per_category` cases of each category, drawn at random, in order of category, package, file, edit."""
    out = []
    for category in sorted(found):
        chosen = rng.sample(found[category], min(per_category, len(found[category])))
        print(f"  {category}: {len(chosen)} of {len(found[category])}")
        out.extend(sorted(chosen, key=lambda c: (c["source"]["package"], c["source"]["file"], c["edits"][0]["start"])))
    for i, case in enumerate(out):
        case["id"] = f"{case['category']}-{i:03d}"
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--packages", type=Path, required=True, help="folder of the tarballs `npm pack` wrote")
    parser.add_argument("--typescript", type=Path, required=True, help="node_modules folder holding `typescript`")
    parser.add_argument("--list", type=Path, default=HERE / "nes_packages.txt", help="the packages and licences")
    parser.add_argument("--per-category", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=HERE / "data" / "nes")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    cases = ts_cases(args.packages, args.typescript.resolve(), args.list, args.seed, args.per_category)
    _write(args.out / "structural-js.jsonl.gz", cases)
    print(f"{len(cases)} JS/TS structural cases -> {args.out / 'structural-js.jsonl.gz'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
