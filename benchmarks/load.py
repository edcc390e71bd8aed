"""`waferline bench-load`: many documents typed at once, from a client that never waits; does the server keep up?

    waferline bench-load [--docs 50] [--rate 10] [--seconds 60] [--fixed] [--json PATH]

It starts `waferline serve` over stdio (the shipped model by default; `--fixed` the protocol tests' engine double,
tests/support/serve_fixed.py, which writes a fixed text at no model cost), with a temporary workspace folder holding
copies of N real Python modules of the interpreter's standard library. Each document gets a region of its own text
cut out at a line in its middle, and that region is typed back at R keys/s per document for T seconds, all documents
at once: each key is an incremental didChange followed by a textDocument/inlineCompletion request, as editors send
them, written without waiting for any answer (an editor does not wait either). Every `--burst` keys a document pauses
`--pause` seconds (default: no pauses, the whole session is one burst per document). Before typing, each document
gets one request, awaited, as an editor asks when the cursor lands in a file (`--no-warmup` skips it), so the
figures are those of typing, not of the first prefill of 50 prompts; `--large-mb M` first opens, completes in and
closes an M MB document three times and reports the RSS each way.

It reports: the offered rate (requests written per second) and the absorbed rate (requests answered per second
while typing went on), the answered fraction, the non-empty answers and their latency (request written -> answer
read), the answers to the last keystroke of each burst (answered, non-empty, latency from that keystroke), the
backlog drain time (the last keystroke written -> the last answer read), whether every document's last request was
answered, the largest client-side write backlog (bytes the server had not read yet), the server's RSS (VmRSS of
/proc/PID/status) with the documents open before the warm-up, at the start of typing, in the middle, at its peak
(sampled every 0.25 s while typing and draining), at the end (the backlog drained), and 2 s after every document is
closed, the growth over the run (end - start) and since the documents were opened (end - before the warm-up), and its
CPU time. It asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from waferline.benchmarks.editor_eval import server_options
from waferline.benchmarks.load_client import Client, Sent, proc_figures
from waferline.server.stats import percentile

SERVE_FIXED = Path(__file__).resolve().parents[1] / "tests" / "support" / "serve_fixed.py"
FIXED_TEXT = " = None"  # what the engine double writes: a suggestion the finishing rules keep in many places


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--docs", type=int, default=50, help="documents typed into at once (default 50)")
    parser.add_argument("--rate", type=float, default=10.0, help="keys per second per document (default 10)")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long to type (default 60)")
    parser.add_argument("--burst", type=int, default=0, help="keys per burst before a pause (default 0: no pauses)")
    parser.add_argument("--pause", type=float, default=1.0, help="seconds of each pause between bursts (default 1)")
    parser.add_argument("--drain-timeout", type=float, default=300.0, help="seconds to wait for the backlog")
    parser.add_argument("--no-warmup", action="store_true", help="type at once, without one request per document first")
    parser.add_argument("--fixed", action="store_true", help="the engine double instead of the model (no model cost)")
    parser.add_argument("--fixed-text", default=FIXED_TEXT, help="what the engine double writes")
    parser.add_argument("--model", help="model directory or preset (default: the shipped model)")
    parser.add_argument("--dtype", default="auto", help="weights of the model (default auto)")
    parser.add_argument("--log-file", help="the server's log file")
    parser.add_argument(
        "--option", action="append", default=[], metavar="NAME=JSON", help="a server option (repeatable)"
    )
    parser.add_argument(
        "--large-mb", type=float, default=0.0, help="first open, complete in and close a document of this size, 3 times"
    )
    parser.add_argument("--json", metavar="PATH", help="also write the report to this file as JSON")
    parser.add_argument("--profile", metavar="PATH", help="run the server under cProfile (its event loop) into PATH")
    parser.add_argument(
        "--python-wrapper", metavar="SCRIPT", help="start the server as `python SCRIPT <the server's script or -m>`"
    )


def source_files(n: int) -> list[Path]:
    """N real modules of the standard library, 4-40 KB each, in a fixed order (the same files run after run)."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    found = sorted(p for p in stdlib.glob("*.py") if 4_000 <= p.stat().st_size <= 40_000)
    if not found:
        raise OSError(f"no Python modules of 4-40 KB in {stdlib}")
    return [found[i % len(found)] for i in range(n)]


@dataclass
class Doc:
    uri: str
    text: str  # what the server holds
    script: str  # what is typed back, in order
    cursor: int
    version: int = 1
    typed: int = 0
    line: int = 0  # the cursor's position, UTF-16 (the sources are ASCII-heavy; see position())
    character: int = 0


def make_doc(path: Path, work: Path, index: int, keys: int) -> Doc:
    """A copy of `path` in the workspace with `keys` characters (whole lines, repeated if the file is short) cut at a
    line in its middle: typing them back restores real code the model can complete."""
    text = path.read_text(encoding="utf-8", errors="replace")
    lines = text.splitlines(keepends=True)
    start = len(lines) // 2
    cut = sum(len(x) for x in lines[:start])
    region = "".join(lines[start:]) or text
    script = (region * (keys // max(1, len(region)) + 1))[:keys]
    kept = text[:cut] + text[cut + len(region) :]
    copy = work / f"{index:03d}_{path.name}"
    copy.write_text(kept, encoding="utf-8")
    doc = Doc(copy.as_uri(), kept, script, cut)
    doc.line, doc.character = position(kept, cut)
    return doc


def position(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset)
    start = text.rfind("\n", 0, offset) + 1
    return line, len(text[start:offset].encode("utf-16-le")) // 2


def server_command(args: argparse.Namespace) -> list[str]:
    python = [sys.executable, *(["-m", "cProfile", "-o", args.profile] if args.profile else [])]
    python += [args.python_wrapper] if args.python_wrapper else []
    if args.fixed:
        if not SERVE_FIXED.is_file():
            raise OSError(f"--fixed needs the engine double {SERVE_FIXED} (a source checkout)")
        cmd = [*python, str(SERVE_FIXED), "--text", args.fixed_text]
    else:
        cmd = [*python, "-m", "waferline.cli", "serve", "--dtype", args.dtype]
        if args.model:
            cmd += ["--model", args.model]
    return cmd + (["--log-file", args.log_file, "-v"] if args.log_file else [])


async def wait_for_engine(client: Client, timeout_s: float = 300.0) -> str:
    deadline = time.monotonic() + timeout_s
    while True:
        engine = str((await client.request("waferline/stats", {}) or {}).get("engine"))
        if engine.startswith("failed"):
            raise OSError(f"the server could not load its model: {engine}")
        if engine != "no engine loaded":
            return engine
        if time.monotonic() > deadline:
            raise OSError(f"the server did not load its model in {timeout_s:.0f} s: {client.stderr_tail[-3:]}")
        await asyncio.sleep(0.05)


def keystroke(client: Client, doc: Doc, index: int, last_of_burst: bool) -> None:
    """One key of `doc`'s script: its didChange, then an inline completion request at the new cursor."""
    ch = doc.script[doc.typed]
    doc.typed += 1
    doc.version += 1
    at = {"line": doc.line, "character": doc.character}
    client.notify(
        "textDocument/didChange",
        {
            "textDocument": {"uri": doc.uri, "version": doc.version},
            "contentChanges": [{"range": {"start": at, "end": at}, "text": ch}],
        },
    )
    if ch == "\n":
        doc.line, doc.character = doc.line + 1, 0
    else:
        doc.character += len(ch.encode("utf-16-le")) // 2
    params = {
        "textDocument": {"uri": doc.uri},
        "position": {"line": doc.line, "character": doc.character},
        "context": {"triggerKind": 2},  # Automatic
    }
    client.request("textDocument/inlineCompletion", params, Sent(index, time.perf_counter(), last_of_burst))


async def type_all(client: Client, docs: list[Doc], args: argparse.Namespace, pid: int) -> dict[str, Any]:
    """Every document's keys at `rate` for `seconds`, interleaved evenly; the figures of the run."""
    keys = int(args.rate * args.seconds)
    burst = args.burst if args.burst > 0 else keys
    step = 1.0 / args.rate
    # Key k of document d is due at t0 + d/(N*rate) + k/rate, plus a pause after every burst.
    schedule = sorted(
        (d * step / len(docs) + k * step + (k // burst) * args.pause, d, k)
        for d in range(len(docs))
        for k in range(keys)
    )
    start = proc_figures(pid)
    sampler = RssSampler(pid)
    sampling = asyncio.create_task(sampler.run())
    t0 = time.perf_counter()
    middle: dict[str, float] = {}
    for due, d, k in schedule:
        if not middle and due >= schedule[-1][0] / 2:
            middle = proc_figures(pid)
        if (wait := t0 + due - time.perf_counter()) > 0:
            await asyncio.sleep(wait)
        keystroke(client, docs[d], d, last_of_burst=(k + 1) % burst == 0 or k + 1 == keys)
    typed_s = time.perf_counter() - t0
    stopped = time.perf_counter()
    backlog_at_stop = client.proc.stdin.transport.get_write_buffer_size() if client.proc.stdin else 0
    answered_while_typing = sum(1 for s in client.sent.values() if s.answered_at is not None)
    pending = [f for i, f in client.replies.items() if i in client.sent]
    if pending:
        await asyncio.wait(pending, timeout=args.drain_timeout)
    end = proc_figures(pid)
    sampling.cancel()
    sent = list(client.sent.values())
    answered = [s for s in sent if s.answered_at is not None]
    nonempty = [s for s in answered if s.nonempty]
    bursts = [s for s in sent if s.last_of_burst]
    last = {s.doc: s for s in sent}  # each document's last request
    drain = max((s.answered_at or stopped for s in answered), default=stopped) - stopped
    return {
        "docs": len(docs),
        "rate_per_doc": args.rate,
        "seconds": args.seconds,
        "requests": len(sent),
        "offered_rps": round(len(sent) / typed_s, 1),
        "absorbed_rps": round(answered_while_typing / typed_s, 1),
        "answered": len(answered),
        "answered_fraction": round(len(answered) / len(sent), 4) if sent else None,
        "errors": sum(1 for s in answered if s.error),
        "nonempty": len(nonempty),
        **_latencies("nonempty_latency_ms", nonempty),
        "bursts": len(bursts),
        "burst_last_answered": sum(1 for s in bursts if s.answered_at is not None),
        "burst_last_nonempty": sum(1 for s in bursts if s.nonempty),
        **_latencies("burst_last_latency_ms", [s for s in bursts if s.answered_at is not None]),
        "drain_s": round(max(0.0, drain), 3) if len(answered) == len(sent) else None,
        "last_answered": sum(1 for s in last.values() if s.answered_at is not None),
        "last_nonempty": sum(1 for s in last.values() if s.nonempty),
        "client_backlog_max_bytes": client.backlog_max,
        "client_backlog_at_stop_bytes": backlog_at_stop,
        "rss_mb_start": _mb(start.get("vmrss")),
        "rss_mb_middle": _mb(middle.get("vmrss")),
        "rss_mb_end": _mb(end.get("vmrss")),
        "rss_mb_peak": _mb(max(sampler.peak, end.get("vmrss", 0.0)) or None),  # sampled every 0.25 s of the run
        "rss_mb_peak_process": _mb(end.get("vmhwm")),  # the process's high-water mark since it started (model load)
        "rss_growth_mb": _mb(end["vmrss"] - start["vmrss"]) if "vmrss" in end and "vmrss" in start else None,
        "server_cpu_s": round(end["cpu_s"] - start["cpu_s"], 2) if "cpu_s" in end and "cpu_s" in start else None,
        "wall_s": round(time.perf_counter() - t0, 2),
    }


class RssSampler:
    """The server's largest VmRSS while typing and draining, read every `interval_s` (VmHWM is the process's peak
    since it started, model load and warm-up included)."""

    def __init__(self, pid: int, interval_s: float = 0.25) -> None:
        self.pid, self.interval_s, self.peak = pid, interval_s, 0.0

    async def run(self) -> None:
        while True:
            self.peak = max(self.peak, proc_figures(self.pid).get("vmrss", 0.0))
            await asyncio.sleep(self.interval_s)


async def close_all(client: Client, docs: list[Doc], pid: int) -> dict[str, Any]:
    """Close every document, then the server's RSS 2 s later: what the run leaves once its documents are gone (the
    documents' KV sessions, trees, caches and index timers are dropped on close; docs/reliability.md)."""
    for doc in docs:
        client.notify("textDocument/didClose", {"textDocument": {"uri": doc.uri}})
    await asyncio.wait_for(client.request("waferline/stats", {}), 120)  # every close was handled
    await asyncio.sleep(2.0)
    return {"rss_mb_after_close": _mb(proc_figures(pid).get("vmrss"))}


async def warm_up(client: Client, docs: list[Doc]) -> float:
    """One request per document at its cursor, awaited, as an editor asks when the cursor lands in a file: each
    document's prompt is in its KV session before typing starts (the seconds it took)."""
    t0 = time.perf_counter()
    asks = []
    for doc in docs:
        params = {
            "textDocument": {"uri": doc.uri},
            "position": {"line": doc.line, "character": doc.character},
            "context": {"triggerKind": 1},  # Invoked
        }
        asks.append(client.request("textDocument/inlineCompletion", params))
    await asyncio.wait_for(asyncio.gather(*asks), 600)
    return round(time.perf_counter() - t0, 2)


async def open_and_close_large(client: Client, work: Path, mb: float, pid: int) -> dict[str, Any]:
    """Open a large document (the stdlib sources repeated), ask one completion at its end, close it; three times.
    The server's RSS before, with each open, and 2 s after each close: what a closed document leaves behind."""
    unit = "".join(p.read_text(encoding="utf-8", errors="replace") for p in source_files(5))
    text = (unit * (int(mb * 1e6) // len(unit) + 1))[: int(mb * 1e6)]
    text = text[: text.rfind("\n") + 1]
    uri = (work / "large.py").as_uri()
    before = proc_figures(pid).get("vmrss")
    opened, closed = [], []
    for _ in range(3):
        item = {"uri": uri, "languageId": "python", "version": 1, "text": text}
        client.notify("textDocument/didOpen", {"textDocument": item})
        at = {"line": text.count("\n"), "character": 0}
        params = {"textDocument": {"uri": uri}, "position": at, "context": {"triggerKind": 1}}
        await asyncio.wait_for(client.request("textDocument/inlineCompletion", params), 120)
        opened.append(_mb(proc_figures(pid).get("vmrss")))
        client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
        await asyncio.wait_for(client.request("waferline/stats", {}), 60)  # the close was handled
        await asyncio.sleep(2.0)
        closed.append(_mb(proc_figures(pid).get("vmrss")))
    return {"large_mb": mb, "large_rss_mb_before": _mb(before), "large_rss_mb_open": opened,
            "large_rss_mb_closed": closed}  # fmt: skip


def _latencies(name: str, sent: list[Sent]) -> dict[str, float | None]:
    ms = [((s.answered_at or s.at) - s.at) * 1000.0 for s in sent]
    return {f"{name}_p{q}": _round(percentile(ms, q)) for q in (50, 95, 99)}


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 1)


def _mb(x: float | None) -> float | None:
    return None if x is None else round(x, 1)


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="waferline-load-"))
    work = tmp / "workspace"  # the editor's buffers, copies of the sources, and the one workspace folder
    work.mkdir()
    keys = int(args.rate * args.seconds)
    docs = [make_doc(p, work, i, keys) for i, p in enumerate(source_files(args.docs))]
    proc = await asyncio.create_subprocess_exec(
        *server_command(args), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, limit=1 << 24,
    )  # fmt: skip
    client = Client(proc)
    tasks = [asyncio.create_task(client.read()), asyncio.create_task(client.drain_stderr())]
    try:
        caps: dict[str, Any] = {"textDocument": {"inlineCompletion": {}, "synchronization": {}}}
        folder = {"uri": work.as_uri(), "name": "load"}
        options = {"waferline": {"indexCacheDir": str(tmp / "index"), **({} if args.fixed else {"dtype": args.dtype})}}
        options["waferline"].update(server_options(args.option))
        init = {"processId": None, "rootUri": work.as_uri(), "workspaceFolders": [folder], "capabilities": caps}
        await asyncio.wait_for(client.request("initialize", {**init, "initializationOptions": options}), 60)
        client.notify("initialized", {})
        for doc in docs:
            item = {"uri": doc.uri, "languageId": "python", "version": 1, "text": doc.text}
            client.notify("textDocument/didOpen", {"textDocument": item})
        engine = await wait_for_engine(client)
        await asyncio.sleep(1.0)  # the workspace index of the copies is built meanwhile
        report: dict[str, Any] = {"engine": engine}
        if args.large_mb > 0:
            report.update(await open_and_close_large(client, work, args.large_mb, proc.pid))
        report["rss_mb_before_warmup"] = _mb(proc_figures(proc.pid).get("vmrss"))
        if not args.no_warmup:
            report["warmup_s"] = await warm_up(client, docs)
        report.update(await type_all(client, docs, args, proc.pid))
        stats = await asyncio.wait_for(client.request("waferline/stats", {}), args.drain_timeout)
        report["server_stats"] = {k: v for k, v in (stats or {}).items() if not isinstance(v, dict | list)}
        report.update(await close_all(client, docs, proc.pid))
        if report.get("rss_mb_before_warmup") is not None and report.get("rss_mb_end") is not None:
            report["rss_growth_from_open_mb"] = _mb(report["rss_mb_end"] - report["rss_mb_before_warmup"])
        await asyncio.wait_for(client.request("shutdown", None), 30)
        client.notify("exit", None)
        await asyncio.wait_for(proc.wait(), 30)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        for task in tasks:
            task.cancel()
        shutil.rmtree(tmp, ignore_errors=True)
    return report


def print_table(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="waferline bench-load: documents typed at once by a client that never waits", show_header=False)
    for key, value in report.items():
        if key != "server_stats":
            table.add_row(key, "—" if value is None else str(value))
    for key, value in report.get("server_stats", {}).items():
        table.add_row(f"server: {key}", "—" if value is None else str(value))
    Console().print(table)


def run(args: argparse.Namespace) -> int:
    for flag in ("docs", "rate", "seconds"):
        if getattr(args, flag) <= 0:
            raise ValueError(f"--{flag} must be positive, got {getattr(args, flag)}")
    if args.burst < 0 or args.pause < 0:
        raise ValueError("--burst and --pause must not be negative")
    report = asyncio.run(bench(args))
    print_table(report)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return 0
