"""The cost model: what one operation spends on the wafer, in counters, cycles and seconds.

An operation is a list of phases. In a phase every tile works on its own block at once, then the phase's
collectives move the results. A phase costs
    max(compute cycles, SRAM cycles) on its busiest tile   (compute: MACs / SIMD lanes; SRAM: bytes / port width)
  + the latency of its collectives, one after another       (collectives.py)
  + off-wafer transfer time of spilled weights              (bytes / off-wafer bandwidth)
and phases run one after another. Cycles become seconds at the spec's clock. The breakdown puts the local part of
each phase under `compute` or `sram` (whichever bound it), collective latency under `fabric`, spills under
`off_wafer`; system.py adds the system I/O to the host (`host_io`) and between wafers (`inter_wafer`). The
counters depend only on shapes, so analytic mode (shapes alone) and numeric mode (real numbers) produce the same
counters by construction.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import torch

from waferline.hardware.wafer.collectives import Collective
from waferline.hardware.wafer.spec import WaferSpec

CATEGORIES = ("compute", "sram", "fabric", "off_wafer", "host_io", "inter_wafer")


@dataclass(frozen=True)
class Phase:
    """Work done by every tile at once, then the collectives that follow it."""

    name: str
    macs: int = 0  # all tiles together (real elements only)
    macs_tile: int = 0  # on the busiest tile (padded block)
    read_bytes: int = 0
    read_bytes_tile: int = 0
    write_bytes: int = 0
    write_bytes_tile: int = 0
    collectives: tuple[Collective, ...] = ()
    off_wafer_bytes: int = 0


def phase(name: str, *collectives: Collective | None, **work: int) -> Phase:
    """A Phase, dropping the collectives that degenerate to nothing (span 1)."""
    return Phase(name, collectives=tuple(c for c in collectives if c is not None), **work)


@dataclass(frozen=True)
class Cost:
    """What one operation call adds: counters, and the routing patterns (kind, span) -> colours it configures.
    `vector` holds the counters in COUNTER_KEYS order, so that a device adds a whole cost in one numpy call."""

    counts: dict[str, float]
    routes: dict[tuple[str, int], int]
    vector: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "vector", np.array([self.counts.get(k, 0.0) for k in COUNTER_KEYS]))

    def __add__(self, other: Cost) -> Cost:
        counts = {
            k: self.counts.get(k, 0.0) + other.counts.get(k, 0.0) for k in self.counts.keys() | other.counts.keys()
        }
        return Cost(counts, {**self.routes, **other.routes})


def tally(spec: WaferSpec, dtype: torch.dtype, phases: Iterable[Phase]) -> Cost:
    """The cost of a list of phases (one operation call)."""
    lanes = spec.macs_per_cycle(dtype)
    c: dict[str, float] = dict.fromkeys(COUNTER_KEYS, 0.0)
    routes: dict[tuple[str, int], int] = {}
    for p in phases:
        compute = -(-p.macs_tile // lanes)
        sram = max(
            -(-p.read_bytes_tile // spec.sram_read_bytes_per_cycle),
            -(-p.write_bytes_tile // spec.sram_write_bytes_per_cycle),
        )
        c["cycles.compute" if compute >= sram else "cycles.sram"] += max(compute, sram)
        for col in p.collectives:
            routes[col.pattern] = col.levels  # one colour per tree level on every router the pattern crosses
            c["cycles.fabric"] += col.cycles
            c["collectives"] += 1
            c["collective_hops"] += col.hops
            c["collective_steps"] += col.steps
            c["wavelet_hops"] += col.wavelet_hops
        if p.off_wafer_bytes:
            assert spec.off_wafer_bytes_per_s > 0, "spilled bytes on a wafer without off-wafer memory"
            c["cycles.off_wafer"] += math.ceil(p.off_wafer_bytes / spec.off_wafer_bytes_per_s * spec.clock_hz)
        c["off_wafer_bytes"] += p.off_wafer_bytes
        c["macs"] += p.macs
        c["macs.tile"] += p.macs_tile
        c["sram_read_bytes"] += p.read_bytes
        c["sram_read_bytes.tile"] += p.read_bytes_tile
        c["sram_write_bytes"] += p.write_bytes
        c["sram_write_bytes.tile"] += p.write_bytes_tile
        c["phases"] += 1
    c["cycles"] = sum(c[f"cycles.{k}"] for k in CATEGORIES)
    return Cost(c, routes)


COUNTER_KEYS = (
    "cycles",
    *(f"cycles.{k}" for k in CATEGORIES),
    "macs",
    "macs.tile",
    "sram_read_bytes",
    "sram_read_bytes.tile",
    "sram_write_bytes",
    "sram_write_bytes.tile",
    "collectives",
    "collective_hops",
    "collective_steps",
    "wavelet_hops",
    "off_wafer_bytes",
    "host_io_bytes",
    "inter_wafer_bytes",
    "inter_wafer_transfers",
    "phases",
)


@dataclass
class CostReport:
    """Per-token figures from a device's counters over `tokens` decoded positions."""

    wafer: str
    clock_hz: float
    tokens: float
    cycles_per_token: float
    breakdown: dict[str, float]  # seconds per token by category
    by_op: dict[str, float] = field(default_factory=dict)  # seconds per token by operation

    @property
    def seconds_per_token(self) -> float:
        return self.cycles_per_token / self.clock_hz

    @property
    def tok_s(self) -> float:
        return 1.0 / self.seconds_per_token if self.cycles_per_token else math.inf


def report(spec: WaferSpec, counters: dict[str, float], tokens: float | None = None) -> CostReport:
    """Seconds per token and where they go, from counters accumulated over `tokens` positions (default: the
    counters' own `tokens`, the positions the device advanced through)."""
    n = tokens if tokens is not None else counters.get("tokens", 0.0)
    assert n > 0, "no tokens counted: run a forward step before asking for a report"
    per = 1.0 / n
    breakdown = {k: counters.get(f"cycles.{k}", 0.0) * per / spec.clock_hz for k in CATEGORIES}
    by_op = {
        key.removeprefix("op.").removesuffix(".cycles"): v * per / spec.clock_hz
        for key, v in counters.items()
        if key.startswith("op.") and key.endswith(".cycles")
    }
    return CostReport(spec.name, spec.clock_hz, n, counters.get("cycles", 0.0) * per, breakdown, by_op)
