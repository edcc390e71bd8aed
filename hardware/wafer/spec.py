"""What a wafer-scale engine is, in the numbers the emulator and its cost model need.

Every constant of the presets comes from a published vendor figure or paper; docs/wafer-validation.md lists each one
with its source and says which are carried over or assumed where nothing was published. The constants are never fitted
to published throughput (tokens/s): the cost model must predict those, not remember them. `PUBLISHED` keeps the vendor's
headline totals apart from the per-core constants so that a test can check that the totals derived from the per-core
figures (cores x SRAM per core, ...) land on what the vendor published.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import torch


@dataclass(frozen=True, kw_only=True)
class WaferSpec:
    """One wafer: a rows x cols mesh of tiles (core + its SRAM + a router), joined by single-cycle links.

    Units are in the names: bytes, cycles, Hz, bits. A tile is what Cerebras calls a core or processing element (PE).
    """

    name: str
    rows: int  # tiles along the mesh's vertical axis
    cols: int  # tiles along the horizontal axis
    sram_bytes_per_tile: int  # each tile's private SRAM; no other memory on the wafer
    clock_hz: float
    macs_per_cycle_fp16: int  # 16-bit multiply-accumulates one tile's SIMD unit issues per cycle
    macs_per_cycle_fp32: int
    sram_read_bytes_per_cycle: int  # per tile
    sram_write_bytes_per_cycle: int  # per tile
    link_bits: int = 32  # payload of one wavelet; a link carries one wavelet per cycle in each direction
    hop_cycles: int = 1  # latency of one hop between neighbouring routers
    # T_R, cycles a wavelet takes between a core and its router, each way: every dependent step of a collective (a
    # core receiving, combining, sending on) costs 2 * T_R + 1 cycles besides the hops [LUCZ]
    ramp_cycles: int = 0
    collective_overhead: float = 0.0  # a flat excess of a collective's cycles over its hop count (0: none; sweeps)
    routes_per_tile: int = 24  # routing colours (virtual channels) one router can hold
    off_wafer_bytes_per_s: float = 0.0  # bandwidth to memory beside the wafer (0: no off-wafer memory)
    off_wafer_capacity_bytes: int = 0  # how much may spill there (0: a model that does not fit fails)
    system_io_bytes_per_s: float = 150e9  # the system's I/O to the host and to other systems (12 x 100 GbE)
    system_link_latency_s: float = 1e-6  # one Ethernet hop between systems or to the host (assumed: docs)
    # How the program uses the routers: patterns (kind, span) run on the pattern of a larger span of the same kind,
    # so that fewer colours are configured (routes.fit_routes finds these); tree_groups > 0 forces the number of
    # first-level groups of every two-level tree (0: the fewest steps, collectives.tree_group).
    route_merge: tuple[tuple[str, int, int], ...] = ()
    tree_groups: int = 0
    notes: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        assert self.rows > 0 and self.cols > 0, f"{self.name}: a grid needs rows and cols, got {self.rows}x{self.cols}"
        assert self.sram_bytes_per_tile % 16 == 0, f"{self.name}: SRAM per tile must be a multiple of 16 bytes"
        assert self.clock_hz > 0 and self.hop_cycles >= 1, f"{self.name}: clock and hop latency must be positive"

    # -- derived totals ---------------------------------------------------------------------------------------------
    @property
    def tiles(self) -> int:
        return self.rows * self.cols

    @property
    def sram_bytes(self) -> int:
        return self.tiles * self.sram_bytes_per_tile

    @property
    def sram_bytes_per_s(self) -> float:
        """Aggregate SRAM bandwidth (reads + writes) of every tile at once."""
        return self.tiles * (self.sram_read_bytes_per_cycle + self.sram_write_bytes_per_cycle) * self.clock_hz

    @property
    def fabric_bits_per_s(self) -> float:
        """Aggregate link bandwidth: four links per tile, one wavelet per cycle in each direction of each."""
        return self.tiles * 4 * 2 * self.link_bits * self.clock_hz

    def macs_per_cycle(self, dtype: torch.dtype) -> int:
        """MACs per cycle per tile in `dtype` (fp16/bf16 use the 16-bit SIMD width; everything else the fp32 one)."""
        return self.macs_per_cycle_fp16 if dtype in (torch.float16, torch.bfloat16) else self.macs_per_cycle_fp32

    def peak_flops(self, dtype: torch.dtype = torch.float16) -> float:
        """Dense peak: every tile issuing its full SIMD width every cycle (2 flops per MAC)."""
        return self.tiles * self.macs_per_cycle(dtype) * 2 * self.clock_hz

    @property
    def diameter_hops(self) -> int:
        return (self.rows - 1) + (self.cols - 1)

    def route_span(self, kind: str, span: int) -> int:
        """The span of the configured pattern a collective of (kind, span) runs on (itself unless merged)."""
        for k, small, large in self.route_merge:
            if k == kind and small == span:
                return large
        return span

    def with_spill(self, bytes_per_s: float | None = None, capacity: int = 1 << 50) -> WaferSpec:
        """This wafer with off-wafer memory that weights may spill into (streamed in at `bytes_per_s` per use)."""
        bw = bytes_per_s if bytes_per_s is not None else self.off_wafer_bytes_per_s
        assert bw > 0, f"{self.name}: spilling needs an off-wafer bandwidth"
        return dataclasses.replace(self, off_wafer_bytes_per_s=bw, off_wafer_capacity_bytes=capacity)


# -- presets -----------------------------------------------------------------------------------------------------------
# Sources, keyed in docs/wafer-validation.md: [HC34] S. Lie, "Cerebras Architecture Deep Dive", Hot Chips 34 (2022);
# [HC36] Cerebras, "WSE-3", Hot Chips 36 (2024); [WSE2-PR] Cerebras WSE-2 product announcement (Apr 2021);
# [WSE3-PR] Cerebras WSE-3 / CS-3 announcement (13 Mar 2024); [SDK] Cerebras SDK docs, "A Conceptual View";
# [CS2-DS] Cerebras CS-2 datasheet (system I/O); [CS3-DS] Cerebras CS-3 system page, "System I/O 1.2 Tb/s";
# [LUCZ] Luczynski et al., "Near-Optimal Wafer-Scale Reduce", HPDC 2024 (performance model of CS-2 collectives:
# distance + wavelets + (2 T_R + 1) per dependent step, T_R ~ 2 cycles, CS-2 at 850 MHz); [CSL-EX] Cerebras'
# SDK examples, github.com/Cerebras/csl-examples ("a PE runs with clock speed 850MHz", for WSE-2 and WSE-3 runs);
# [WAFERLLM] He et al., OSDI 2025, and its artifact github.com/MeshInfra/WaferLLM.

CS_SYSTEM_IO_BYTES_PER_S = 12 * 100e9 / 8  # 12 x 100 Gb Ethernet [CS2-DS]; CS-3 "1.2 Tb/s" [CS3-DS] = 150 GB/s

WSE2 = WaferSpec(
    name="wse-2",
    rows=7 * 154,  # 7 die rows x 154 core rows per die [HC34: "12 x 7 Die", die "66 x 154 Cores"] = 1078
    cols=12 * 66,  # 12 die columns x 66 core columns per die [HC34] = 792; 853,776 cores (~850,000 [WSE2-PR])
    sram_bytes_per_tile=48 * 1024,  # 48 kB per core [HC34, SDK]
    clock_hz=1.1e9,  # [HC34: "1.1GHz clock frequency"]
    macs_per_cycle_fp16=4,  # 4-way 16-bit SIMD FMAC [HC34]
    macs_per_cycle_fp32=1,  # one fp32 FMAC per cycle [SDK: fp32 vector ops process one element per cycle]
    sram_read_bytes_per_cycle=16,  # two 64-bit reads per cycle [HC34]
    sram_write_bytes_per_cycle=8,  # one 64-bit write per cycle [HC34]
    link_bits=32,  # 32-bit wavelets on 32-bit bidirectional links in four directions [HC34, SDK]
    hop_cycles=1,  # "single cycle latency between cores" [HC34]
    ramp_cycles=2,  # T_R ~ 2 cycles on WSE-2, in the model that predicts CS-2 reductions within 4% [LUCZ]
    routes_per_tile=24,  # 24 routable colours [SDK]
    off_wafer_bytes_per_s=CS_SYSTEM_IO_BYTES_PER_S,
    system_io_bytes_per_s=CS_SYSTEM_IO_BYTES_PER_S,  # [CS2-DS]
    notes="Cerebras WSE-2 (TSMC 7 nm), as in the CS-2 system.",
)

WSE3 = WaferSpec(
    name="wse-3",
    # [HC36] publishes 84 dies and "10.7k cores" per die but no per-die grid; 67 x 160 keeps WSE-2's die aspect and
    # gives 10,720 per die, so 7 x 160 = 1120 rows and 12 x 67 = 804 cols: 900,480 cores (~900,000 [WSE3-PR]).
    rows=7 * 160,
    cols=12 * 67,
    sram_bytes_per_tile=48 * 1024,  # 48 kB per core, unchanged from WSE-2 [HC36, SDK]
    clock_hz=1.1e9,  # no WSE-3 clock is published; WSE-2's [HC34] carried over (docs/wafer-validation.md)
    macs_per_cycle_fp16=8,  # FP16 SIMD doubled from 4-wide to 8-wide [HC36]
    macs_per_cycle_fp32=1,  # not published for WSE-3; WSE-2's carried over
    sram_read_bytes_per_cycle=16,  # [HC34] memory design carried over (same 48 kB core SRAM) [HC36]
    sram_write_bytes_per_cycle=8,
    link_bits=32,  # [SDK]
    hop_cycles=1,  # "single clock cycle latency between nodes" [WSE3-PR white paper]
    ramp_cycles=2,  # [LUCZ] measured on WSE-2; same core and router design carried over [HC36]
    routes_per_tile=24,  # [SDK]
    off_wafer_bytes_per_s=CS_SYSTEM_IO_BYTES_PER_S,  # CS-3 I/O 1.2 Tb/s, as CS-2's [CS3-DS]
    system_io_bytes_per_s=CS_SYSTEM_IO_BYTES_PER_S,  # [CS3-DS]
    notes="Cerebras WSE-3 (TSMC 5 nm), as in the CS-3 system.",
)


# The fabric a program gets on each system: the SDK's fabric dimensions, 757 x 996 on a CS-2 and 762 x 1172 on a
# CS-3 (width x height, as the SDK's --fabric-dims; [SDK], and the compile scripts of [WAFERLLM]'s artifact), less
# the 7 columns and 2 rows the host-transfer (memcpy) framework takes at the edges ([WAFERLLM] compiles a P x P
# program into fabric-dims P+7, P+2). The rest of the physical cores are spares that route around defects. A program
# on a system runs at the clock the vendor's SDK examples convert its cycles at, 850 MHz ([CSL-EX], for WSE-2 and
# WSE-3 runs alike; [LUCZ] measured a CS-2 at 850 MHz), not the 1.1 GHz of the WSE-2 chip announcement [HC34].
SYSTEM_CLOCK_HZ = 850e6


def system(chip: WaferSpec, name: str, fabric_width: int, fabric_height: int) -> WaferSpec:
    """`chip` as a program on its system gets it: the SDK's fabric less memcpy's columns and rows, the SDK's clock."""
    return dataclasses.replace(
        chip,
        name=name,
        rows=fabric_height - 2,
        cols=fabric_width - 7,
        clock_hz=SYSTEM_CLOCK_HZ,
        notes=f"{chip.name} as programmed in a {name.upper()}: the SDK's usable fabric, at the SDK's clock",
    )


CS2 = system(WSE2, "cs-2", 757, 996)
CS3 = system(WSE3, "cs-3", 762, 1172)


def mini(rows: int, cols: int, base: WaferSpec = WSE3) -> WaferSpec:
    """A small grid of `base`'s tiles (same per-tile constants), small enough to emulate on real numbers."""
    return dataclasses.replace(
        base, name=f"mini-{rows}x{cols}", rows=rows, cols=cols, notes=f"{rows}x{cols} of {base.name}"
    )


PRESETS: dict[str, WaferSpec] = {
    "wse-2": WSE2,
    "wse-3": WSE3,
    "cs-2": CS2,
    "cs-3": CS3,
    "mini-8x8": mini(8, 8),
    "mini-16x16": mini(16, 16),
    "mini-32x32": mini(32, 32),
    "mini-64x64": mini(64, 64),
}

# The vendor's headline totals the per-tile constants above are checked against (tests/hardware/test_wafer_spec.py).
PUBLISHED: dict[str, dict[str, float]] = {
    "wse-2": {
        "cores": 850_000,  # [WSE2-PR]
        "sram_bytes": 40e9,  # 40 GB [WSE2-PR]
        "sram_bytes_per_s": 20e15,  # 20 PB/s [WSE2-PR]
        "fabric_bits_per_s": 220e15,  # 220 Pb/s [WSE2-PR]
        "transistors": 2.6e12,  # [WSE2-PR] (not derivable from the spec; listed for the record)
    },
    "wse-3": {
        "cores": 900_000,  # [WSE3-PR]
        "sram_bytes": 44e9,  # 44 GB [WSE3-PR]
        "sram_bytes_per_s": 21e15,  # 21 PB/s [WSE3-PR]
        "fabric_bits_per_s": 214e15,  # 214 Pb/s [WSE3-PR]
        "peak_flops": 125e15,  # 125 PFLOPS "peak AI" [WSE3-PR]; a sparse figure, so dense peak must stay below it
        "transistors": 4e12,  # [WSE3-PR]
    },
}


def get_spec(name: str | WaferSpec) -> WaferSpec:
    """A preset by name, `mini-RxC` for any small grid of WSE-3 tiles, or `PRESET:RxC` for an R x C region of a
    preset's tiles (`cs-2:720x720`, the grid WaferLLM runs its largest decode on)."""
    if isinstance(name, WaferSpec):
        return name
    if name in PRESETS:
        return PRESETS[name]
    base, _, region = name.partition(":")
    if region and base in PRESETS:
        r, _, c = region.partition("x")
        if r.isdigit() and c.isdigit() and int(r) > 0 and int(c) > 0:
            return dataclasses.replace(PRESETS[base], name=name, rows=int(r), cols=int(c), notes=f"{region} of {base}")
    if name.startswith("mini-") and "x" in name[5:]:
        r, _, c = name[5:].partition("x")
        if r.isdigit() and c.isdigit() and int(r) > 0 and int(c) > 0:
            return mini(int(r), int(c))
    raise ValueError(f"unknown wafer preset {name!r}; presets: {', '.join(PRESETS)} (or mini-RxC, PRESET:RxC)")
