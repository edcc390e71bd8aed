"""Backends by name: the engine asks for one by string (`--backend cpu|cuda|wafer`) and never imports its module."""

from __future__ import annotations

import importlib
from typing import Any

import torch

from waferline.hardware.device import Device

# name -> (module, factory function, keyword arguments fixed by the name)
BACKENDS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "cpu": ("waferline.hardware.torch_backend", "TorchDevice", {"device": "cpu"}),
    "cuda": ("waferline.hardware.torch_backend", "TorchDevice", {"device": "cuda"}),
    "wafer": ("waferline.hardware.wafer", "WaferDevice", {}),
}


def open_device(name: str, *, dtype: torch.dtype = torch.float32, **options: Any) -> Device:
    """Build the backend called `name`; ValueError for an unknown name or an unusable one (cuda without a GPU)."""
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; choose one of {', '.join(sorted(BACKENDS))}")
    module_name, factory_name, fixed = BACKENDS[name]
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("backend 'cuda' asked for, but torch sees no CUDA device on this machine")
    module = importlib.import_module(module_name)
    factory = getattr(module, factory_name)
    device: Device = factory(dtype=dtype, **fixed, **options)
    return device
