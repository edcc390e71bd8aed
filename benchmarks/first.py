"""`waferline bench-first [--json]`: the first inline completion on a freshly opened file, with the warm-up and
without it, in the same run.

For each case — a 1,000-line third-party Python file (from the interpreter's site-packages, or `--files`) with the
rest of one code line removed and the cursor there — a fresh document is opened in one `waferline serve` the way an
editor opens a file: `didOpen`, then `waferline/didFocus` with the cursor (what both editor clients send). After
`--open-s` seconds (1 s) the first `textDocument/inlineCompletion` at the cursor is timed in the client, request sent
-> answer received. Each case runs twice, once with the server's `warmUp` option on and once off (switched with
`workspace/didChangeConfiguration`, the order alternating from case to case), each time as a new document, so that
machine load and the cases weigh on both alike. Reported per mode: p50 and p95 of that latency over all cases and
over the cases the model was asked for (a cursor the plan does not complete at, inside a string say, is answered at
once either way), how many prompt tokens the first request prefilled (from `waferline/stats` before and after it),
and the server's warm-up counters; with the load average before and after. Precomputing is off unless `--option
precompute=true` (it would add its own prompts to the counters between cases).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sysconfig
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsprotocol import types

from waferline.cli.typing_session import TypingClient
from waferline.hardware.registry import describe_backends, describe_formats
from waferline.server.stats import percentile

LINES = 1000
MODES = ("warm", "cold")


@dataclass(frozen=True)
class Case:
    name: str  # the file and the line of the cursor
    text: str  # the file's first LINES lines, the rest of the cursor's line removed
    line: int
    character: int  # UTF-16 (the cursor's line is ASCII up to it or counted so)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", help="model directory or preset (default: the shipped model)")
    parser.add_argument("--backend", default="cpu", help=f"hardware backend: {describe_backends()} (default: cpu)")
    parser.add_argument("--dtype", default="auto", help=f"weights: {describe_formats()}")
    parser.add_argument("--files", type=Path, nargs="*", help="Python files of at least 1,000 lines (default: from "
                        "the interpreter's site-packages)")  # fmt: skip
    parser.add_argument("--num-files", type=int, default=6, help="files to take from site-packages (default 6)")
    parser.add_argument("--cursors", type=int, default=3, help="cursors per file (default 3)")
    parser.add_argument("--open-s", type=float, default=1.0, help="seconds the document is open before the request")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.add_argument("--option", action="append", default=[], metavar="NAME=JSON", help="a server option")
    parser.add_argument("--log-file", help="the server's log file")


def candidate_files(limit: int, seed: int) -> list[Path]:
    """Third-party modules of at least LINES lines in this interpreter's site-packages (not waferline's, no tests),
    `limit` of them chosen by `seed` from the sorted list."""
    root = Path(sysconfig.get_paths()["purelib"])
    found = []
    for path in sorted(root.glob("*/**/*.py")):
        parts = path.relative_to(root).parts
        if parts[0].startswith(("waferline", "_")) or any(p in ("tests", "test", "testing") for p in parts):
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if text.count("\n") >= LINES and text.isascii():
            found.append(path)
    if not found:
        raise OSError(f"no Python file of {LINES} lines or more in {root}: pass --files")
    return sorted(random.Random(seed).sample(found, min(limit, len(found))))


def make_cases(files: list[Path], cursors: int, seed: int) -> list[Case]:
    """Per file, `cursors` code lines past the first screen (not comments or strings, indented, 20+ characters), each
    cut at a random point past its first 4 characters: the text is the file's first LINES lines with the rest of that
    line removed."""
    rng = random.Random(seed)
    cases = []
    for path in files:
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)[:LINES]
        if len(lines) < LINES:
            raise ValueError(f"{path} has {len(lines)} lines; bench-first needs {LINES}")
        code = [i for i, ln in enumerate(lines) if i > 40 and _is_code(ln)]
        for i in sorted(rng.sample(code, min(cursors, len(code)))):
            line = lines[i].rstrip("\r\n")
            cut = rng.randint(len(line) - len(line.lstrip()) + 4, len(line) - 2)  # past the first few characters
            text = "".join(lines[:i]) + line[:cut] + "\n" + "".join(lines[i + 1 :])
            cases.append(Case(f"{path.name}:{i + 1}", text, i, len(line[:cut].encode("utf-16-le")) // 2))
    return cases


def _is_code(line: str) -> bool:
    stripped = line.strip()
    return (
        line.startswith((" ", "\t")) and len(stripped) >= 20 and " " in stripped and stripped.isascii()
        and not stripped.startswith(("#", '"', "'", "@"))
    )  # fmt: skip


async def measure(cases: list[Case], args: argparse.Namespace, options: dict[str, Any]) -> dict[str, Any]:
    client = TypingClient(model=args.model, backend=args.backend, log_file=args.log_file)
    await client.start(options)
    folder = Path(tempfile.mkdtemp(prefix="waferline-bench-first-"))
    results: dict[str, list[tuple[float, int]]] = {mode: [] for mode in MODES}
    try:
        await client.wait_for_engine()
        for n, case in enumerate(cases):
            for mode in MODES if n % 2 == 0 else MODES[::-1]:
                settings = {**options, "warmUp": mode == "warm"}
                client.client.workspace_did_change_configuration(
                    types.DidChangeConfigurationParams(settings={"waferline": settings})
                )
                results[mode].append(await one(client, folder / f"{n}-{mode}" / "module.py", case, args.open_s))
        server = await client.stats()
    finally:
        await client.stop()
    # Cases where the cold request reached the model (it prefilled something): a cursor the plan does not complete
    # at (inside a string, say) is answered at once either way.
    asked = [i for i, (_, prefilled) in enumerate(results["cold"]) if prefilled > 0]
    out: dict[str, Any] = {"model_cases": len(asked)}
    for mode, rows in results.items():
        out[mode] = summarize([rows[i] for i in range(len(rows))])
        out[f"{mode}_model_cases"] = summarize([rows[i] for i in asked])
    out["server"] = {k: server.get(k) for k in ("warmups", "warmups_cancelled", "warmup_tokens", "engine")}
    return out


async def one(client: TypingClient, path: Path, case: Case, open_s: float) -> tuple[float, int]:
    """Open `case` as a new document, focus it at its cursor, wait `open_s`, time the first request; close it.
    (latency ms, prompt tokens the request prefilled)."""
    uri = path.as_uri()
    item = types.TextDocumentItem(uri=uri, language_id="python", version=1, text=case.text)
    client.client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=item))
    position = types.Position(line=case.line, character=case.character)
    client.focus(position, uri)
    await asyncio.sleep(open_s)
    before = (await client.stats())["prefilled_tokens_total"]
    params = types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        position=position,
        context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Automatic),
    )
    t0 = time.perf_counter()
    await client.client.text_document_inline_completion_async(params)
    ms = (time.perf_counter() - t0) * 1000.0
    prefilled = (await client.stats())["prefilled_tokens_total"] - before
    client.client.text_document_did_close(
        types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    await asyncio.sleep(0.1)  # the session's drop runs before the next case opens
    return ms, prefilled


def summarize(rows: list[tuple[float, int]]) -> dict[str, Any]:
    latencies = [ms for ms, _ in rows]
    return {
        "p50_ms": _round(percentile(latencies, 50)),
        "p95_ms": _round(percentile(latencies, 95)),
        "mean_ms": _round(sum(latencies) / len(latencies)) if latencies else None,
        "prefilled_tokens_mean": round(sum(p for _, p in rows) / len(rows), 1) if rows else None,
    }


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 1)


def run(args: argparse.Namespace) -> int:
    from waferline.benchmarks.editor_eval import server_options

    if args.open_s < 0 or args.cursors < 1 or args.num_files < 1:
        raise ValueError("--open-s must be >= 0, --cursors and --num-files >= 1")
    for path in args.files or []:
        if not path.is_file():
            raise OSError(f"--files {path}: no such file")
    files = args.files or candidate_files(args.num_files, args.seed)
    cases = make_cases(files, args.cursors, args.seed)
    options = {"dtype": args.dtype, "precompute": False, **server_options(args.option)}
    load_before = os.getloadavg()
    result = asyncio.run(measure(cases, args, options))
    summary = {
        "cases": len(cases),
        "files": [str(f) for f in files],
        "open_s": args.open_s,
        **result,
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
    }
    if args.json:
        print(json.dumps(summary))
    else:
        print_table(summary)
    return 0


def print_table(summary: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"waferline bench-first: {summary['cases']} cases, open {summary['open_s']} s before asking")
    for column in ("figure", *MODES):
        table.add_column(column)
    for key in ("p50_ms", "p95_ms", "mean_ms", "prefilled_tokens_mean"):
        table.add_row(key, *(str(summary[mode][key]) for mode in MODES))
    for key in ("p50_ms", "p95_ms"):
        table.add_row(f"{key} ({summary['model_cases']} cases the model answered)",
                      *(str(summary[f"{mode}_model_cases"][key]) for mode in MODES))  # fmt: skip
    Console().print(table)
    Console().print(f"server: {summary['server']}; load average {summary['loadavg_before']} -> "
                    f"{summary['loadavg_after']}")  # fmt: skip
