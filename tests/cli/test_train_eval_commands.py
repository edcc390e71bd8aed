"""`waferline train` and `waferline eval`: bad numbers are refused with the flag's name, before any work starts."""

from __future__ import annotations

import argparse

import pytest

from waferline.cli import eval as eval_command
from waferline.cli import train as train_command

pytestmark = pytest.mark.usefixtures("single_thread")  # eval sets torch's threads before it checks; put them back


def test_cli_rejects_bad_numbers_with_a_clear_error() -> None:
    parser = argparse.ArgumentParser()
    eval_command.add_arguments(parser)
    with pytest.raises(ValueError, match="--line-cases"):
        eval_command.run(parser.parse_args(["--line-cases", "-1"]))
    parser = argparse.ArgumentParser()
    train_command.add_arguments(parser)
    with pytest.raises(ValueError, match="--max-minutes"):
        train_command.run(parser.parse_args(["--max-minutes", "0"]))
