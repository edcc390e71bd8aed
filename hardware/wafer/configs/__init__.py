"""Published model configurations, as the `config.json` files their makers ship (only the fields the decoder
reads), for projecting models that are not downloaded: `waferline emulate --analytic --model llama-3.1-70b`.

Each file copies its model's public Hugging Face `config.json` values (meta-llama/Llama-3.1-8B, -70B, -405B,
Llama-3.2-1B, Meta-Llama-3-8B, Qwen/Qwen2-72B, Qwen/Qwen2.5-Coder-0.5B, -7B, -32B, Qwen/Qwen3-32B). Shapes only:
no weights exist here.

Two are not a maker's: `waferllm-llama3-8b` and `waferllm-qwen2-72b` are the layer shapes WaferLLM (OSDI 2025)
times to publish its Llama3-8B and Qwen2-72B decode speeds, from its artifact's `Decode/WSE-2/model_config/
llama8B_4k_1_720.json` and `qwen72B_4k_1_720.json` (dim 4320 and 8640 padded to a multiple of the 720-core grid, one
attention head as wide as the model with full-width keys and values, FFN 14400 and 30240, no biases, a cache of 4320
positions), so that the validation compares like with like (docs/wafer-validation.md). Their vocabularies are the
models'. `waferllm-weak-240` and `waferllm-weak-360` are the shapes of its WSE-3 weak-scaling profiling runs
(`Decode/WSE-3/model_config/llama8B_weak_1_{240,360}.json`: dim 2160 and 3240, FFN 7200 and 10800, one head as wide
as the model, caches of 2160 and 3240 positions, 32 layers).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DIRECTORY = Path(__file__).parent


def names() -> list[str]:
    """The configurations stored here, by name (the file name without .json)."""
    return sorted(p.stem for p in DIRECTORY.glob("*.json"))


def path(name: str) -> Path | None:
    """The config.json of a stored configuration, or None."""
    file = DIRECTORY / f"{name}.json"
    return file if file.is_file() else None


def read(name: str) -> dict[str, Any]:
    file = path(name)
    if file is None:
        raise KeyError(f"no published configuration {name!r}; stored: {', '.join(names())}")
    return json.loads(file.read_text())
