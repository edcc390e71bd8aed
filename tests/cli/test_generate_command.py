"""`waferline generate`: the completion on stdout, the speed on stderr, a too-long prompt in one line."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.usefixtures("single_thread")  # the command sets torch's threads; put them back after


def test_generate_command_prints_the_completion_and_the_speed(capsys: pytest.CaptureFixture[str]) -> None:
    from waferline.cli.main import main

    assert main(["generate", "--model", "tiny", "--prompt", "def f(x):", "--max-tokens", "5", "--threads", "1"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("def f(x):")
    assert "5 new tokens" in err and "tok/s" in err and "random weights" in err


def test_generate_command_reports_a_prompt_too_long_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from waferline.cli.main import main

    assert main(["generate", "--model", "tiny", "--prompt", "x = 1\n" * 2000, "--max-tokens", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "prompt too long" in err and "2048" in err
