"""The cases of `waferline eval-nes`, generated once from real code and shipped as data (benchmarks/data/nes/), so
the evaluation and its tests need no network.

    python -m waferline.benchmarks.nes_cases --wheels DIR [--git DIR --git-licence NAME --git-name NAME] --out DIR
    python -m waferline.benchmarks.nes_cases --git-root DIR [--repos benchmarks/nes_repos.txt] --out DIR

Structural cases (`structural.jsonl`) come from the Python files of the evaluation-only distributions
(training/eval-pins.txt: never trained on), as wheels in `--wheels`; each distribution's licence is read from its
metadata (training/licences.py) and only permissive ones are kept. Each case is one edit a user makes and the whole
file as intended once the edits that follow it are made, computed with Python's own `ast` and `symtable`
(independently of the tree-sitter code under test): rename a parameter, a local, an attribute of `self`; add a
parameter (the callers pass their own variable of that name); remove an unused parameter (the callers drop its
argument); and, to be silent, rename a parameter the function never uses.

Commit cases (`commits.jsonl`) replay real commits of a git repository (`--git`, a permissively licensed one): a
commit that changes one Python file is split into its hunks in order; after the first k are made, the next one is
the target, and after all of them the right answer is silence. With `--git-root` the commits come from every
repository of `--repos` (benchmarks/nes_repos.txt: the evaluation-only distributions, each with its licence), at most
`--commits-per-repo` cases of each, every case recording its repository, commit, licence and part of the evaluation
(training/eval-parts.txt: `choose` or `kept-aside`); `--wheels` may then be left out (no structural cases written).
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


def repo_list(path: Path) -> list[tuple[str, str, str]]:
    """(owner/name, distribution, licence) per line of a repository list (benchmarks/nes_repos.txt)."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, dist, licence = line.split(None, 2)
            out.append((name, dist, licence))
    return out


def repo_cases(git_root: Path, repos: Path, per_repo: int, seed: int) -> list[dict[str, Any]]:
    from waferline.benchmarks.nes_commits import commit_cases
    from waferline.training.eval_corpus import read_parts

    parts = read_parts()
    out: list[dict[str, Any]] = []
    for name, dist, licence in repo_list(repos):
        git_dir = git_root / name.replace("/", "+") / "repo"
        if not git_dir.is_dir():
            raise SystemExit(f"no git directory {git_dir} for {name}")
        if dist not in parts:
            raise SystemExit(f"{dist} is in no part of training/eval-parts.txt")
        cases = commit_cases(git_dir, name, licence, per_repo, seed)
        for case in cases:
            case["id"] = f"{dist}-{case['id']}"
            case["source"]["part"] = parts[dist]
        print(f"  {name}: {len(cases)} commit cases ({parts[dist]})")
        out.extend(cases)
    return out


def main(argv: list[str] | None = None) -> int:
    from waferline.benchmarks.nes_commits import commit_cases

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wheels", type=Path, help="folder of the evaluation distributions' wheels (structural)")
    parser.add_argument("--git", type=Path, help="a git directory whose commits become the model cases")
    parser.add_argument("--git-name", default="", help="the repository's name, recorded with each case")
    parser.add_argument("--git-licence", default="", help="its licence (permissive only), recorded with each case")
    parser.add_argument("--git-root", type=Path, help="folder of bare git dirs, owner+name/repo, for --repos")
    parser.add_argument(
        "--repos",
        type=Path,
        default=Path(__file__).parent / "nes_repos.txt",
        help="the repositories (and licences) of --git-root (default: benchmarks/nes_repos.txt)",
    )
    parser.add_argument("--commits-per-repo", type=int, default=80, help="commit cases of one repository at most")
    parser.add_argument("--per-category", type=int, default=40)
    parser.add_argument("--commits", type=int, default=120, help="commit cases at most (--git)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "data" / "nes")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.wheels is not None:
        structural = structural_cases(args.wheels, args.seed, args.per_category)
        _write(args.out / "structural.jsonl.gz", structural)
        print(f"{len(structural)} structural cases -> {args.out / 'structural.jsonl.gz'}")
    commits: list[dict[str, Any]] | None = None
    if args.git_root is not None:
        commits = repo_cases(args.git_root, args.repos, args.commits_per_repo, args.seed)
    elif args.git is not None:
        if not args.git_licence:
            raise SystemExit("--git-licence is required with --git (permissive licences only)")
        commits = commit_cases(args.git, args.git_name, args.git_licence, args.commits, args.seed)
    if commits is not None:
        _write(args.out / "commits.jsonl.gz", commits)
        print(f"{len(commits)} commit cases -> {args.out / 'commits.jsonl.gz'}")
    elif args.wheels is None:
        raise SystemExit("nothing to write: give --wheels, --git or --git-root")
    return 0


def _write(path: Path, cases: list[dict[str, Any]]) -> None:
    with gzip.open(path, "wt", encoding="utf-8") as out:
        for case in cases:
            out.write(json.dumps(case, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
