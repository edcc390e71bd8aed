"""The torch backend (cpu, cuda): the reference implementation of the Device seam and the fast path."""

from waferline.hardware.torch_backend.torch_device import TorchDevice

__all__ = ["TorchDevice"]
