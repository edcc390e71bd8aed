"""Loading a model to run it: a model name or directory, a backend and a weight format in; a `LoadedModel` out.

This is what the server's engine and the command-line tools call. The backend registry (hardware/registry.py) says
which weight formats a backend places and what "auto" means there; the device is opened for that format before the
first tensor is read, so every weight is read and placed once (engine/checkpoint.py streams them in).
"""

from __future__ import annotations

import os
from pathlib import Path

from waferline.engine.checkpoint import LoadedModel, load_model
from waferline.hardware import open_backend

SMALL_MODEL_PARAMS = 50_000_000


def load(model: str | Path | None, *, backend: str = "cpu", weights: str = "auto", seed: int = 0) -> LoadedModel:
    """`model` (a directory, a preset, a shipped model's name; None: the shipped default) on `backend`, its weights
    in format `weights` (a name in hardware/registry.py's WEIGHT_FORMATS, or "auto": the backend's default)."""
    return load_model(model, device=open_backend(backend, weights), seed=seed)


def set_threads(threads: int | None, n_params: int) -> None:
    """Set torch's intra-op threads: `threads` if given, else 1 for a small model, else all cores but one.

    Every parallel kernel ends at an OpenMP barrier, so a step runs at the pace of the slowest thread; when another
    process holds one of the cores (the editor, the language server, a build), that thread's share waits for it.
    Measured on the shared 2-core machines: 2 threads decoded the tiny preset 2-10x slower than 1, and
    Qwen2.5-0.5B 4x slower. A small model's step is hundreds of tiny kernels that gain nothing from a second
    thread anyway; a large model streams weights, which more cores read faster, so it gets all cores but one, the
    one left to the editor.
    """
    import torch

    if threads is None:
        threads = 1 if n_params < SMALL_MODEL_PARAMS else max(1, (os.cpu_count() or 1) - 1)
    if threads < 1:
        raise ValueError(f"--threads must be at least 1, got {threads}")
    torch.set_num_threads(threads)
