"""`waferline bench-load --fixed`: the benchmark's plumbing on a tiny run (no timing asserted)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from waferline.cli.main import main

FIELDS = (
    "offered_rps", "absorbed_rps", "answered_fraction", "nonempty", "nonempty_latency_ms_p50", "burst_last_answered",
    "burst_last_latency_ms_p50", "drain_s", "last_answered", "last_nonempty", "client_backlog_max_bytes",
    "rss_mb_start", "rss_mb_middle", "rss_mb_end", "rss_growth_mb", "server_cpu_s", "rss_mb_peak",
    "rss_mb_after_close", "rss_growth_from_open_mb",
)  # fmt: skip


def test_bench_load_reports_every_figure_and_every_request_answered(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "load.json"
    argv = ["bench-load", "--fixed", "--docs", "3", "--rate", "10", "--seconds", "1", "--burst", "4", "--pause", "0.2"]
    assert main([*argv, "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert set(FIELDS) <= set(report), set(FIELDS) - set(report)
    assert report["docs"] == 3 and report["requests"] == 30
    assert report["answered"] == 30 and report["answered_fraction"] == 1.0 and report["errors"] == 0
    assert report["last_answered"] == 3 and report["bursts"] == 9 and report["burst_last_answered"] == 9
    assert report["server_stats"]["requests"] == 30 + 3, "the keystrokes' requests and one warm-up per document"
    assert report["server_stats"]["keystrokes"] == 30
    assert "offered_rps" in capsys.readouterr().out


def test_bench_load_refuses_a_bad_rate(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench-load", "--fixed", "--rate", "0"]) == 2
    assert "--rate must be positive" in capsys.readouterr().err
