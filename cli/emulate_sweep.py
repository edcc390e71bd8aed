"""`waferline emulate --sweep [FILE.png]`: analytic projections over one variable at a time, as a table and a plot.

Three sweeps around the chosen model and wafer, each varying one thing and keeping the rest:
- grid side: square grids of the wafer's own tiles, 240 to 720 tiles a side (the range WaferLLM sweeps its grid
  over on WSE-2), each with as many wafers as the model needs;
- all-reduce group count: the number of first-level groups of every two-level tree (spec.tree_groups; 0 is the
  emulator's choice, the fewest steps), on the chosen wafer;
- context: the decode position, 128 to 8192 (as far as the model's positions allow).
Each point is one analytic projection (cli/emulate_plan.py), so it takes a second or so for an 8B model.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import Any

import torch

GRID_SIDES = (240, 360, 480, 600, 720)
GROUP_COUNTS = (1, 2, 4, 8, 16, 32, 64, 0)
CONTEXTS = (128, 512, 1024, 2048, 4096, 8192)


def point(target: Any, spec: Any, dtype: torch.dtype, context: int, wafers: int | None) -> dict[str, Any]:
    from waferline.cli.emulate_plan import plan

    planned = plan(target.args, spec, dtype, context, wafers=wafers, spill=False)
    report = planned.device.report()
    return {
        "tok_s": report.tok_s,
        "us_per_token": report.seconds_per_token * 1e6,
        "fabric_us": report.breakdown["fabric"] * 1e6,
        "wafers": planned.wafers,
        "colours": int(planned.device.counters()["routes_per_tile"]),
    }


def run_sweep(target: Any, spec: Any, dtype: torch.dtype, context: int, wafers: int | None) -> dict[str, list]:
    """Every point of the three sweeps: {"grid side": [...], "all-reduce groups": [...], "context": [...]}."""
    out: dict[str, list] = {"grid side": [], "all-reduce groups": [], "context": []}
    for side in GRID_SIDES:
        grid = dataclasses.replace(spec, name=f"{spec.name}-{side}x{side}", rows=side, cols=side)
        out["grid side"].append({"value": side, **point(target, grid, dtype, context, None)})
    for groups in GROUP_COUNTS:
        grouped = dataclasses.replace(spec, tree_groups=groups)
        out["all-reduce groups"].append({"value": groups, **point(target, grouped, dtype, context, wafers)})
    for ctx in CONTEXTS:
        if ctx + 1 <= target.args.max_seq_len:
            out["context"].append({"value": ctx, **point(target, spec, dtype, ctx, wafers)})
    return out


def table(name: str, spec: Any, context: int, points: dict[str, list]) -> str:
    lines = [f"sweep of {name} on {spec.name} (analytic; context {context} unless swept)"]
    for variable, rows in points.items():
        lines.append(f"  {variable:>18} {'tok/s':>9} {'µs/token':>9} {'fabric µs':>9} {'wafers':>6} {'colours':>7}")
        for r in rows:
            value = "fewest steps" if variable == "all-reduce groups" and r["value"] == 0 else str(r["value"])
            lines.append(
                f"  {value:>18} {r['tok_s']:>9,.0f} {r['us_per_token']:>9.1f} {r['fabric_us']:>9.1f} "
                f"{r['wafers']:>6} {r['colours']:>7}"
            )
    return "\n".join(lines)


def save_plot(path: str | Path, title: str, points: dict[str, list]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(points), figsize=(4.2 * len(points), 3.6), constrained_layout=True)
    for ax, (variable, rows) in zip(axes, points.items(), strict=True):
        rows = [r for r in rows if r["value"] != 0] if variable == "all-reduce groups" else rows
        ax.plot([r["value"] for r in rows], [r["tok_s"] for r in rows], marker="o")
        if variable != "grid side":
            ax.set_xscale("log", base=2)
        ax.set_xlabel(variable)
        ax.set_ylabel("modeled tokens/s")
        ax.grid(True, alpha=0.3)
    fig.suptitle(title, fontsize=10)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def sweep(args: argparse.Namespace, target: Any, spec: Any, dtype: torch.dtype) -> int:
    margs = target.args
    context = args.context if args.context is not None else min(1024, margs.max_seq_len - 1)
    points = run_sweep(target, spec, dtype, context, args.wafers)
    save_plot(args.sweep, f"{target.name} on {spec.name}: modeled single-stream decode", points)
    if args.json:
        print(json.dumps({"model": target.name, "wafer": spec.name, "context": context, "sweep": points,
                          "plot": str(args.sweep)}, indent=2))  # fmt: skip
    else:
        print(table(target.name, spec, context, points))
        print(f"  plot: {args.sweep}")
    return 0
