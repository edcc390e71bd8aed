"""The backend registry: names, the weight formats each backend places, what "auto" means, and no torch to read it."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from waferline.hardware.registry import backend_names, open_backend, weight_format


def test_auto_is_int8_on_the_torch_backends_and_float32_on_the_wafer() -> None:
    assert backend_names() == ("cpu", "cuda", "wafer")
    assert (weight_format("cpu"), weight_format("cuda"), weight_format("wafer")) == ("int8", "int8", "float32")
    assert weight_format("wafer", "bfloat16") == "bfloat16"
    with pytest.raises(ValueError, match="int8 is for the cpu and cuda backends, not 'wafer'"):
        weight_format("wafer", "int8")
    with pytest.raises(ValueError, match="unknown backend 'tpu'"):
        weight_format("tpu")
    with pytest.raises(ValueError, match="unknown weight format 'int4'"):
        weight_format("cpu", "int4")


def test_a_device_opened_for_a_format_says_what_it_placed() -> None:
    device = open_backend("cpu", "int8")
    device.place("w", torch.randn(8, 16), role="linear")
    placed = device.placement()
    assert (placed.weights, placed.dtype) == ("int8", torch.bfloat16) and placed.weight_bytes > 0
    assert open_backend("cpu", "float16").placement().weights == "float16"


def test_reading_the_registry_does_not_import_torch() -> None:
    code = "import sys, waferline.hardware.registry as r; r.backend_names(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False", "the server validates its options with the registry before any model loads"
