"""waferline.hardware — the hardware abstraction layer: a Device protocol and its backends.

Nothing here knows what a token or a model is; it knows tensors, bytes, tiles and cycles.
"""

from waferline.hardware.device import Device, KVRef, WeightRef
from waferline.hardware.registry import BACKENDS, open_device

__all__ = ["BACKENDS", "Device", "KVRef", "WeightRef", "open_device"]
