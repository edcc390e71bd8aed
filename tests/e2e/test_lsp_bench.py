"""`waferline bench-lsp` and `waferline demo` run a short typing session end to end (the tiny preset, a few keys)."""

from __future__ import annotations

import json
import subprocess
import sys

WAFERLINE = [sys.executable, "-m", "waferline.cli"]
KEYS = {
    "keystrokes", "requests", "answered", "cancelled", "cache_answers", "latency_ms_p50", "latency_ms_p95",
    "latency_ms_p99", "prompt_tokens_total", "prefilled_tokens_total", "decode_tok_s", "phase_ms_p50",
}  # fmt: skip


def test_bench_lsp_json_reports_every_figure() -> None:
    cmd = [*WAFERLINE, "bench-lsp", "--model", "tiny", "--keys", "12", "--cps", "40", "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert figures.keys() >= KEYS, KEYS - figures.keys()
    assert figures["keystrokes"] == 12 and figures["requests"] == 12
    assert figures["prompt_tokens_total"] > 0 and "tiny" in figures["engine"]


def test_demo_renders_and_prints_the_statistics() -> None:
    done = subprocess.run(
        [*WAFERLINE, "demo", "--model", "tiny", "--keys", "8", "--cps", "40"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "latency" in done.stdout and "keystrokes" in done.stdout and "colorsys.py" in done.stdout


def test_bench_lsp_bad_arguments_are_one_line() -> None:
    done = subprocess.run([*WAFERLINE, "bench-lsp", "--keys", "0"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--keys must be at least 1" in done.stderr and "Traceback" not in done.stderr
