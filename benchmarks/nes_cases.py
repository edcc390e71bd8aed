"""The cases of `waferline eval-nes`, generated once from real code and shipped as data (benchmarks/data/nes/), so
the evaluation and its tests need no network.

    python -m waferline.benchmarks.nes_cases --wheels DIR [--git DIR --git-licence NAME --git-name NAME] --out DIR

Structural cases (`structural.jsonl`) come from the Python files of the evaluation-only distributions
(training/eval-pins.txt: never trained on), as wheels in `--wheels`; each distribution's licence is read from its
metadata (training/licences.py) and only permissive ones are kept. Each case is one edit a user makes and the whole
file as intended once the edits that follow it are made, computed with Python's own `ast` and `symtable`
(independently of the tree-sitter code under test): rename a parameter, a local, an attribute of `self`; add a
parameter (the callers pass their own variable of that name); remove an unused parameter (the callers drop its
argument); and, to be silent, rename a parameter the function never uses.

Commit cases (`commits.jsonl`) replay real commits of a git repository (`--git`, a permissively licensed one): a
commit that changes one Python file is split into its hunks in order; after the first k are made, the next one is
the target, and after all of them the right answer is silence.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import zipfile
from collections.abc import Iterator
from email.parser import Parser
from pathlib import Path
from typing import Any

from waferline.benchmarks.nes_structural import GENERATORS, File
from waferline.training.licences import licence_of

PER_FILE = 2  # cases of each category from one file, so one large file does not make a category
MAX_FILE_CHARS = 20_000  # larger files make the shipped data large, not the cases harder


def wheel_files(wheel: Path) -> Iterator[tuple[dict[str, str], str, str]]:
    """(source, path, text) of each Python file of a wheel whose distribution is permissively licensed."""
    with zipfile.ZipFile(wheel) as z:
        meta_name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        meta = Parser().parsestr(z.read(meta_name).decode("utf-8", "replace"))
        licence, _ = licence_of(meta)
        if licence is None:
            return
        source = {"distribution": str(meta["Name"]), "version": str(meta["Version"]), "licence": licence}
        for name in sorted(z.namelist()):
            if name.endswith(".py") and "/tests/" not in name and not name.startswith("tests/"):
                text = z.read(name).decode("utf-8", "replace")
                if 500 <= len(text) <= MAX_FILE_CHARS and "\r" not in text and "\t" not in text:
                    yield source, name, text


def structural_cases(wheels: Path, seed: int = 0, per_category: int = 40) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    found: dict[str, list[dict[str, Any]]] = {}
    for wheel in sorted(wheels.glob("*.whl")):
        for source, path, text in wheel_files(wheel):
            try:
                f = File(text)
            except (SyntaxError, ValueError):
                continue
            for generate in GENERATORS:
                per_file: dict[str, int] = {}
                for case in generate(f, rng):
                    if per_file.get(case["category"], 0) >= PER_FILE:
                        continue
                    per_file[case["category"]] = per_file.get(case["category"], 0) + 1
                    found.setdefault(case["category"], []).append({**case, "source": {**source, "file": path}})
    out = []
    for category in sorted(found):
        chosen = rng.sample(found[category], min(per_category, len(found[category])))
        out.extend(sorted(chosen, key=lambda c: (c["source"]["distribution"], c["source"]["file"])))
    for i, case in enumerate(out):
        case["id"] = f"{case['category']}-{i:03d}"
    return out


def main(argv: list[str] | None = None) -> int:
    from waferline.benchmarks.nes_commits import commit_cases

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wheels", type=Path, required=True, help="folder of the evaluation distributions' wheels")
    parser.add_argument("--git", type=Path, help="a git directory whose commits become the model cases")
    parser.add_argument("--git-name", default="", help="the repository's name, recorded with each case")
    parser.add_argument("--git-licence", default="", help="its licence (permissive only), recorded with each case")
    parser.add_argument("--per-category", type=int, default=40)
    parser.add_argument("--commits", type=int, default=120, help="commit cases at most")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "data" / "nes")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    structural = structural_cases(args.wheels, args.seed, args.per_category)
    _write(args.out / "structural.jsonl.gz", structural)
    print(f"{len(structural)} structural cases -> {args.out / 'structural.jsonl.gz'}")
    if args.git is not None:
        if not args.git_licence:
            raise SystemExit("--git-licence is required with --git (permissive licences only)")
        commits = commit_cases(args.git, args.git_name, args.git_licence, args.commits, args.seed)
        _write(args.out / "commits.jsonl.gz", commits)
        print(f"{len(commits)} commit cases -> {args.out / 'commits.jsonl.gz'}")
    return 0


def _write(path: Path, cases: list[dict[str, Any]]) -> None:
    with gzip.open(path, "wt", encoding="utf-8") as out:
        for case in cases:
            out.write(json.dumps(case, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
