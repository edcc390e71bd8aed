"""What a deployed system pays beyond the wafer's own arithmetic and collectives: its I/O.

A wafer sits in a system (CS-2, CS-3) whose only way out is its system I/O, 12 x 100 Gb Ethernet = 150 GB/s
([CS2-DS], [CS3-DS] "1.2 Tb/s"); the host and other systems are one Ethernet hop away. Two terms use it:
- `host_io`: every forward step takes its token ids in from the host and returns its logits to the host, which
  samples the next token (the logits: tokens x vocab x element bytes). Besides the bytes over the system I/O and
  one hop's latency, the logits leave the root column (where the LM head's reduction ends) for the wafer's edge,
  where the I/O attaches: a move of half the grid's width, charged as fabric.
- `inter_wafer`: with layers over several wafers (multi.py), the residual stream (tokens x dim) crosses from one
  wafer to the next at each stage boundary: to the sending wafer's edge, over the link, and from the receiving
  wafer's edge to its root column.
The link latency is an assumption (no figure is published for the systems' Ethernet path;
docs/wafer-validation.md).
"""

from __future__ import annotations

import functools
import math

import torch

from waferline.hardware.wafer.collectives import move, root
from waferline.hardware.wafer.cost import Cost, phase, tally
from waferline.hardware.wafer.ops import elem_size
from waferline.hardware.wafer.placement import vector_layout
from waferline.hardware.wafer.spec import WaferSpec

TOKEN_ID_BYTES = 4  # an int32 token id per position, host -> wafer


@functools.lru_cache(maxsize=1024)
def io_cost(spec: WaferSpec, dtype: torch.dtype, category: str, nbytes: int, edge_elems: int, edge_moves: int) -> Cost:
    """`nbytes` over the system I/O (bandwidth plus one hop's latency) under `category`, after `edge_moves` moves
    of a vector of `edge_elems` between the root column and the wafer's edge."""
    assert category in ("host_io", "inter_wafer"), category
    e = elem_size(dtype)
    phases = []
    if edge_elems:
        lay = vector_layout(edge_elems, spec.rows)
        for i in range(edge_moves):
            phases.append(phase(f"edge{i}", move(spec, root(spec.cols), lay.vr, lay.vb, e)))
    cost = tally(spec, dtype, phases)
    counts = dict(cost.counts)
    cycles = math.ceil((nbytes / spec.system_io_bytes_per_s + spec.system_link_latency_s) * spec.clock_hz)
    counts[f"cycles.{category}"] += cycles
    counts["cycles"] += cycles
    counts[f"{category}_bytes"] += nbytes
    if category == "inter_wafer":
        counts["inter_wafer_transfers"] += 1
    return Cost(counts, cost.routes)


def tokens_in(spec: WaferSpec, dtype: torch.dtype, tokens: int) -> Cost:
    """The token ids of one forward step, host -> wafer (they go straight to the embedding's tiles)."""
    return io_cost(spec, dtype, "host_io", tokens * TOKEN_ID_BYTES, 0, 0)


def logits_out(spec: WaferSpec, dtype: torch.dtype, tokens: int, vocab: int) -> Cost:
    """The logits of one forward step, root column -> edge -> host."""
    return io_cost(spec, dtype, "host_io", tokens * vocab * elem_size(dtype), tokens * vocab, 1)


def stage_transfer(spec: WaferSpec, dtype: torch.dtype, tokens: int, dim: int) -> Cost:
    """The residual stream from one wafer's root column to the next wafer's."""
    return io_cost(spec, dtype, "inter_wafer", tokens * dim * elem_size(dtype), tokens * dim, 2)
