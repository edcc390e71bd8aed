"""`python -m waferline.benchmarks.resident`: the resident-memory benchmark's plumbing on the shipped model exported
as GGUF (no figure asserted beyond its being a measurement), and its errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from waferline.benchmarks.resident import main
from waferline.engine.checkpoint import DEFAULT_MODEL_DIR
from waferline.engine.gguf.write import export_gguf


@pytest.mark.parametrize("warm", [False, True])
def test_the_report_measures_a_load_in_a_fresh_process(tmp_path: Path, warm: bool) -> None:
    model = export_gguf(DEFAULT_MODEL_DIR, tmp_path / "m.gguf", "f16")
    run = subprocess.run(
        [sys.executable, "-m", "waferline.benchmarks.resident", str(model), "--json", *(["--warm-torch"] * warm)],
        capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    report = json.loads(run.stdout)
    assert report["warm_torch"] is warm
    assert report["file_mib"] == round(model.stat().st_size / 2**20, 1)
    assert report["load_s"] > 0
    assert set(report["grown_mib"]) == {"VmRSS", "RssAnon", "RssFile", "VmHWM"}
    assert report["grown_mib"]["VmRSS"] > 0, "placing the weights grows the process"
    assert report["ratio"] == pytest.approx(report["grown_mib"]["VmRSS"] / report["file_mib"], rel=0.05)
    assert report["mappings_mib"] and all(mib >= 0 for _, mib in report["mappings_mib"])


def test_a_missing_file_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "absent.gguf")]) == 2
    assert "no such file" in capsys.readouterr().err
