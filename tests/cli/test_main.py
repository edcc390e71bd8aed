"""The `waferline` dispatcher: every subcommand is listed, and a user's mistake is one line, not a traceback."""

from __future__ import annotations

import os

import pytest

from waferline.cli.main import COMMANDS, main

SUBCOMMANDS = ("serve", "demo", "generate", "emulate", "train", "eval", "calibrate", "export", "fetch-model")
BENCHMARKS = (
    "bench",
    "bench-lsp",
    "bench-first",
    "bench-load",
    "bench-index",
    "bench-hover",
    "bench-syntax",
    "eval-editor",
    "eval-nes",
    "eval-lookup",
    "eval-chat",
)


def test_help_lists_every_subcommand_and_every_benchmark(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert set(COMMANDS) == {*SUBCOMMANDS, *BENCHMARKS}
    for name in COMMANDS:
        assert f"    {name}" in out, name
    assert all(
        module.startswith("waferline.benchmarks.") for name, (module, _) in COMMANDS.items() if name in BENCHMARKS
    )


def test_a_bad_value_is_one_line_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench-syntax", "--keys", "0"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == "waferline bench-syntax: error: --keys must be at least 1, got 0\n"


def test_help_loads_no_torch() -> None:
    import subprocess
    import sys

    code = "import sys; from waferline.cli.main import build_parser; build_parser(); print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False", "a subcommand imports torch at module level: `waferline --help` slows down"


def test_openmp_workers_are_asked_to_sleep_unless_the_user_said_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch's spinning OpenMP workers took the cores from the fused step's own threads (cli/main.py quiet_openmp):
    every command but train asks them to sleep, and a value the user set is kept."""
    import waferline.cli.main as cli_main

    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.setattr(cli_main, "OMP_WAIT_POLICY_SET", False)
    cli_main.quiet_openmp("train")
    assert "OMP_WAIT_POLICY" not in os.environ and not cli_main.OMP_WAIT_POLICY_SET
    cli_main.quiet_openmp("serve")
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE" and cli_main.OMP_WAIT_POLICY_SET
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    monkeypatch.setattr(cli_main, "OMP_WAIT_POLICY_SET", False)
    cli_main.quiet_openmp("bench")
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE" and not cli_main.OMP_WAIT_POLICY_SET
