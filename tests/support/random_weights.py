"""Random checkpoint weights for tests: init_random's, scaled so that a tiny model's logits are far from uniform."""

from __future__ import annotations

import torch
from torch import Tensor

from waferline.engine.hf import init_random
from waferline.engine.model import ModelArgs

PER_HEAD_NORMS = ("self_attn.q_norm.weight", "self_attn.k_norm.weight")  # Qwen3's


def scaled_state(args: ModelArgs, *, seed: int = 0, weight_scale: float = 5.0) -> dict[str, Tensor]:
    """init_random's weights (Hugging Face names) with every non-norm tensor times weight_scale. Norms stay at 1,
    except Qwen3's per-head query and key norms, which get two different ramps: a test then sees them applied, each
    to its own heads (a swap, or one left out, changes the logits)."""
    ramp = torch.linspace(0.5, 1.5, args.head_dim)
    out = {}
    for name, t in init_random(args, seed=seed).items():
        if name.endswith(PER_HEAD_NORMS):
            out[name] = ramp.clone() if name.endswith(PER_HEAD_NORMS[0]) else ramp.flip(0)
        else:
            out[name] = t if name.endswith("norm.weight") else t * weight_scale
    return out
