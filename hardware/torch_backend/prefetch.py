"""Whether the fused step's products ask for the weights ahead in software (fused.h's `wl_x8_prefetch`, the rows
ahead in fused_blocks_matrix.c), chosen by timing the model's own steps once, before its first step.

It depends on the machine, so no constant serves: on a Xeon (Sapphire Rapids, 2 vCPUs, a SmolLM2 file within its
300 MB L3) SmolLM2 Q4_0 steps ran at 108-121 tok/s with the prefetch and 97-113 without; on an AMD EPYC (Zen 4, 32 MB
L3, the same file streamed from DRAM) the steps took 5-13% longer with it (docs/benchmarks-decode.md). The prefetch
changes no result, only which reads wait. `WAFERLINE_PREFETCH` = `on` or `off` fixes it instead (`auto`, the
default, measures).
"""

from __future__ import annotations

import logging
import os
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

log = logging.getLogger("waferline.hardware")  # as fused_library's

ENV = "WAFERLINE_PREFETCH"
MARGIN = 0.03  # off is chosen only when its steps take under 97% of the time with it (noise keeps the old default)
MIN_ROUNDS, MAX_ROUNDS = 3, 8  # rounds of four steps (on, off, off, on)
BUDGET_S = 0.2  # rounds past MIN_ROUNDS stop once this much time has gone (a large model's steps are long)


def from_env() -> bool | None:
    """`WAFERLINE_PREFETCH` as a fixed setting, or None to measure ("auto", unset). A value it does not know is
    logged and measured, as unset (a speed setting is not worth refusing to load a model over)."""
    raw = os.environ.get(ENV, "auto").strip().lower()
    if raw in ("on", "1", "true", "yes"):
        return True
    if raw in ("off", "0", "false", "no"):
        return False
    if raw not in ("auto", ""):
        log.warning("%s=%r is not one of auto, on, off: measuring as for auto", ENV, raw)
    return None


def apply(lib: Any, on: bool) -> None:
    """Set the library's prefetch, a setting of the process: each model's step applies its own before it runs (a
    call of under a microsecond, against steps of milliseconds)."""
    lib.waferline_set_prefetch(1 if on else 0)


def time_ratios(lib: Any, step: Callable[[], None], *, clock: Callable[[], float] = time.perf_counter) -> list[float]:
    """Per round, the time of two steps without the prefetch over two with it, the steps in the order on, off, off,
    on (a drift in the machine's speed weighs on both alike); one step first, untimed (first-call costs)."""
    step()
    ratios: list[float] = []
    start = clock()
    while len(ratios) < MAX_ROUNDS and (len(ratios) < MIN_ROUNDS or clock() - start < BUDGET_S):
        took = {True: 0.0, False: 0.0}
        for on in (True, False, False, True):
            apply(lib, on)
            t0 = clock()
            step()
            took[on] += clock() - t0
        ratios.append(took[False] / max(took[True], 1e-9))
    return ratios


def prefers_off(ratios: Sequence[float]) -> bool:
    """Off when the median round ran without the prefetch in under 1 - MARGIN of the time with it."""
    return bool(ratios) and statistics.median(ratios) < 1.0 - MARGIN


def choose(lib: Any, step: Callable[[], None], *, clock: Callable[[], float] = time.perf_counter) -> bool:
    """The setting for a model whose one-token step is `step()`: from the environment, else measured (and logged)."""
    fixed = from_env()
    if fixed is not None:
        return fixed
    ratios = time_ratios(lib, step, clock=clock)
    on = not prefers_off(ratios)
    log.info(
        "the products' software prefetch: %s (steps without it took %.2fx the time, median of %d rounds)",
        "on" if on else "off", statistics.median(ratios), len(ratios),
    )  # fmt: skip
    return on
