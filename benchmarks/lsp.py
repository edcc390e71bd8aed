"""`waferline bench-lsp [--json]`: a developer's typing session through LSP, measured from the editor's side.

It starts `waferline serve` as an editor would, opens a real source file, types a few functions key by key at a
human pace (one didChange + one inline completion request per key, as VS Code does), accepts suggestions that
match what comes next, and reports what the session cost: latency per request (keystroke sent -> response
received), how many requests were answered, cancelled or served from the typed-through cache, and how much of the
prompts the KV cache served. The same session, rendered, is `waferline demo`.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from waferline.server.stats import percentile
from waferline.server.typing_session import add_session_arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_session_arguments(parser)
    parser.add_argument("--no-accept", action="store_true", help="never accept a suggestion: type every character")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")


def summarize(session: Any) -> dict[str, Any]:
    """The figures of one typing session under stable keys (bench-lsp's JSON, docs/benchmarks.md's table)."""
    answered = [r for r in session.requests if r.latency_ms is not None]
    lat = [r.latency_ms for r in answered]
    shown = [r.latency_ms for r in answered if r.suggestion]
    st = session.server_stats
    prompt, prefilled = st.get("prompt_tokens_total", 0), st.get("prefilled_tokens_total", 0)
    out: dict[str, Any] = {
        "engine": st.get("engine"),
        "keystrokes": session.keystrokes,
        "requests": len(session.requests),
        "answered": sum(1 for r in answered if r.suggestion),
        "empty": sum(1 for r in answered if not r.suggestion and not r.error),
        "errors": sum(1 for r in answered if r.error),
        "cancelled": st.get("cancelled"),
        "cache_answers": st.get("cache_answers"),
        "accepted": session.accepted,
        "accepted_chars": session.accepted_chars,
        "precomputed": st.get("precomputed"),
        "first_request_ms": _round(session.first_request_ms),
        "prompt_tokens_total": prompt,
        "prefilled_tokens_total": prefilled,
        "kv_reuse": round(1 - prefilled / prompt, 4) if prompt else None,
        "new_tokens_total": st.get("new_tokens_total"),
        "decode_tok_s": st.get("decode_tok_s"),
        "wall_s": round(session.wall_s, 2),
        "phase_ms_p50": st.get("phase_ms_p50"),  # in the server, per model answer: where the milliseconds go
    }
    for q in (50, 95, 99):
        out[f"latency_ms_p{q}"] = _round(percentile(lat, q))
    for q in (50, 95):
        out[f"shown_latency_ms_p{q}"] = _round(percentile(shown, q))  # requests that brought a suggestion
    return out


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 1)


def print_table(summary: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="waferline bench-lsp: one typing session through LSP", show_header=False)
    for key, value in summary.items():
        table.add_row(key, "—" if value is None else str(value))
    Console().print(table)


def run(args: argparse.Namespace) -> int:
    import asyncio

    from waferline.server.typing_session import SCRIPT, check_session_args, type_script

    check_session_args(args)
    session = asyncio.run(
        type_script(
            model=args.model, backend=args.backend, source=args.file, chars_per_s=args.cps, script=SCRIPT[: args.keys],
            accept=not args.no_accept, log_file=args.log_file, options={"dtype": args.dtype},
        )
    )  # fmt: skip
    summary = summarize(session)
    if args.json:
        print(json.dumps(summary))
    else:
        print_table(summary)
    return 0
