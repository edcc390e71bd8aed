"""Backends by name, and the weight formats each one places: the one table of backend policy.

The engine and the server ask for a backend by string and never import its module: what names exist, which weight
formats each backend can place and which one "auto" means are answered here, and nowhere else. The table is plain
data, so that reading it (option validation, `--backend` choices) does not import torch; `open_device` does.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from waferline.hardware.device import Device

# A weight format: the dtype activations compute in, and how linear weights are stored ("float": in that dtype;
# "int8": weight-only int8 with one scale per output row, see hardware/torch_backend/torch_device.py).
WEIGHT_FORMATS: dict[str, tuple[str, str]] = {
    "float32": ("float32", "float"),
    "bfloat16": ("bfloat16", "float"),
    "float16": ("float16", "float"),
    "int8": ("bfloat16", "int8"),
}
AUTO = "auto"  # the backend's default format


@dataclass(frozen=True)
class Backend:
    module: str
    factory: str
    formats: tuple[str, ...]  # the weight formats it can place, from WEIGHT_FORMATS
    default_format: str  # what "auto" means on it
    fixed: dict[str, Any] = field(default_factory=dict)  # keyword arguments fixed by the name


_TORCH_FORMATS = ("float32", "bfloat16", "float16", "int8")
# int8 by default on the torch backends: decode streams a quarter of the bytes of float32 and ran 3-4x faster on the
# 2-core machines, with the same greedy tokens in our checks. The emulator computes and counts in float.
BACKENDS: dict[str, Backend] = {
    "cpu": Backend("waferline.hardware.torch_backend", "TorchDevice", _TORCH_FORMATS, "int8", {"device": "cpu"}),
    "cuda": Backend("waferline.hardware.torch_backend", "TorchDevice", _TORCH_FORMATS, "int8", {"device": "cuda"}),
    "wafer": Backend("waferline.hardware.wafer", "WaferDevice", ("float32", "bfloat16", "float16"), "float32"),
}


def backend_names() -> tuple[str, ...]:
    return tuple(BACKENDS)


def describe_backends() -> str:
    """The names for a message or a --help line: 'cpu, cuda or wafer'."""
    *rest, last = BACKENDS
    return f"{', '.join(rest)} or {last}" if rest else last


def describe_formats() -> str:
    """The weight formats for a --help line: 'auto (int8 on cpu and cuda, float32 on wafer), float32, ...'."""
    defaults: dict[str, list[str]] = {}
    for name, backend in BACKENDS.items():
        defaults.setdefault(backend.default_format, []).append(name)
    auto = ", ".join(f"{fmt} on {' and '.join(names)}" for fmt, names in defaults.items())
    return f"{AUTO} ({auto}), {', '.join(WEIGHT_FORMATS)}"


def check_backend(name: str) -> Backend:
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; choose {describe_backends()}")
    return BACKENDS[name]


def weight_format(backend: str, fmt: str = AUTO) -> str:
    """The weight format `fmt` names on `backend` ("auto": the backend's default); ValueError if it cannot place it."""
    spec = check_backend(backend)
    if fmt == AUTO:
        return spec.default_format
    if fmt not in WEIGHT_FORMATS:
        raise ValueError(f"unknown weight format {fmt!r}; choose {AUTO}, {', '.join(WEIGHT_FORMATS)}")
    if fmt not in spec.formats:
        users = [name for name, b in BACKENDS.items() if fmt in b.formats]
        raise ValueError(f"weight format {fmt} is for the {' and '.join(users)} backends, not {backend!r}")
    return fmt


def open_device(name: str, *, dtype: torch.dtype | None = None, **options: Any) -> Device:
    """Build the backend called `name` computing in `dtype` (default float32); ValueError for an unknown name or an
    unusable one (cuda without a GPU). `options` go to the backend's constructor."""
    import torch

    spec = check_backend(name)
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("backend 'cuda' asked for, but torch sees no CUDA device on this machine")
    factory = getattr(importlib.import_module(spec.module), spec.factory)
    device: Device = factory(dtype=torch.float32 if dtype is None else dtype, **spec.fixed, **options)
    return device


def open_backend(name: str, fmt: str = AUTO, **options: Any) -> Device:
    """The backend called `name`, set up to place weights in format `fmt` (see WEIGHT_FORMATS)."""
    import torch

    activations, weights = WEIGHT_FORMATS[weight_format(name, fmt)]
    if weights != "float":
        options["weights"] = weights
    return open_device(name, dtype=getattr(torch, activations), **options)
