"""Whether the fused step's products ask for the weights ahead in software (fused.h's `wl_x8_prefetch`, the rows
ahead in fused_blocks_matrix.c), chosen by timing the model's own steps once, before its first step.

It depends on the machine, so no constant serves: on a Xeon (Sapphire Rapids, 2 vCPUs, a SmolLM2 file within its
300 MB L3) SmolLM2 Q4_0 steps ran at 108-121 tok/s with the prefetch and 97-113 without; on an AMD EPYC (Zen 4, 32 MB
L3, the same file streamed from DRAM) the steps took 5-13% longer with it (docs/benchmarks-decode.md). The prefetch
changes no result, only which reads wait. `WAFERLINE_PREFETCH` = `on` or `off` fixes it instead (`auto`, the
default, measures). The KV cache's rows asked for ahead (`apply_kv_from_env`) are on unless
`WAFERLINE_KV_PREFETCH=off`.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger("waferline.hardware")  # as fused_library's

ENV = "WAFERLINE_PREFETCH"
MARGIN = 0.03  # off is chosen only when its fastest step took under 97% of the time with it (else the old default)
MIN_ROUNDS, MAX_ROUNDS = 4, 16  # rounds of four steps (on, off, off, on)
BUDGET_S = 0.4  # rounds past MIN_ROUNDS stop once this much time has gone (a large model's steps are long)


def switch(name: str, raw: str | None = None, auto: str = "measuring") -> bool | None:
    """An on/off/auto environment setting (`raw`, else the variable `name`): True, False, or None for auto (unset,
    empty). A value it does not know is logged (saying what `auto` then does) and taken as auto: a speed setting is
    not worth refusing to load a model over."""
    raw = (os.environ.get(name, "auto") if raw is None else raw).strip().lower()
    if raw in ("on", "1", "true", "yes"):
        return True
    if raw in ("off", "0", "false", "no"):
        return False
    if raw not in ("auto", ""):
        log.warning("%s=%r is not one of auto, on, off: %s as for auto", name, raw, auto)
    return None


def from_env() -> bool | None:
    """`WAFERLINE_PREFETCH` as a fixed setting, or None to measure ("auto", unset, or a value it does not know)."""
    return switch(ENV)


def apply(lib: Any, on: bool) -> None:
    """Set the library's prefetch, a setting of the process: each model's step applies its own before it runs (a
    call of under a microsecond, against steps of milliseconds)."""
    lib.waferline_set_prefetch(1 if on else 0)


def time_steps(
    lib: Any, step: Callable[[], None], *, clock: Callable[[], float] = time.perf_counter
) -> dict[bool, list[float]]:
    """Each step's time with the prefetch (True) and without (False), in rounds of on, off, off, on (a drift in the
    machine's speed weighs on both alike); one step first, untimed (first-call costs)."""
    step()
    times: dict[bool, list[float]] = {True: [], False: []}
    start = clock()
    while len(times[True]) < 2 * MAX_ROUNDS and (len(times[True]) < 2 * MIN_ROUNDS or clock() - start < BUDGET_S):
        for on in (True, False, False, True):
            apply(lib, on)
            t0 = clock()
            step()
            times[on].append(clock() - t0)
    return times


def ratio(times: dict[bool, list[float]]) -> float:
    """The fastest step without the prefetch over the fastest with it: a shared machine only ever adds time to a
    step, so the fastest of each is the least disturbed (six loads of SmolLM2 Q4_0 on the Zen 4 EPYC: the median
    round's ratio said "on" once, 1.03x, where the fastest steps' gave 0.80-0.96x every time)."""
    return min(times[False]) / max(min(times[True]), 1e-12)


def prefers_off(times: dict[bool, list[float]]) -> bool:
    """Off when the fastest step without the prefetch took under 1 - MARGIN of the fastest with it."""
    return bool(times[True]) and bool(times[False]) and ratio(times) < 1.0 - MARGIN


def choose(lib: Any, step: Callable[[], None], *, clock: Callable[[], float] = time.perf_counter) -> bool:
    """The setting for a model whose one-token step is `step()`: from the environment, else measured (and logged)."""
    fixed = from_env()
    if fixed is not None:
        return fixed
    times = time_steps(lib, step, clock=clock)
    on = not prefers_off(times)
    log.info(
        "the products' software prefetch: %s (the fastest step without it took %.2fx the fastest with it, %d rounds)",
        "on" if on else "off", ratio(times), len(times[True]) // 2,
    )  # fmt: skip
    return on


KV_ENV = "WAFERLINE_KV_PREFETCH"


def apply_kv_from_env(lib: Any) -> bool:
    """Whether a short step asks for each layer's cached keys and values ahead (fused_step.c's `prefetch_kv`): on,
    unless `WAFERLINE_KV_PREFETCH` is off (to compare); set in the library, a setting of the process. Measured on
    one machine only (a Zen 4 EPYC: up to 10% a step at 1000 cached positions, within the noise at 128), so it can be
    switched off without a rebuild."""
    on = switch(KV_ENV, auto="asking ahead") is not False  # auto (unset) is on
    lib.waferline_set_kv_prefetch(1 if on else 0)
    return on
