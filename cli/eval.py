"""`waferline eval --model DIR [--json]`: held-out perplexity, line and syntax-node FIM completion, vs baselines."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default=None, help="model directory or shipped name (default: waferline-mini)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    parser.add_argument("--max-files", type=int, default=None, help="use only the first N held-out files")
    parser.add_argument("--line-cases", type=int, default=100, help="single-line completion cases")
    parser.add_argument("--fim-cases", type=int, default=99, help="syntax-node FIM cases (block, expression, args)")
    parser.add_argument("--ngram-files", type=int, default=None, help="training files the n-gram counts (all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--corpus", type=Path, default=None, help="a folder of .py files instead of the stdlib")
    parser.add_argument("--heal", action="store_true", help="also score SPM with token healing (model_spm_healed)")
    parser.add_argument("--examples", type=int, default=0, help="also show N sample predictions per task")


def run(args: argparse.Namespace) -> int:
    import json
    import logging
    import sys

    import torch

    from waferline.engine.checkpoint import resolve_model
    from waferline.training.evaluate import EvalConfig, evaluate

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    torch.set_num_threads(2)
    for name in ("max_files", "line_cases", "fim_cases", "ngram_files"):
        value = getattr(args, name)
        if value is not None and value < 0:
            raise ValueError(f"--{name.replace('_', '-')} must not be negative, got {value}")
    cfg = EvalConfig(
        model=resolve_model(args.model), seed=args.seed, line_cases=args.line_cases, fim_cases=args.fim_cases,
        max_files=args.max_files, ngram_files=args.ngram_files, corpus_root=args.corpus, heal=args.heal,
    )  # fmt: skip
    result = evaluate(cfg, examples=args.examples)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_tables(result)
    return 0


def print_tables(r: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(
        f"[bold]{r['model']}[/bold]: {r['params'] / 1e6:.2f}M parameters, {r['held_out_files']} held-out files, "
        f"{r['held_out_tokens']} tokens, {r['chars_per_token']:.2f} chars/token, seed {r['seed']}"
    )
    t = Table(title="held-out language modelling")
    for col in ("", "perplexity", "bits/char"):
        t.add_column(col)
    for who in ("model", "ngram"):
        t.add_row(who, f"{r['perplexity'][who]:.2f}", f"{r['bits_per_char'][who]:.3f}")
    console.print(t)
    for task, title in (("line", "single-line completion"), ("fim", "syntax-node fill-in-the-middle")):
        t = Table(title=f"{title} ({r[task]['cases']} cases)")
        cols = ["", "exact match", "edit sim"] + (["parses"] if task == "fim" else [])
        for col in cols:
            t.add_column(col)
        for who in ("model_psm", "model_spm", "ngram", "copy_line"):
            s = r[task][who]
            row = [who, f"{s['exact_match']:.1%}", f"{s['edit_sim']:.3f}"]
            if task == "fim":
                row.append(f"{s['parse_rate']:.1%}")
            t.add_row(*row)
        console.print(t)
    for ex in r.get("examples", []):
        console.print(f"[dim]{ex['path']} ({ex['kind']})[/dim] …{ex['prefix_tail']!r}")
        console.print(f"  target     {ex['target']!r}\n  prediction {ex['prediction']!r}")
    console.print(f"decode {r['decode_tok_s']:.0f} tok/s, {r['seconds']:.0f} s in all")


if __name__ == "__main__":
    import sys

    _parser = argparse.ArgumentParser(prog="waferline eval")
    add_arguments(_parser)
    sys.exit(run(_parser.parse_args()))
