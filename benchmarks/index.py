"""`waferline bench-index [PATH]`: how long indexing a folder takes, cold and warm, and what a lookup costs.

Each phase runs in its own process so that its peak memory is its own: "cold" indexes into an empty cache folder,
"warm" opens the same cache again (as a restarted server would) and brings it up to date, then times lookups
(definitions, references, hover's describe_symbol, search) on definitions sampled across the index. PATH defaults
to the Python standard library's source tree (site-packages excluded). Figures go to stdout; --json for machines.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from waferline.server.repository.index import WorkspaceIndex

SAMPLE_NAMES = 40
PHASE_ENV = "WAFERLINE_BENCH_INDEX_PHASE"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", nargs="?", help="folder to index (default: the Python standard library)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.add_argument("--cache-dir", help="cache folder to use (default: a temporary folder, removed after)")
    parser.add_argument("--workers", type=int, default=None, help="parsing processes (default: automatic)")


def stdlib_path() -> Path:
    import sysconfig

    return Path(sysconfig.get_paths()["stdlib"])


def run(args: argparse.Namespace) -> int:
    root = Path(args.path or stdlib_path()).expanduser()
    if not root.is_dir():
        raise ValueError(f"{root}: not a folder")
    with tempfile.TemporaryDirectory(prefix="waferline-bench-index-") as tmp:
        cache_dir = Path(args.cache_dir) if args.cache_dir else Path(tmp)
        from waferline.server.repository.index import cache_path

        db = cache_path(cache_dir, root)
        for suffix in ("", "-wal", "-shm"):  # cold means cold: no index of this folder left from an earlier run
            Path(f"{db}{suffix}").unlink(missing_ok=True)
        results: dict[str, Any] = {"path": str(root.resolve()), "cpus": os.cpu_count(), "load_before": os.getloadavg()}
        for phase in ("cold", "warm"):
            results[phase] = _run_phase(phase, root, cache_dir, args.workers)
        results["load_after"] = os.getloadavg()
        results["db_mb"] = round(sum(p.stat().st_size for p in db.parent.iterdir()) / 1e6, 1)
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        _print_table(results)
    return 0


def _run_phase(phase: str, root: Path, cache_dir: Path, workers: int | None) -> dict:
    spec = json.dumps({"phase": phase, "root": str(root), "cache_dir": str(cache_dir), "workers": workers})
    done = subprocess.run(
        [sys.executable, "-m", "waferline.benchmarks.index"],
        env={**os.environ, PHASE_ENV: spec},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise OSError(f"bench-index {phase} phase failed: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout)


def phase_main(spec: dict) -> dict:
    """One phase, in a fresh process: build, then (warm only) time lookups."""
    import resource
    import time

    from waferline.server.repository.index import IndexOptions, WorkspaceIndex

    started, cpu_started = time.perf_counter(), time.process_time()
    index = WorkspaceIndex(Path(spec["root"]), Path(spec["cache_dir"]), options=IndexOptions(workers=spec["workers"]))
    report = index.build()
    seconds = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = {
        "seconds": round(seconds, 3),
        "cpu_seconds": round(time.process_time() - cpu_started + children.ru_utime + children.ru_stime, 3),
        "main_cpu_seconds": round(time.process_time() - cpu_started, 3),
        "files": report.files,
        "parsed": report.parsed,
        "reused": report.reused,
        "source": report.source,
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "worker_peak_rss_mb": round(children.ru_maxrss / 1024, 1),
        "counts": index.store.counts(),
    }
    if spec["phase"] == "warm":
        out["lookups_ms"] = _time_lookups(index)
    index.close()
    return out


def _hover(index: WorkspaceIndex, name: str) -> str:
    from waferline.server.repository.lookup import describe_symbol, render_hover_markdown

    info = describe_symbol(index, name, None)
    return "" if info is None else render_hover_markdown(info, index.root)


def _time_lookups(index: WorkspaceIndex) -> dict:
    import statistics
    import time

    from waferline.server.repository.terms import identifier_terms

    lookups: dict[str, Callable[[str], object]] = {
        "definitions": index.definitions,
        "references": index.references,
        "hover": lambda name: _hover(index, name),
        "search": lambda name: index.search(" ".join(identifier_terms(name)), 10),
    }
    timings: dict[str, list[float]] = {key: [] for key in lookups}
    for name in index.store.sample_definition_names(SAMPLE_NAMES):
        for key, lookup in lookups.items():
            t = time.perf_counter()
            lookup(name)
            timings[key].append((time.perf_counter() - t) * 1000)
    return {
        key: {"median": round(statistics.median(v), 2), "max": round(max(v), 2), "n": len(v)}
        for key, v in timings.items()
        if v
    }


def _print_table(r: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"bench-index {r['path']}  ({r['cpus']} CPUs, load {r['load_before'][0]:.1f})")
    for column in ("phase", "files", "parsed", "wall s", "cpu s", "peak RSS MB", "children's peak MB"):
        table.add_column(column, justify="right")
    for phase in ("cold", "warm"):
        p = r[phase]
        row = (
            phase,
            p["files"],
            p["parsed"],
            p["seconds"],
            p["cpu_seconds"],
            p["peak_rss_mb"],
            p["worker_peak_rss_mb"],
        )
        table.add_row(*(str(x) for x in row))
    console = Console()
    console.print(table)
    counts = r["warm"]["counts"]
    console.print(f"index: {counts['defs']} definitions, {counts['refs']} references, {counts['docs']} search "
                  f"documents, {r['db_mb']} MB on disk")  # fmt: skip
    for key, v in r["warm"].get("lookups_ms", {}).items():
        console.print(f"{key:>12}: median {v['median']} ms, max {v['max']} ms over {v['n']} names")


if __name__ == "__main__":
    print(json.dumps(phase_main(json.loads(os.environ[PHASE_ENV]))))
