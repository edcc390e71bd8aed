"""Which registers the 8-row products of blocks of 32 (Q4_0, Q4_1 and Q8_0 rows placed 8 at a time interleaved,
fused_blocks_x8.c) use on a CPU with AVX512-VNNI: 512-bit ones on the input's spread form (two chunks of a block in
a register), or 256-bit ones on the quantised input itself, its 4 bytes broadcast to each multiply-add ("narrow").
Both make the same integers, so the same outputs bit for bit; only the speed differs, and by CPU.

AMD's Zen 4 runs each 512-bit operation as two 256-bit halves, so the wider registers save it no arithmetic, and a
144-byte Q4_0 block's 64-byte loads mostly cross a cache line where its 32-byte ones mostly do not. On a Zen 4 EPYC
(2 vCPUs), SmolLM2's one-token steps switched between the two per run of 32 in one process took less time narrow:
median speedups 1.03-1.16 (Q4_0) and 1.02-1.12 (Q4_1) over six or seven runs on one thread, 1.00-1.10 on two
(docs/benchmarks-decode.md, 2026-12-07). On Intel's cores, whose 512-bit units are whole (the wide form was made
there), it stays wide: not measured narrow. `WAFERLINE_X8_NARROW` = `on` or `off` fixes it; `auto` (the default) is
on for an AMD CPU. Q5_0's and the K-quants' products are always wide: narrow, Q5_0 was slower on the same Zen 4.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from waferline.hardware.torch_backend import prefetch

ENV = "WAFERLINE_X8_NARROW"


def cpu_vendor(cpuinfo: str | None = None) -> str:
    """The CPU's vendor string from /proc/cpuinfo (`AuthenticAMD`, `GenuineIntel`), or "" where it is not there."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return ""
    for line in cpuinfo.splitlines():
        if line.startswith("vendor_id"):
            return line.partition(":")[2].strip()
    return ""


def wanted(env: str | None = None, vendor: str | None = None) -> bool:
    """Narrow or not: `WAFERLINE_X8_NARROW` when it says on or off, else (auto, unset, or a value it does not know,
    which is logged) whether the CPU is AMD's."""
    fixed = prefetch.switch(ENV, env, auto="choosing")
    if fixed is not None:
        return fixed
    return (cpu_vendor() if vendor is None else vendor) == "AuthenticAMD"


def apply(lib: Any) -> bool | None:
    """Set the library's choice (a setting of the whole process, made once when it is loaded); returns it, or None
    where the build has no 512-bit product to choose against (no AVX512-VNNI: the AVX2 product serves)."""
    on = wanted()
    if lib.waferline_set_x8_narrow(1 if on else 0) < 0:
        return None
    return on


def current(lib: Any) -> bool | None:
    """The library's setting now (None: no 512-bit product built)."""
    before = lib.waferline_set_x8_narrow(-1)
    return None if before < 0 else bool(before)
