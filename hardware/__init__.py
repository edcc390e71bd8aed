"""waferline.hardware — the hardware abstraction layer: a Device protocol and its backends.

Nothing here knows what a token or a model is; it knows tensors, bytes, tiles and cycles. The backend registry is
imported eagerly and does not import torch (the server reads it to validate its options); the Device types are
imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from waferline.hardware.registry import BACKENDS, backend_names, open_backend, open_device, weight_format

if TYPE_CHECKING:
    from waferline.hardware.device import Device, KVRef, Placement, WeightRef

__all__ = [
    "BACKENDS",
    "Device",
    "KVRef",
    "Placement",
    "WeightRef",
    "backend_names",
    "open_backend",
    "open_device",
    "weight_format",
]


def __getattr__(name: str) -> Any:
    if name in ("Device", "KVRef", "Placement", "WeightRef"):  # hardware/device.py imports torch
        from waferline.hardware import device

        return getattr(device, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
