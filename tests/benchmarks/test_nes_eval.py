"""`waferline eval-nes`: the scoring (exact hunk, lines F1, silence, the baselines) on hand-made cases, the shipped
case files' shape, and a real replay of a few shipped cases through `waferline serve` (its figures are whatever
they are; the shape is checked, and that structural cases come out exact)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from waferline.benchmarks.nes_eval import DATA, intended, read_cases, repeat_baseline
from waferline.benchmarks.nes_score import lines_f1, model_figures
from waferline.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
SERVE_FIXED = [sys.executable, str(ROOT / "tests" / "support" / "serve_fixed.py"), "--text=x"]


def commit_case(nxt: dict | None) -> dict:
    before = "a = value\nb = value\nc = 1\n"
    return {"kind": "model", "category": "commit", "before": before, "source": {"file": "x.py"},
            "edits": [{"start": 4, "end": 9, "text": "amount"}], "next": nxt}  # fmt: skip


def test_lines_f1() -> None:
    before = "a\nb\nc\n"
    assert lines_f1(before, "a\nB\nc\n", "a\nB\nc\n") == 1.0
    assert lines_f1(before, before, "a\nB\nc\n") == 0.0
    assert lines_f1(before, "a\nB\nC\n", "a\nB\nc\n") == 2 * 2 / (4 + 2)


def test_repeat_baseline_and_the_figures() -> None:
    right = commit_case({"start": 15, "end": 20, "text": "amount"})
    wrong = commit_case({"start": 20, "end": 25, "text": "c = 2"})
    silent = {**commit_case(None), "category": "commit-silent"}
    assert repeat_baseline(right)[0] == intended(right) == "a = amount\nb = amount\nc = 1\n"
    answers = [{"suggested": [{"start": 15, "end": 20, "text": "amount", "kind": "structural"}], "latencies_ms": [1.0]},
               {"suggested": [], "latencies_ms": [2.0]},
               {"suggested": [], "latencies_ms": [3.0]}]  # fmt: skip
    f = model_figures([right, wrong, silent], answers)
    assert f["server"]["exact_next_hunk"] == 0.5 and f["server"]["silent_when_should"] == 1.0
    assert f["server"]["silent_when_should_not"] == 0.5
    assert f["baseline_no_edit"]["exact_next_hunk"] == 0.0 and f["baseline_no_edit"]["silent_when_should"] == 1.0
    assert f["baseline_repeat"]["exact_next_hunk"] == 0.5 and f["baseline_repeat"]["silent_when_should"] == 0.0


def test_shipped_cases_record_their_source_and_licence() -> None:
    cases = read_cases(DATA, ["structural", "structural-js", "structural-go", "model"])
    assert {c["kind"] for c in cases} == {"structural", "model"}
    for c in cases:
        assert c["source"]["licence"] and c["source"]["file"]
        assert intended(c) is not None and c["edits"]
    assert {c["category"] for c in cases if c["kind"] == "structural"} >= {
        "rename-parameter", "rename-local", "rename-attribute", "add-parameter", "silent-unused-parameter"
    }  # fmt: skip


def test_replay_through_the_server(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    records = tmp_path / "records.json"
    rc = main(["eval-nes", "--limit", "6", "--json", "--records", str(records),
               "--server-command", json.dumps(SERVE_FIXED)])  # fmt: skip
    assert rc == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["structural"]["all"]["cases"] == 6 and figures["model"]["cases"] == 6
    assert figures["structural"]["all"]["whole_file_exact"] == 1.0
    js = figures["structural-js"]
    assert js["all"]["cases"] == 6 and js["all"]["whole_file_exact"] == 1.0, "JS/TS opened in their language"
    assert js["all-javascript"]["cases"] + js["all-typescript"]["cases"] == 6
    go = figures["structural-go"]
    assert go["all"]["cases"] == 6 and go["all"]["whole_file_exact"] == 1.0, "Go opened as Go, reported apart"
    for kind in ("structural-rust", "structural-java", "structural-c", "structural-cpp"):
        f = figures[kind]["all"]
        assert f["cases"] == 6 and f["whole_file_exact"] == 1.0, f"{kind}: opened in its language, reported apart"
    assert figures["server"]["inlineEdit"]["requests"] >= 48
    assert len(json.loads(records.read_text())) == 48


def test_threshold_sweep_drops_model_edits_under_the_threshold_only() -> None:
    from waferline.benchmarks.nes_threshold import choose, sweep

    right = {**commit_case({"start": 15, "end": 20, "text": "amount"}), "id": "a"}
    wrong = {**commit_case({"start": 20, "end": 25, "text": "c = 2"}), "id": "b"}
    silent = {**commit_case(None), "category": "commit-silent", "id": "c"}
    answers = [
        {"id": "a", "suggested": [{"start": 15, "end": 20, "text": "amount", "kind": "model", "confidence": 0.9}]},
        {"id": "b", "suggested": [{"start": 15, "end": 20, "text": "x", "kind": "model", "confidence": 0.4}]},
        {"id": "c", "suggested": [{"start": 0, "end": 1, "text": "b", "kind": "structural"}]},
    ]
    low, high = sweep([right, wrong, silent], answers, (0.0, 0.5))
    assert (low["model_shown"], low["model_right"], low["exact_next_hunk"]) == (2, 1, 0.5)
    assert (high["model_shown"], high["model_right"], high["silent_when_should_not"]) == (1, 1, 0.5)
    assert high["silent_when_should"] == 0.0, "a structural edit is shown whatever the threshold"
    assert choose([low, high], 0.75) == 0.5 and choose([low, high], 0.5) == 0.0
