"""Fixtures of the hardware tests."""

from __future__ import annotations

from typing import Any

import pytest
from required import missing  # tests/support

from waferline.hardware.torch_backend import fused_library


@pytest.fixture(scope="module")
def lib() -> Any:
    """The fused step's C library as built for this machine: skipped without it, failed under CI
    (tests/support/required.py)."""
    built = fused_library.library()
    if built is None:
        missing(f"the fused C step could not be built: {fused_library._library_error}")
    return built
