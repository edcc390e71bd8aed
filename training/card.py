"""Markdown tables for the model card, rendered from `waferline eval --json` output so figures are never retyped.

`python -m waferline.training.card eval.json` prints the tables; the model card pastes them in.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

WHO = {"model_psm": "waferline-mini, PSM", "model_spm": "waferline-mini, SPM",
       "model_spm_healed": "waferline-mini, SPM + token healing (what the server does)", "ngram": "4-gram baseline",
       "copy_line": "copy-line baseline"}  # fmt: skip


def render(r: dict[str, Any]) -> str:
    lines = [
        f"Held-out: {r['held_out_files']} files, {r['held_out_tokens']} tokens, {r['chars_per_token']:.2f} characters "
        f"per token; seed {r['seed']}.",
        "",
        "| held-out language modelling | perplexity (per token) | bits per character |",
        "|---|---|---|",
        f"| waferline-mini | {r['perplexity']['model']:.2f} | {r['bits_per_char']['model']:.3f} |",
        f"| {r['ngram_order']}-gram baseline (same tokens) | {r['perplexity']['ngram']:.2f} | "
        f"{r['bits_per_char']['ngram']:.3f} |",
        "",
        f"| single-line completion ({r['line']['cases']} cases) | exact match | edit similarity |",
        "|---|---|---|",
    ]
    for who, name in WHO.items():
        if who not in r["line"]:
            continue  # model_spm_healed: only with `waferline eval --heal`
        s = r["line"][who]
        lines.append(f"| {name} | {s['exact_match']:.1%} | {s['edit_sim']:.3f} |")
    lines += [
        "",
        f"| syntax-node FIM ({r['fim']['cases']} cases: block, expression, argument list) | exact match | "
        "edit similarity | filled file parses |",
        "|---|---|---|---|",
    ]
    for who, name in WHO.items():
        if who not in r["fim"]:
            continue
        s = r["fim"][who]
        lines.append(f"| {name} | {s['exact_match']:.1%} | {s['edit_sim']:.3f} | {s['parse_rate']:.1%} |")
    lines += [
        "",
        "| FIM by node kind (SPM) | cases | exact match | edit similarity | parses |",
        "|---|---|---|---|---|",
    ]
    for kind, s in r["fim"]["model_spm"]["by_kind"].items():
        lines.append(
            f"| {kind} | {s['cases']} | {s['exact_match']:.1%} | {s['edit_sim']:.3f} | {s['parse_rate']:.1%} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render(json.loads(Path(sys.argv[1]).read_text())))
