"""A picture of the wafer: every tile's SRAM coloured by what it holds, and where a token's time goes.

Left: the tile grid. Each tile is drawn as a small column whose height is its SRAM, filled from the bottom with
what it holds: the embedding, each layer's weights (a colour per layer), the LM head, KV pages, scratch; the rest
is free. Grids larger than 32 tiles a side show every n-th tile. Right: seconds per token
by category (compute, SRAM, fabric, off-wafer) and by operation.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from waferline.hardware.wafer.cost import CATEGORIES, CostReport
from waferline.hardware.wafer.tiles import SramGrid

PIXELS_PER_TILE = 24  # each pixel of a tile's column stands for 1/24 of its SRAM (2 kB of 48 kB)
CELL_WIDTH = 3  # pixels across one tile (cells come out about square at the figure's size)
MAX_SIDE = 32  # tiles shown per axis
FIXED = {"free": "#f4f4f4", "kv": "#d62728", "scratch": "#ff7f0e", "embedding": "#9467bd", "lm_head": "#e377c2",
         "rope": "#7f7f7f", "other": "#c7c7c7", "gap": "#ffffff"}  # fmt: skip


def owner(name: str) -> str:
    """The group an allocation's name belongs to: 'layer N', or one of FIXED's keys."""
    m = re.match(r"layers\.(\d+)\.", name)
    if m:
        return f"layer {m.group(1)}"
    if name.startswith("kv"):
        return "kv"
    if name.startswith("rope"):
        return "rope"
    return name if name in FIXED else "other"


def memory_map(grid: SramGrid) -> tuple[np.ndarray, list[str], int]:
    """An image of group ids: each shown tile a CELL_WIDTH x PIXELS_PER_TILE cell whose height is its SRAM, filled
    from the bottom with the bytes it holds, group by group (embedding, layers in order, LM head, other tensors, KV,
    scratch), the rest free; cells are separated by 'gap' lines. Also returns the group names and the stride
    between shown tiles. (Allocations keep one offset across their rectangle, so a tile can have holes between
    them; the picture stacks what a tile holds and shows the holes as free at the top.)"""
    spec = grid.spec
    stride = max(1, -(-max(spec.rows, spec.cols) // MAX_SIDE))
    rows, cols = np.arange(0, spec.rows, stride), np.arange(0, spec.cols, stride)
    layers = sorted({owner(a.name) for a in grid.table if owner(a.name).startswith("layer")}, key=lambda s: int(s[6:]))
    names = [*FIXED, *layers]
    stack = ["embedding", *layers, "lm_head", "rope", "other", "kv", "scratch"]  # bottom to top
    order = {n: i for i, n in enumerate(stack)}
    held = np.zeros((len(rows), len(cols), len(stack)), dtype=np.float64)  # bytes per shown tile per group
    for a in grid.table:
        if a.rect is None:
            continue
        inside_r = (rows >= a.rect.row0) & (rows < a.rect.row0 + a.rect.rows)
        inside_c = (cols >= a.rect.col0) & (cols < a.rect.col0 + a.rect.cols)
        held[np.ix_(inside_r, inside_c, np.array([order[owner(a.name)]]))] += a.bytes_per_tile
    px = PIXELS_PER_TILE
    centres = (np.arange(px) + 0.5) * spec.sram_bytes_per_tile / px  # the byte each pixel stands for
    level = (held.cumsum(-1)[..., None] <= centres).sum(-2)  # (rows, cols, px): index into stack, len(stack) = free
    ids = np.array([names.index(n) for n in stack] + [names.index("free")])[level][:, :, ::-1]  # offset 0 at bottom
    h, w = px + 1, CELL_WIDTH + 1
    image = np.full((len(rows) * h, len(cols) * w), names.index("gap"), dtype=np.int32)
    for i in range(len(rows)):
        for j in range(len(cols)):
            image[i * h : i * h + px, j * w : j * w + CELL_WIDTH] = ids[i, j][:, None]
    return image, names, stride


def save_plot(grid: SramGrid, report: CostReport, path: str | Path, title: str) -> None:
    """Write the picture as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    image, names, stride = memory_map(grid)
    layers = [n for n in names if n.startswith("layer")]
    layer_colours = [plt.get_cmap("viridis")(i / max(1, len(layers) - 1)) for i in range(len(layers))]
    colours = [FIXED[n] for n in FIXED] + layer_colours
    fig = plt.figure(figsize=(16, 10), layout="constrained")
    fig.suptitle(f"{title}: {report.tok_s:,.0f} tokens/s modeled ({report.seconds_per_token * 1e6:.1f} µs/token)")
    panels = fig.add_gridspec(2, 2, width_ratios=[1.15, 1])
    grid_ax = fig.add_subplot(panels[:, 0])
    grid_ax.imshow(image, cmap=ListedColormap(colours), vmin=0, vmax=len(names) - 1, aspect="auto",
                   interpolation="nearest")  # fmt: skip
    h, w = PIXELS_PER_TILE + 1, CELL_WIDTH + 1
    shown_rows, shown_cols = image.shape[0] // h, image.shape[1] // w
    step_r, step_c = max(1, shown_rows // 8), max(1, shown_cols // 8)
    grid_ax.set_yticks([(r + 0.5) * h for r in range(0, shown_rows, step_r)])
    grid_ax.set_yticklabels([str(r * stride) for r in range(0, shown_rows, step_r)])
    grid_ax.set_xticks([(c + 0.5) * w for c in range(0, shown_cols, step_c)])
    grid_ax.set_xticklabels([str(c * stride) for c in range(0, shown_cols, step_c)])
    every = f", every {stride}th tile shown" if stride > 1 else ""
    grid_ax.set_xlabel(f"tile column{every}")
    grid_ax.set_ylabel("tile row")
    spec = grid.spec
    grid_ax.set_title(
        f"{spec.name}: {spec.rows}x{spec.cols} tiles; each cell is one tile's {spec.sram_bytes_per_tile // 1024} kB "
        "of SRAM, filled from the bottom",
        fontsize=9,
    )
    present = set(np.unique(image).tolist())
    legend = [
        Patch(facecolor=FIXED[n], edgecolor="#888888", label=n)
        for n in FIXED
        if n != "gap" and names.index(n) in present
    ]
    if layers:
        legend += [
            Patch(facecolor=layer_colours[0], label=layers[0]),
            Patch(facecolor=layer_colours[-1], label=layers[-1]),
        ]
    grid_ax.legend(
        handles=legend, loc="upper center", bbox_to_anchor=(0.5, -0.07), ncol=min(len(legend), 8), fontsize=8
    )

    us = 1e6
    cat_ax = fig.add_subplot(panels[0, 1])
    values = [report.breakdown.get(k, 0.0) * us for k in CATEGORIES]
    bars = cat_ax.bar(CATEGORIES, values, color=["#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#17becf", "#bcbd22"])
    cat_ax.bar_label(bars, fmt="%.2f", fontsize=8)
    cat_ax.set_ylabel("µs per token")
    cat_ax.set_title("where a token's time goes", fontsize=10)
    op_ax = fig.add_subplot(panels[1, 1])
    ops = sorted(report.by_op.items(), key=lambda kv: kv[1])
    op_bars = op_ax.barh([k for k, _ in ops], [v * us for _, v in ops], color="#7f7f7f")
    op_ax.bar_label(op_bars, fmt="%.2f", fontsize=8)
    op_ax.set_xlabel("µs per token, by operation")
    fig.savefig(path, dpi=110)  # the grid panel gets ~1 screen pixel per image pixel: no rows dropped
    plt.close(fig)
