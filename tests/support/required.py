"""What a test needs from the machine: without it the test is skipped for a developer, and fails under CI.

CI sets `CI` (.ci/run does, as hosted runners do); there a missing compiler or tool is a broken build, not a
quiet skip: the fused C step is the default decode path, so it failing to build must fail the run.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def missing(message: str) -> NoReturn:
    if os.environ.get("CI"):
        pytest.fail(f"{message} (CI is set: what the default path needs must be here)")
    pytest.skip(message)
