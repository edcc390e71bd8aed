"""Several wafers as pipeline stages: a model's layers split over N systems, each a WaferDevice of its own.

`MultiWaferDevice(wafers=N, n_layers=L, ...)` is a Device: stage s holds layers [s*L//N, (s+1)*L//N) (contiguous
and balanced), the embedding lives on the first stage, the final norm and the LM head on the last, and the rotary
tables on every stage (each rotates its own layers' q and k). Each operation runs on the stage that holds its
weight (or its layer's KV pages; elementwise operations on the stage the activations are on), so the numbers are
each wafer's own, the same as on one wafer of the same grid. When the residual stream moves from one stage to the
next, the receiving wafer is charged the transfer (system.stage_transfer: to the edge, over the system link, to
the root column). One stream's token passes the stages one after another, so its time is the sum of the stages'
(no overlap between stages: single-stream decode keeps one stage busy at a time).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import torch
from torch import Tensor

from waferline.hardware.blocks import Weight
from waferline.hardware.device import DecoderPlan, FusedStep, KVRef, Placement, WeightRef
from waferline.hardware.wafer import system
from waferline.hardware.wafer.cost import COUNTER_KEYS, CostReport, report
from waferline.hardware.wafer.spec import WaferSpec
from waferline.hardware.wafer.wafer_device import WaferDevice

_STATE_SUMMED = ("tiles", "tiles_used", "sram_bytes_used", "sram_bytes_capacity", "weight_bytes",
                 "weight_bytes_on_wafer", "spilled_bytes", "kv_bytes_reserved", "scratch_bytes")  # fmt: skip


def stage_bounds(n_layers: int, wafers: int) -> list[tuple[int, int]]:
    """[first, last) layers of each stage: contiguous, sizes differing by at most one."""
    assert 1 <= wafers <= n_layers, f"{wafers} wafers for {n_layers} layers: every wafer needs a layer"
    return [(s * n_layers // wafers, (s + 1) * n_layers // wafers) for s in range(wafers)]


class MultiWaferDevice:
    """N wafers of one spec, as pipeline stages over a model of `n_layers` layers (options as WaferDevice's)."""

    def __init__(
        self,
        *,
        wafers: int,
        n_layers: int,
        dtype: torch.dtype = torch.float32,
        spec: str | WaferSpec = "mini-32x32",
        analytic: bool = False,
        spill: bool = False,
        reserve: float | None = None,
    ) -> None:
        self.stages = [
            WaferDevice(dtype=dtype, spec=spec, analytic=analytic, spill=spill, reserve=reserve) for _ in range(wafers)
        ]
        self.spec = self.stages[0].spec
        self.bounds = stage_bounds(n_layers, wafers)
        self.name = "wafer"
        self.dtype = dtype
        self.analytic = analytic
        self.exact_rows = False  # as each stage's (WaferDevice)
        self._at = 0  # the stage the activations are on
        self._width = 0  # elements per token of the residual stream (the model's dim), seen at embed

    def stage_of_layer(self, layer: int) -> int:
        return next(s for s, (lo, hi) in enumerate(self.bounds) if lo <= layer < hi)

    def _stage_of(self, name: str) -> int | None:
        """The stage a tensor of this name lives on; None for the rotary tables (every stage)."""
        m = re.match(r"layers\.(\d+)\.", name)
        if m:
            return self.stage_of_layer(int(m.group(1)))
        if name.startswith("rope."):
            return None
        return 0 if name == "embedding" else len(self.stages) - 1

    # -- placement ---------------------------------------------------------------------------------------------------
    def place(self, name: str, weight: Weight, *, role: str = "linear") -> WeightRef:
        stage = self._stage_of(name)
        if stage is None:
            refs = [dev.place(name, weight, role=role) for dev in self.stages]
            return WeightRef(name=name, shape=tuple(weight.shape), dtype=self.dtype, payload=refs)
        ref = self.stages[stage].place(name, weight, role=role)
        return WeightRef(name=name, shape=ref.shape, dtype=self.dtype, payload=(stage, ref))

    def check_fits(self) -> None:
        for dev in self.stages:
            dev.check_fits()

    def kv_open(self, layers: int, kv_heads: int, head_dim: int, max_tokens: int) -> KVRef:
        assert layers == self.bounds[-1][1], f"a cache of {layers} layers on stages built for {self.bounds[-1][1]}"
        refs = [
            dev.kv_open(hi - lo, kv_heads, head_dim, max_tokens)
            for dev, (lo, hi) in zip(self.stages, self.bounds, strict=True)
        ]
        return KVRef(
            layers=layers, kv_heads=kv_heads, head_dim=head_dim, max_tokens=max_tokens, payload=refs, dtype=self.dtype
        )

    def kv_truncate(self, kv: KVRef, length: int) -> None:
        for dev, ref in zip(self.stages, _parts(kv), strict=True):
            dev.kv_truncate(ref, length)
        kv.length = length

    def kv_advance(self, kv: KVRef, length: int) -> None:
        for dev, ref in zip(self.stages, _parts(kv), strict=True):
            dev.kv_advance(ref, length)
        kv.length = length

    def kv_close(self, kv: KVRef) -> None:
        for dev, ref in zip(self.stages, _parts(kv), strict=True):
            dev.kv_close(ref)
        kv.payload = None
        kv.length = 0

    # -- per-step operations -----------------------------------------------------------------------------------------
    def _go(self, stage: int, x: Tensor) -> WaferDevice:
        """The stage `stage`, with the activations x moved there first (charged to the receiving wafer)."""
        if stage != self._at:
            assert stage == self._at + 1, f"activations jump from stage {self._at} to {stage}: not a pipeline"
            dev = self.stages[stage]
            dev.charge("inter_wafer", system.stage_transfer(dev.spec, self.dtype, x.shape[0], x.shape[-1]))
            self._at = stage
        return self.stages[self._at]

    def embed(self, table: WeightRef, tokens: Tensor) -> Tensor:
        stage, ref = _one(table)
        self._at = stage
        return self.stages[stage].embed(ref, tokens)

    def rms_norm(self, x: Tensor, weight: WeightRef, eps: float) -> Tensor:
        stage, ref = _one(weight)
        return self._go(stage, x).rms_norm(x, ref, eps)

    def linear(self, x: Tensor, weight: WeightRef, bias: WeightRef | None = None) -> Tensor:
        stage, ref = _one(weight)
        return self._go(stage, x).linear(x, ref, _one(bias)[1] if bias is not None else None)

    def rotary(self, x: Tensor, cos: WeightRef, sin: WeightRef, start: int) -> Tensor:
        return self.stages[self._at].rotary(x, _every(cos)[self._at], _every(sin)[self._at], start)

    def attend(self, kv: KVRef, layer: int, q: Tensor, k: Tensor, v: Tensor, start: int) -> Tensor:
        stage = self.stage_of_layer(layer)
        dev = self._go(stage, q)
        return dev.attend(_parts(kv)[stage], layer - self.bounds[stage][0], q, k, v, start)

    def swiglu(self, gate: Tensor, up: Tensor) -> Tensor:
        return self.stages[self._at].swiglu(gate, up)

    def add(self, x: Tensor, y: Tensor) -> Tensor:
        return self.stages[self._at].add(x, y)

    def fuse_decoder(self, plan: DecoderPlan) -> FusedStep | None:
        return None

    # -- accounting --------------------------------------------------------------------------------------------------
    def placement(self) -> Placement:
        weight_bytes = sum(dev.placement().weight_bytes for dev in self.stages)
        return Placement(weights=str(self.dtype).removeprefix("torch."), dtype=self.dtype, weight_bytes=weight_bytes)

    def counters(self) -> dict[str, float]:
        """The stages' cost counters summed (one token passes them one after another), the first stage's token
        counts, the memory state summed over the wafers, and routing as the busiest wafer's."""
        parts = [dev.counters() for dev in self.stages]
        out: dict[str, Any] = dict(parts[0])
        for key in {k for p in parts for k in p}:
            if key in ("tokens", "steps", "routes_available"):
                continue
            if key in COUNTER_KEYS or key in _STATE_SUMMED or key.startswith("op.") or key == "ops":
                out[key] = float(np.sum([p.get(key, 0.0) for p in parts]))
        out["max_tile_bytes"] = max(p["max_tile_bytes"] for p in parts)
        out["routes_per_tile"] = max(p["routes_per_tile"] for p in parts)
        out["wafers"] = float(len(self.stages))
        return out

    def wafer_stats(self) -> list[dict[str, float]]:
        """Per wafer: its layers, occupancy and modeled time per token (counters since the last reset)."""
        return [wafer_stats(dev, lo, hi) for dev, (lo, hi) in zip(self.stages, self.bounds, strict=True)]

    def reset_counters(self) -> None:
        for dev in self.stages:
            dev.reset_counters()

    def report(self, tokens: float | None = None) -> CostReport:
        return report(self.spec, self.counters(), tokens)

    def routes(self) -> dict[tuple[str, int], int]:
        merged: dict[tuple[str, int], int] = {}
        for dev in self.stages:
            merged.update(dev.routes())
        return merged

    def check_routes(self) -> None:
        for dev in self.stages:
            dev.check_routes()

    def placement_table(self, limit: int | None = None) -> str:
        return "\n".join(f"wafer {s}:\n{dev.placement_table(limit)}" for s, dev in enumerate(self.stages))

    @property
    def grid(self) -> Any:
        return self.stages[0].grid


def wafer_stats(dev: WaferDevice, first_layer: int, end_layer: int) -> dict[str, float]:
    """One wafer's layers [first_layer, end_layer), SRAM occupancy and modeled time per token."""
    c = dev.counters()
    tokens = c.get("tokens", 0.0) or 1.0
    return {
        "layers": float(end_layer - first_layer),
        "first_layer": float(first_layer),
        "tiles_used": c["tiles_used"],
        "sram_bytes_used": c["sram_bytes_used"],
        "occupancy": c["sram_bytes_used"] / c["sram_bytes_capacity"],
        "weight_bytes": c["weight_bytes"],
        "seconds_per_token": c["cycles"] / tokens / dev.spec.clock_hz,
        "inter_wafer_seconds_per_token": c["cycles.inter_wafer"] / tokens / dev.spec.clock_hz,
    }


def _one(ref: WeightRef) -> tuple[int, WeightRef]:
    payload = ref.payload
    assert isinstance(payload, tuple), f"{ref.name} was not placed on one stage of a multi-wafer device"
    return payload


def _every(ref: WeightRef) -> list[WeightRef]:
    payload = ref.payload
    assert isinstance(payload, list), f"{ref.name} is not on every stage"
    return payload


def _parts(kv: KVRef) -> list[KVRef]:
    payload = kv.payload
    assert isinstance(payload, list), "not a KV cache of a multi-wafer device"
    return payload
