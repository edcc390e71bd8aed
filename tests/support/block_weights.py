"""GGUF block weights for the fused products' tests: a float matrix quantised by the `gguf` package into one
BlockWeight of a single kind, its rows as a file has them."""

from __future__ import annotations

import numpy as np
import torch
from gguf import GGMLQuantizationType, quants

from waferline.hardware.blocks import BlockWeight


def blocks(kind: str, w: np.ndarray) -> BlockWeight:
    """w (rows x columns, columns a multiple of the kind's block) quantised as `kind` (Q4_0, Q4_1, Q5_0, Q8_0 ...)."""
    q = quants.quantize(w.astype(np.float32), GGMLQuantizationType[kind])
    return BlockWeight(torch.from_numpy(q.reshape(-1).copy()), w.shape, ((kind, w.shape[0]),))
