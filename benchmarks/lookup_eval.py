"""`waferline eval-lookup`: how often prompt lookup holds the right line, and which rule picks it best.

For line cases (training/editor_cases.py) it builds the server's plan and request (as `waferline serve` would, without
repository context), lets the local engine complete greedily, scores every candidate the server would send
(engine/candidates.py), and prints: cases with candidates, cases where one of them is exactly right (the oracle),
the model's own exact matches, and the exact matches of a sweep of selection rules (the first candidate whose mean
token log-probability reaches a threshold; the first within a margin of the greedy text's mean; the candidate whose
total beats the greedy text's). This is how MIN_MEAN_LOGPROB was chosen (docs/benchmarks-quality.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import Any

THRESHOLDS = (-1.0, -1.5, -2.0, -2.5, -3.0)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", help="model directory or preset (default: the shipped model)")
    parser.add_argument("--corpus", type=Path, default=Path("runs/corpus"), help="a corpus folder built by train")
    parser.add_argument("--splits", default="held_out_file", help="corpus splits to draw cases from")
    parser.add_argument("--cases", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")


def collect(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Per case: the expected text, the model's own line and log-probabilities, and every scored candidate."""
    from waferline.benchmarks.editor_eval import build_cases
    from waferline.engine.candidates import line_end_ids, score_candidates
    from waferline.engine.local import LocalEngine
    from waferline.server.features.engine_request import edit_request
    from waferline.server.options import Options
    from waferline.syntax.plan import plan_completion
    from waferline.syntax.postprocess import finish_completion
    from waferline.syntax.tree import SyntaxTree

    cases = build_cases(argparse.Namespace(kinds="line", corpus=args.corpus, splits=args.splits, cases=args.cases,
                                           seed=args.seed, humaneval=0))  # fmt: skip
    engine = LocalEngine.load(args.model)
    stops = (*engine.fim.stop_ids, *line_end_ids(engine.loaded.tokenizer))
    rows = []
    for i, c in enumerate(cases):
        plan = plan_completion(c.document, c.offset, "python", SyntaxTree("python", c.document),
                               max_context_chars=engine.context_chars(64))  # fmt: skip
        if not plan.complete:
            continue
        request, add_candidates = edit_request(f"case{i}", plan, Options())
        request = add_candidates(request) if add_candidates is not None else request
        own = engine.complete(dataclasses.replace(request, candidates=()), lambda: False)
        finished = finish_completion(c.document, c.offset, "python", own.text, plan)
        session = engine.pool.get(f"case{i}")
        ids = engine.prompt_ids(request, session.max_tokens - request.max_new_tokens)
        healing = engine.healer.heal(ids) if engine.healer is not None and request.prefix else None
        prompt = healing.prompt if healing is not None else ids
        scored = list(score_candidates(session, prompt, request.candidates, engine.loaded.tokenizer,
                                       stop_ids=stops, healing=healing))  # fmt: skip
        own_lps = [*own.token_logprobs, *([own.stop_logprob] if own.stop_logprob is not None else [])]
        rows.append({
            "expected": c.expected,
            "own": finished.insert_text.split("\n")[0].rstrip() if finished else "",
            "own_mean": sum(own_lps) / len(own_lps) if own_lps else 0.0,
            "own_total": sum(own_lps),
            "candidates": [{"text": s.text, "mean": s.mean, "total": sum(s.token_logprobs) + s.stop_logprob}
                           for s in scored],
        })  # fmt: skip
        engine.pool.drop(f"case{i}")
    return rows


def sweep(rows: list[dict[str, Any]]) -> dict[str, int]:
    """Exact matches of each selection rule (and of the model alone, and of an oracle)."""

    def right(text: str, row: dict[str, Any]) -> bool:
        return bool(text.strip()) and text == row["expected"]

    def count(pick: Any) -> int:
        return sum(right(c["text"] if (c := pick(r)) else r["own"], r) for r in rows)

    out = {"cases": len(rows), "with_candidates": sum(bool(r["candidates"]) for r in rows),
           "model_alone": sum(right(r["own"], r) for r in rows),
           "oracle": sum(any(right(c["text"], r) for c in r["candidates"]) for r in rows)}  # fmt: skip
    out["total_beats_greedy"] = count(
        lambda r: max(
            (c for c in r["candidates"] if c["total"] > r["own_total"]), key=lambda c: c["total"], default=None
        )
    )
    for t in THRESHOLDS:
        out[f"first_mean_at_least_{t}"] = count(
            lambda r, t=t: next((c for c in r["candidates"] if c["mean"] >= t), None)
        )
    for m in (0.5, 1.0, 1.5, 2.0):
        out[f"first_within_{m}_of_greedy_mean"] = count(
            lambda r, m=m: next((c for c in r["candidates"] if c["mean"] >= r["own_mean"] - m), None)
        )
    return out


def run(args: argparse.Namespace) -> int:
    if args.cases < 1:
        raise ValueError("--cases must be at least 1")
    figures = sweep(collect(args))
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        for name, value in figures.items():
            print(f"{name:36} {value}")
    return 0
