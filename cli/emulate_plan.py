"""What `waferline emulate` runs: the model (shapes, and weights when there are any) and the machine that holds it.

A model is a directory (its config.json; its weights if present: a directory with only config.json projects in
analytic mode), a preset of engine/model.py (random weights), or a published configuration stored in
hardware/wafer/configs (shapes only). The machine is one or more wafers of one spec: `plan` finds the fewest
wafers whose SRAM holds the model and its cache (or takes the number asked for), then a routing plan whose
collectives fit the routers' colours (hardware/wafer/routes.py), by running the model on shapes alone.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

import torch

from waferline.engine.model import ModelArgs
from waferline.hardware.wafer import WaferDevice, WaferOutOfMemory, WaferSpec
from waferline.hardware.wafer.multi import MultiWaferDevice, wafer_stats
from waferline.hardware.wafer.routes import colours, fit_routes

Tensors = Callable[[], Iterator[tuple[str, torch.Tensor]]]


@dataclass
class Target:
    name: str
    args: ModelArgs
    tensors: Tensors | None  # a fresh stream of Hugging Face-named tensors, or None: shapes only
    source: str  # "directory", "config only", "preset", "published config"


def resolve(model: str | None) -> Target:
    """The model a --model value names (see the module docstring); unsupported shapes fail with the reason."""
    from waferline.engine.checkpoint import args_from_config, resolve_model
    from waferline.engine.hf import iter_random
    from waferline.engine.weights import CheckpointNotFoundError, read_json, stream_tensors, weight_shards
    from waferline.hardware.wafer import configs

    if model is not None and not Path(model).expanduser().exists() and configs.path(model) is not None:
        from waferline.engine.model import PRESETS

        if model not in PRESETS:
            file = configs.path(model)
            assert file is not None
            return Target(model, args_from_config(configs.read(model), file), None, "published config")
    target = resolve_model(model)
    if isinstance(target, str):
        margs = ModelArgs.from_name(target)
        return Target(target, margs, lambda: iter_random(margs, seed=0), "preset")
    margs = args_from_config(read_json(target / "config.json"), target / "config.json")
    try:
        shards = weight_shards(target)
    except CheckpointNotFoundError:
        return Target(target.resolve().name, margs, None, "config only")
    return Target(target.resolve().name, margs, lambda: stream_tensors(shards), "directory")


WaferMachine: TypeAlias = WaferDevice | MultiWaferDevice


def make_device(
    spec: WaferSpec, wafers: int, margs: ModelArgs, dtype: torch.dtype, analytic: bool, spill: bool, positions: int
) -> WaferMachine:
    """One wafer or a pipeline of them. When spilling, weights leave each tile room for a cache of `positions`
    (over min(rows, positions) tile rows, as placement.kv_layout spreads it) and the decode scratch, at least the
    device's default quarter."""
    reserve = None
    if spill:
        elem = torch.empty((), dtype=dtype).element_size()
        kv = 2 * margs.n_layers * margs.n_kv_heads * margs.head_dim * positions * elem / wafers
        per_tile = kv / (min(spec.rows, positions) * spec.cols) + 4 * margs.intermediate_size * elem / spec.cols
        reserve = min(0.9, max(0.25, 1.25 * per_tile / spec.sram_bytes_per_tile))
    if wafers == 1:
        return WaferDevice(dtype=dtype, spec=spec, analytic=analytic, spill=spill, reserve=reserve)
    return MultiWaferDevice(
        wafers=wafers, n_layers=margs.n_layers, dtype=dtype, spec=spec, analytic=analytic, spill=spill, reserve=reserve
    )


def project(device: WaferMachine, margs: ModelArgs, context: int) -> None:
    """Shapes only: place the model, prefill `context` positions, reset the counters, decode one token."""
    from waferline.engine.hf import from_hf, iter_meta
    from waferline.engine.model import Transformer

    model = Transformer(margs, device)
    model.load(from_hf(margs, iter_meta(margs)))
    kv = model.open_cache(context + 1)
    model.forward(torch.zeros(context, dtype=torch.long), kv, 0)
    device.reset_counters()
    model.forward(torch.zeros(1, dtype=torch.long), kv, context)


@dataclass
class Plan:
    spec: WaferSpec  # with the routing plan (route_merge) applied
    wafers: int
    colours_unmerged: int  # colours the collectives would configure without merging
    device: WaferMachine  # the analytic projection on this plan, already run
    spill: bool  # weights that do not fit stream from off-wafer memory (asked for, or the only way to run)


def plan(
    margs: ModelArgs, spec: WaferSpec, dtype: torch.dtype, context: int, *, wafers: int | None, spill: bool
) -> Plan:
    """The fewest wafers that hold the model and a cache of context + 1 positions (or exactly `wafers`), and a
    routing plan that fits; returns the analytic projection made on that plan."""
    elem = torch.empty((), dtype=dtype).element_size()
    if wafers is None and not spill and not _one_wafer_holds_the_largest_tensor(margs, spec, elem):
        spill = True  # no pipeline can split one tensor: the default streams what does not fit instead
    if wafers is not None:
        counts = [wafers]
    elif spill:
        counts = [1]
    else:
        first = max(1, math.ceil(margs.n_params * elem / spec.sram_bytes))
        counts = list(range(min(first, margs.n_layers), margs.n_layers + 1))
    if wafers is not None and not 1 <= wafers <= margs.n_layers:
        raise ValueError(f"--wafers {wafers}: a pipeline of {margs.n_layers} layers takes 1 to {margs.n_layers} wafers")
    for i, n in enumerate(counts):
        device = make_device(spec, n, margs, dtype, True, spill, context + 1)
        try:
            project(device, margs, context)
        except WaferOutOfMemory as e:
            if i == len(counts) - 1:
                more = "" if n == margs.n_layers else " or more wafers (--wafers)"
                raise WaferOutOfMemory(f"{e}{more}") from None
            continue
        need = colours(device.routes())
        if need <= spec.routes_per_tile:
            return Plan(spec, n, need, device, spill)
        merged = dataclasses.replace(spec, route_merge=fit_routes(device.routes(), spec.routes_per_tile))
        device = make_device(merged, n, margs, dtype, True, spill, context + 1)
        project(device, margs, context)
        device.check_routes()
        return Plan(merged, n, need, device, spill)
    raise AssertionError("unreachable: the last count raises or returns")


def _one_wafer_holds_the_largest_tensor(margs: ModelArgs, spec: WaferSpec, elem: int) -> bool:
    """Whether the embedding (or the LM head) and the rotary tables fit one wafer: a stage takes whole tensors."""
    from waferline.hardware.wafer.placement import padded_bytes

    table = padded_bytes("embedding", (margs.vocab_size, margs.dim), spec.rows, spec.cols, elem)
    rope = 2 * padded_bytes("table", (margs.max_seq_len, margs.head_dim // 2), spec.rows, spec.cols, elem)
    return table + rope < spec.sram_bytes


def per_wafer(device: WaferMachine, n_layers: int) -> list[dict[str, Any]]:
    """Occupancy and time per wafer (one entry on a single wafer)."""
    if isinstance(device, MultiWaferDevice):
        return device.wafer_stats()
    return [wafer_stats(device, 0, n_layers)]
