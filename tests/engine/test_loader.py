"""The loader places every weight once, in the format the backend registry resolves."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from waferline.engine.loader import load
from waferline.engine.model import Transformer


def test_auto_places_int8_once_on_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    loads: list[Any] = []
    original = Transformer.load

    def spy(self: Transformer, tensors: Any) -> None:
        loads.append(self.device)
        original(self, tensors)

    monkeypatch.setattr(Transformer, "load", spy)
    lm = load("tiny")
    assert len(loads) == 1, "int8 weights are read and placed once, not loaded in bfloat16 and placed again"
    placed = lm.model.device.placement()
    assert (placed.weights, lm.dtype, lm.backend) == ("int8", torch.bfloat16, "cpu")


def test_a_format_the_backend_cannot_place_is_refused_before_reading_weights() -> None:
    with pytest.raises(ValueError, match="not 'wafer'"):
        load("tiny", backend="wafer", weights="int8")
