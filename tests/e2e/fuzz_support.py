"""What the fuzzing tests share: the fixed and the random seed (printed; WAFERLINE_FUZZ_SEED reruns one) and
hypothesis settings for examples that each talk to a server process."""

from __future__ import annotations

import os
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

FIXED_SEED = 13
RANDOM_SEED = int(os.environ.get("WAFERLINE_FUZZ_SEED") or random.randrange(2**32))
SEEDS = pytest.mark.parametrize("fuzz_seed", [FIXED_SEED, RANDOM_SEED], ids=["fixed-seed", "random-seed"])
FIXED_TEXT = "x + 1"  # what the engine's test double writes


def fuzz_settings(examples: int, **kw: Any) -> settings:
    """No deadline (a session waits on a process), no example database (a seed says it all)."""
    return settings(
        max_examples=examples, deadline=None, database=None, print_blob=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
        **kw,
    )  # fmt: skip
