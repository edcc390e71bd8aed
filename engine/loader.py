"""Loading a model to run it: a model name or directory, a backend and a weight format in; a `LoadedModel` out.

This is what the server's engine and the command-line tools call. The backend registry (hardware/registry.py) says
which weight formats a backend places and what "auto" means there; the device is opened for that format before the
first tensor is read, so every weight is read and placed once (engine/checkpoint.py streams them in).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from waferline.engine.checkpoint import LoadedModel, load_model
from waferline.hardware import open_backend

SMALL_MODEL_PARAMS = 50_000_000


def load(model: str | Path | None, *, backend: str = "cpu", weights: str = "auto", seed: int = 0) -> LoadedModel:
    """`model` (a directory, a preset, a shipped model's name; None: the shipped default) on `backend`, its weights
    in format `weights` (a name in hardware/registry.py's WEIGHT_FORMATS, or "auto": the backend's default)."""
    return load_model(model, device=open_backend(backend, weights), seed=seed)


def set_threads(threads: int | None, n_params: int, model: Any = None) -> None:
    """Set torch's intra-op threads: `threads` if given, else 1 for a small model, else all cores but one; and, for
    `model`'s fused step, its own threads (so that a second model loaded into the process, the chat model beside the
    one that types, leaves the first one's as they were).

    Every parallel kernel ends at an OpenMP barrier, so a step runs at the pace of the slowest thread; when another
    process holds one of the cores (the editor, the language server, a build), that thread's share waits for it.
    Measured on the shared 2-core machines: 2 threads decoded the tiny preset 2-10x slower than 1, and
    Qwen2.5-0.5B 4x slower. A small model's step is hundreds of tiny kernels that gain nothing from a second
    thread anyway; a large model streams weights, which more cores read faster, so it gets all cores but one, the
    one left to the editor. A large model's steps of several tokens (a prompt's chunks, a draft's verification) are
    bound by arithmetic rather than by memory and take every core unless `threads` is given: a burst that the
    editor's core shares for a fraction of a second (SmolLM2-135M Q4_1 prefilled 150 tokens in ~200 ms on 2
    threads against ~330 on 1, docs/benchmarks-decode.md), and the fused step's pool runs alone for a while when
    the other core is busy (fused_pool.c).

    A model whose fused step takes every prompt (int8 or GGUF block weights: `prefill_max` None) leaves torch only
    small ops around its steps (sampling over the vocabulary, a copy of logits), so torch gets 1 thread: on more,
    each such op wakes torch's OpenMP workers, which then spin for a while on the cores the step's own pool needs
    (a SmolLM2 Q4_1 step on 2 threads, sampled at temperature 0.7: most products ran alone after stalls).
    """
    import torch

    one_token = model_threads(threads, n_params, model)
    fused = getattr(model, "fused", None)
    torch.set_num_threads(1 if fused is not None and fused.prefill_max is None else one_token)


def step_threads(model: Any) -> int:
    """The threads `model`'s one-token step runs on: its fused step's own, else torch's (the per-op path)."""
    import torch

    fused = getattr(model, "fused", None)
    return fused.threads_for(1) if fused is not None else torch.get_num_threads()


def model_threads(threads: int | None, n_params: int, model: Any) -> int:
    """`set_threads` for `model`'s fused step alone, torch's threads left as they are (the chat model loaded beside
    the one that types: engine/factory.py); returns the one-token step's threads."""
    if threads is None:
        cores, small = os.cpu_count() or 1, n_params < SMALL_MODEL_PARAMS
        threads, batch = (1, 1) if small else (max(1, cores - 1), cores)
    elif threads < 1:
        raise ValueError(f"--threads must be at least 1, got {threads}")
    else:
        batch = threads
    fused = getattr(model, "fused", None)
    if fused is not None:
        fused.threads, fused.batch_threads = threads, batch
        fused.tune()  # what it times for these threads (the block products' prefetch), now rather than in a request
    return threads
