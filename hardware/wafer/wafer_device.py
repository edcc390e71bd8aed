"""WaferDevice: the Device protocol on an emulated wafer-scale engine.

Numeric mode computes every operation tile by tile on the real numbers (ops.py, attention.py) and produces the
torch backend's tokens. Analytic mode runs the same engine forward through the same device calls with every slab
and activation on torch's "meta" device: placement, capacity checks and the cost functions (hence the counters) are
the same code, and each operation returns an empty tensor of its result's shape instead of computing it, so a 70B
model on a full wafer is projected in a fraction of a second. Each call adds its cost (cost.py) to the counters;
`report()` turns them into seconds per token and where they go.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import torch
from torch import Tensor

from waferline.hardware.blocks import Weight, dense
from waferline.hardware.device import DecoderPlan, FusedStep, KVRef, Placement, WeightRef
from waferline.hardware.wafer import attention, ops, system
from waferline.hardware.wafer.cost import COUNTER_KEYS, Cost, CostReport, report
from waferline.hardware.wafer.placement import (
    KVLayout,
    MatrixLayout,
    ScratchLayout,
    kv_layout,
    padded_bytes,
    place,
)
from waferline.hardware.wafer.routes import WaferRoutingError, colours, describe
from waferline.hardware.wafer.spec import WaferSpec, get_spec
from waferline.hardware.wafer.tiles import Allocation, Rect, SramGrid, WaferOutOfMemory


class WaferDevice:
    """An emulated wafer. spec: a preset name or WaferSpec; analytic: shapes only; spill: let weights that do not
    fit stream from off-wafer memory (counted at the spec's off-wafer bandwidth) instead of failing; reserve: the
    fraction of every tile's SRAM that weights leave free for KV pages and scratch (default 0, or 0.25 when
    spilling, since spilled weights would otherwise take every byte)."""

    def __init__(
        self,
        *,
        dtype: torch.dtype = torch.float32,
        spec: str | WaferSpec = "mini-32x32",
        analytic: bool = False,
        spill: bool = False,
        reserve: float | None = None,
    ) -> None:
        self.spec = get_spec(spec)
        if spill:
            self.spec = self.spec.with_spill()
        self.reserve = (0.25 if spill else 0.0) if reserve is None else reserve
        assert 0.0 <= self.reserve < 1.0, f"reserve is a fraction of a tile's SRAM, got {self.reserve}"
        self.name = "wafer"
        self.dtype = dtype
        self.analytic = analytic
        # A T-row call's batched products and tree sums need not round as T one-token calls do (a few 1e-6 apart in
        # float32): rows are not exact, so a speculative draft is verified in one k-token step (hardware/device.py).
        self.exact_rows = False
        self.torch_device = torch.device("meta" if analytic else "cpu")
        self.grid = SramGrid(self.spec, self.torch_device)
        self._counts: defaultdict[str, float] = defaultdict(float)  # tokens, steps and per-operation counters
        self._totals = np.zeros(len(COUNTER_KEYS))  # the cost model's counters, in COUNTER_KEYS order
        self._routes: dict[tuple[str, int], int] = {}  # collective pattern -> colours it holds on a router
        self._overflow: list[tuple[str, int]] = []  # tensors that fit nowhere: (name, bytes they need)
        self._scratch: Allocation | None = None
        self._next_kv = 0
        self._rope_rows: tuple[str, int, int] | None = None  # which cos/sin rows the root column holds

    # -- placement ---------------------------------------------------------------------------------------------------
    def place(self, name: str, weight: Weight, *, role: str = "linear") -> WeightRef:
        weight = dense(weight)  # GGUF blocks: the emulator places float weights
        spill_ok = self.spec.off_wafer_capacity_bytes > self.grid.spilled_bytes
        limit = int(self.spec.sram_bytes_per_tile * (1 - self.reserve))
        alloc = place(self.grid, name, weight, role, dtype=self.dtype, spill_ok=spill_ok, limit=limit)
        if alloc is None:
            elem = ops.elem_size(self.dtype)
            self._overflow.append((name, padded_bytes(role, tuple(weight.shape), self.spec.rows, self.spec.cols, elem)))
        return WeightRef(name=name, shape=tuple(weight.shape), dtype=self.dtype, payload=alloc)

    def check_fits(self) -> None:
        """Raise WaferOutOfMemory, naming the tiles the model needs, if any placed tensor found no room."""
        if not self._overflow:
            return
        need = self.grid.bytes_used + sum(b for _, b in self._overflow)
        tiles = math.ceil(need / self.spec.sram_bytes_per_tile)
        raise WaferOutOfMemory(
            f"the model does not fit on {self.spec.name}: it needs {need:,} bytes of SRAM (padding included), "
            f"at least {tiles:,} tiles of {self.spec.sram_bytes_per_tile:,} B, but the wafer has {self.spec.tiles:,} "
            f"tiles ({self.spec.sram_bytes:,} B); {len(self._overflow)} tensors found no room, the first "
            f"{self._overflow[0][0]!r}. Use a larger wafer, a 16-bit dtype, or allow off-wafer spill"
        )

    # -- KV pages ----------------------------------------------------------------------------------------------------
    def kv_open(self, layers: int, kv_heads: int, head_dim: int, max_tokens: int) -> KVRef:
        self.check_fits()
        self._ensure_scratch()
        lay = kv_layout(layers, kv_heads, head_dim, max_tokens, self.spec.rows, self.spec.cols)
        name = f"kv{self._next_kv}"
        self._next_kv += 1
        payload = 2 * layers * kv_heads * head_dim * max_tokens * ops.elem_size(self.dtype)
        alloc = self.grid.allocate(name, "kv", (lay.rows, lay.cols), lay.tile_shape, self.dtype, payload, layout=lay)
        if alloc is None:
            per_tile = math.prod(lay.tile_shape) * ops.elem_size(self.dtype)
            free = self.spec.sram_bytes_per_tile - self.grid.usage.max_bytes(Rect(0, 0, lay.rows, lay.cols))
            raise WaferOutOfMemory(
                f"a KV cache of {max_tokens:,} tokens needs {per_tile:,} B in each of {lay.rows}x{lay.cols} tiles, "
                f"but the fullest of them has {free:,} B free on {self.spec.name}; open a shorter cache"
            )
        alloc.slab = torch.zeros(lay.slab_shape, dtype=self.dtype, device=self.torch_device)
        return KVRef(
            layers=layers, kv_heads=kv_heads, head_dim=head_dim, max_tokens=max_tokens, payload=alloc, dtype=self.dtype
        )

    def kv_truncate(self, kv: KVRef, length: int) -> None:
        assert 0 <= length <= kv.length, f"truncate to {length} but the cache holds {kv.length}"
        kv.length = length  # positions past `length` are overwritten before they are read again

    def kv_advance(self, kv: KVRef, length: int) -> None:
        assert kv.length <= length <= kv.max_tokens, f"advance to {length} outside [{kv.length}, {kv.max_tokens}]"
        self._counts["tokens"] += length - kv.length
        self._counts["steps"] += 1
        kv.length = length

    def kv_close(self, kv: KVRef) -> None:
        if isinstance(kv.payload, Allocation) and kv.payload in self.grid.table:
            self.grid.free(kv.payload)
        kv.payload = None
        kv.length = 0

    def _ensure_scratch(self) -> None:
        """Reserve working space for one decode token on every tile that holds matrix blocks (their bounding box):
        the largest input chunk plus output block of any matrix."""
        if self._scratch is not None:
            return
        blocks = [a for a in self.grid.table if isinstance(a.layout, MatrixLayout) and a.rect is not None]
        if not blocks:
            return
        elems = max(a.layout.bi + a.layout.bo for a in blocks if isinstance(a.layout, MatrixLayout))
        r0 = min(a.rect.row0 for a in blocks if a.rect)
        c0 = min(a.rect.col0 for a in blocks if a.rect)
        r1 = max(a.rect.row0 + a.rect.rows for a in blocks if a.rect)
        c1 = max(a.rect.col0 + a.rect.cols for a in blocks if a.rect)
        lay = ScratchLayout(r1 - r0, c1 - c0, elems)
        alloc = self.grid.allocate(
            "scratch", "scratch", (lay.rows, lay.cols), lay.tile_shape, self.dtype, 0, layout=lay, origin=(r0, c0)
        )
        if alloc is None:
            raise WaferOutOfMemory(f"the tiles of {self.spec.name} holding weights lack {elems} elements for scratch")
        alloc.slab = torch.empty(lay.slab_shape, dtype=self.dtype, device=self.torch_device)
        self._scratch = alloc

    # -- per-step operations -----------------------------------------------------------------------------------------
    def embed(self, table: WeightRef, tokens: Tensor) -> Tensor:
        self.check_fits()
        alloc = _alloc(table)
        lay = _matrix(alloc)
        self._charge("host_io", system.tokens_in(self.spec, self.dtype, tokens.shape[0]))
        self._charge("embed", ops.gather_cost(self.spec, self.dtype, lay, tokens.shape[0], 1, alloc.spilled))
        if self.analytic:
            return self._shaped(tokens.shape[0], lay.in_features)
        return ops.embed(alloc, tokens)

    def rms_norm(self, x: Tensor, weight: WeightRef, eps: float) -> Tensor:
        self._charge("rms_norm", ops.rms_norm_cost(self.spec, self.dtype, x.shape[-1], x.shape[0]))
        if self.analytic:
            return self._shaped(*x.shape)
        return ops.rms_norm(x, _alloc(weight), eps)

    def linear(self, x: Tensor, weight: WeightRef, bias: WeightRef | None = None) -> Tensor:
        w = _alloc(weight)
        b = _alloc(bias) if bias is not None else None
        lay = _matrix(w)
        self._charge("linear", ops.linear_cost(self.spec, self.dtype, lay, x.shape[0], b is not None, w.spilled))
        if w.name == "lm_head":  # the logits go to the host, which samples
            self._charge("host_io", system.logits_out(self.spec, self.dtype, x.shape[0], lay.out_features))
        if self.analytic:
            return self._shaped(x.shape[0], lay.out_features)
        return ops.linear(w, x, b)

    def rotary(self, x: Tensor, cos: WeightRef, sin: WeightRef, start: int) -> Tensor:
        c, s = _alloc(cos), _alloc(sin)
        T, heads, d = x.shape
        fetch = self._rope_rows != (c.name, start, T)  # cos/sin rows already on the root column for these positions?
        self._rope_rows = (c.name, start, T)
        self._charge("rotary", ops.rotary_cost(self.spec, self.dtype, _matrix(c), T, heads * d, c.spilled, fetch))
        if self.analytic:
            return self._shaped(*x.shape)
        return ops.rotary(x, c, s, start)

    def attend(self, kv: KVRef, layer: int, q: Tensor, k: Tensor, v: Tensor, start: int) -> Tensor:
        T, heads, _ = q.shape
        assert start + T <= kv.max_tokens, f"position {start + T} past the cache's {kv.max_tokens} tokens"
        alloc = _alloc(kv)
        lay = alloc.layout
        assert isinstance(lay, KVLayout), "not a KV cache of this device"
        cost = attention.attend_cost(self.spec, self.dtype, lay, heads, T, lay.live_slots(start + T))
        self._charge("attend", cost)
        if self.analytic:
            return self._shaped(T, heads * q.shape[2])
        keys, values = attention.kv_tensors(alloc, layer)
        attention.write(lay, keys, values, k, v, start)
        return attention.attend(lay, keys, values, q, start)

    def swiglu(self, gate: Tensor, up: Tensor) -> Tensor:
        n, T = gate.shape[-1], gate.shape[0]
        self._charge("swiglu", ops.elementwise_cost(self.spec, self.dtype, n, T, ops.SWIGLU_OPS))
        if self.analytic:
            return self._shaped(*gate.shape)
        return torch.nn.functional.silu(gate) * up

    def add(self, x: Tensor, y: Tensor) -> Tensor:
        self._charge("add", ops.elementwise_cost(self.spec, self.dtype, x.shape[-1], x.shape[0], 1))
        if self.analytic:
            return self._shaped(*x.shape)
        return x + y

    def _shaped(self, *shape: int) -> Tensor:
        """Analytic mode's result: the shape the operation would produce, on "meta", nothing computed."""
        return torch.empty(shape, dtype=self.dtype, device=self.torch_device)

    # -- accounting --------------------------------------------------------------------------------------------------
    def charge(self, op: str, cost: Cost) -> None:
        """Add a cost the device did not compute itself (a transfer into this wafer from another, multi.py)."""
        self._charge(op, cost)

    def _charge(self, op: str, cost: Cost) -> None:
        self._totals += cost.vector
        self._routes.update(cost.routes)
        counts = self._counts
        counts[f"op.{op}.cycles"] += cost.counts["cycles"]
        counts[f"op.{op}.calls"] += 1
        counts["ops"] += 1

    def routes(self) -> dict[tuple[str, int], int]:
        """The collective patterns configured so far: (kind, span) -> colours (tree levels) on a router."""
        return dict(self._routes)

    def check_routes(self) -> None:
        """Raise WaferRoutingError if the patterns configured so far need more colours than a router holds."""
        need = colours(self._routes)
        if need > self.spec.routes_per_tile:
            raise WaferRoutingError(
                f"the program needs {need} routing colours per router on {self.spec.name}, which has "
                f"{self.spec.routes_per_tile}: {describe(self._routes)}; run it on a plan that merges patterns "
                f"(routes.fit_routes, spec.route_merge)"
            )

    def fuse_decoder(self, plan: DecoderPlan) -> FusedStep | None:
        return None  # the emulator's point is to run and count each operation tile by tile

    def placement(self) -> Placement:
        weight_bytes = sum(a.payload_bytes for a in self.grid.table if a.kind == "weight")
        return Placement(weights=str(self.dtype).removeprefix("torch."), dtype=self.dtype, weight_bytes=weight_bytes)

    def counters(self) -> dict[str, float]:
        """Accumulated costs since the last reset, plus the memory state (tiles and bytes in use now)."""
        g = self.grid
        kv = [a for a in g.table if a.kind == "kv"]
        weights = [a for a in g.table if a.kind == "weight"]
        state = {
            "tiles": float(self.spec.tiles),
            "tiles_used": float(g.tiles_used),
            "sram_bytes_used": float(g.bytes_used),
            "sram_bytes_capacity": float(self.spec.sram_bytes),
            "max_tile_bytes": float(g.max_tile_bytes),
            "weight_bytes": float(sum(a.payload_bytes for a in weights)),
            "weight_bytes_on_wafer": float(sum(a.total_bytes for a in weights if not a.spilled)),
            "spilled_bytes": float(g.spilled_bytes),
            "kv_bytes_reserved": float(sum(a.total_bytes for a in kv)),
            "scratch_bytes": float(self._scratch.total_bytes if self._scratch else 0),
            "routes_per_tile": float(sum(self._routes.values())),
            "routes_available": float(self.spec.routes_per_tile),
        }
        totals = dict(zip(COUNTER_KEYS, self._totals.tolist(), strict=True))
        return {**totals, **self._counts, **state}

    def reset_counters(self) -> None:
        self._counts = defaultdict(float)
        self._totals = np.zeros(len(COUNTER_KEYS))

    def report(self, tokens: float | None = None) -> CostReport:
        return report(self.spec, self.counters(), tokens)

    def placement_table(self, limit: int | None = None) -> str:
        return self.grid.format_table(limit)


def _alloc(ref: WeightRef | KVRef) -> Allocation:
    alloc = ref.payload
    assert isinstance(alloc, Allocation), f"{getattr(ref, 'name', 'KV cache')} was not placed on a wafer device"
    return alloc


def _matrix(alloc: Allocation) -> MatrixLayout:
    lay = alloc.layout
    assert isinstance(lay, MatrixLayout), f"{alloc.name} is not a matrix"
    return lay
