"""The test tiers hold: tests/e2e is all marked `e2e` (what `make check` leaves out), and a fused C step that cannot
be built fails a run under CI instead of skipping (the default decode path; tests/support/required.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def pytest_run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=ROOT, capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip


def test_e2e_tests_are_marked_and_left_out_of_the_inner_loop() -> None:
    kept = pytest_run("--collect-only", "-m", "not e2e", "tests/e2e/test_lsp_framing.py", "tests/test_layering.py")
    assert "test_lsp_framing" not in kept.stdout and "test_layering.py" in kept.stdout, kept.stdout[-2000:]
    marked = pytest_run("--collect-only", "-m", "e2e", "tests/e2e/test_lsp_framing.py")
    assert marked.returncode == 0 and "test_lsp_framing.py::" in marked.stdout, marked.stdout[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize("ci", [True, False])
def test_a_fused_step_that_cannot_build_fails_under_ci_and_skips_otherwise(tmp_path: Path, ci: bool) -> None:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env |= {"CC": "/bin/false", "XDG_CACHE_HOME": str(tmp_path)} | ({"CI": "1"} if ci else {})
    run = pytest_run(
        "tests/hardware/test_fused.py",
        "-k",
        "test_float32_fused_step_equals_the_per_op_step and odd",
        "-x",
        "-rfs",
        env=env,
    )
    if ci:
        assert run.returncode == 1 and "could not be built" in run.stdout, run.stdout[-2000:]
    else:
        assert run.returncode == 0 and "skipped" in run.stdout and "could not be built" in run.stdout, run.stdout[
            -2000:
        ]
