"""Load a model for running it: `load` takes the command line's dtype names (int8 = int8 weights), `set_threads`
picks torch's intra-op threads for the model's size. Used by the language server's model adapter and the commands.
"""

from __future__ import annotations

from typing import Any


def load(model: str | None, *, backend: str, dtype: str) -> Any:
    """load_model with the CLI's dtype names: "int8" is int8 weights with bfloat16 activations (torch backend).

    load_model takes no device options yet, so int8 loads the model in bfloat16 for its tokenizer and metadata,
    then places the same weights (the preset's seeded tensors, or the checkpoint's, streamed again) on an int8
    torch device.
    """
    import dataclasses

    from waferline.engine.checkpoint import load_model
    from waferline.engine.model import Transformer, iter_random
    from waferline.engine.weights import stream_tensors, weight_shards
    from waferline.hardware import open_device

    if dtype != "int8":
        return load_model(model, backend=backend, dtype=dtype)
    if backend not in ("cpu", "cuda"):
        raise ValueError(f"--dtype int8 is a torch backend weight format (cpu, cuda), not one of {backend!r}")
    import torch

    loaded = load_model(model, backend=backend, dtype="bfloat16")
    source = iter_random(loaded.args) if loaded.path is None else stream_tensors(weight_shards(loaded.path))
    int8 = Transformer(loaded.args, open_device(backend, dtype=torch.bfloat16, weights="int8"))
    int8.load(source)
    return dataclasses.replace(loaded, model=int8)


SMALL_MODEL_PARAMS = 50_000_000


def set_threads(threads: int | None, n_params: int) -> None:
    """Set torch's intra-op threads: `threads` if given, else 1 for a small model, else all cores but one.

    Every parallel kernel ends at an OpenMP barrier, so a step runs at the pace of the slowest thread; when another
    process holds one of the cores (the editor, the language server, a build), that thread's share waits for it.
    Measured on the shared 2-core machines: 2 threads decoded the tiny preset 2-10x slower than 1, and
    Qwen2.5-0.5B 4x slower. A small model's step is hundreds of tiny kernels that gain nothing from a second
    thread anyway; a large model streams weights, which more cores read faster, so it gets all cores but one, the
    one left to the editor.
    """
    import os

    import torch

    if threads is None:
        threads = 1 if n_params < SMALL_MODEL_PARAMS else max(1, (os.cpu_count() or 1) - 1)
    if threads < 1:
        raise ValueError(f"--threads must be at least 1, got {threads}")
    torch.set_num_threads(threads)
