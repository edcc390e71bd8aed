"""The roofline of `waferline bench`: how fast this machine reads the weights one decode step reads (`ReadProbe`),
and how fast the model's one-token step runs on its own (`StepProbe`), both sampled around every timed run.

A decode step reads every weight once, so no step is shorter than one read of the model's weights, read back to back
as decode reads them: a model that fits in the caches is read at cache speed, one that does not at memory speed. The
bench divides that read speed by the bytes a step reads for `roofline_tok_s`. On a shared machine the load changes
from second to second, and the best of many short samples (a read, a step) catches quieter moments than the best of
a few long decode runs; so the one-token step is sampled the same way as the read, and `step_roofline_fraction`
compares like with like, where `roofline_fraction` also counts the generation loop (sampling, detokenising).
"""

from __future__ import annotations

import time
from typing import Any


def working_set(model: Any) -> list[Any]:
    """The placed tensors one decode step reads, in the order it reads them: per layer its norms, matrices and bias,
    then the final norm and the LM head (the embedding table is left out: a step reads one row of it). A weight held
    in an opaque layout (oneDNN's packed bfloat16) is stood in for by a buffer of its size."""
    import torch

    from waferline.hardware.blocks import BlockWeight
    from waferline.hardware.torch_backend.kernels import Int8Linear

    out: list[Any] = []

    def add(ref: Any) -> None:
        if ref is None:
            return
        w = ref.payload
        if isinstance(w, BlockWeight):  # GGUF blocks: their bytes, as the file stores them
            out.append(w.data)
        elif isinstance(w, Int8Linear):
            out.extend((w.q_mm, w.scale))
        elif isinstance(w, torch.Tensor) and w.layout == torch.strided:
            out.append(w.contiguous())
        else:
            out.append(torch.empty(w.nbytes(), dtype=torch.uint8))

    plan = model.plan()
    for layer in plan.layers:
        for ref in (layer.attn_norm, layer.qkv, layer.qkv_bias, layer.o, layer.mlp_norm, layer.gate_up, layer.down):
            add(ref)
    add(plan.norm)
    add(plan.lm_head)
    return out


class ReadProbe:
    """How fast this machine reads the model's working set (`working_set`) back to back: the fused step's C read
    probe on `threads` threads and on one, or, without a C compiler, torch's `amax` over the same bytes (slower than
    this machine can read, so then the roofline does not bound). `sample()` takes the best of a few passes after one
    that warms the caches; the bench samples before and after every timed run, so that the best read and the best
    decode are taken in the same stretch of a shared machine's load."""

    def __init__(self, model: Any, threads: int) -> None:
        import torch

        self.tensors = [t for t in working_set(model) if t.device.type == "cpu"]
        self.threads = threads
        self.nbytes = sum(t.numel() * t.element_size() for t in self.tensors)
        self.flat = [t.reshape(-1).view(torch.uint8) for t in self.tensors]
        self.best = float("inf")
        self.probe = "none (not on the CPU)" if not self.tensors else "c"

    def sample(self, passes: int = 3) -> None:
        """The best of `passes` reads on the bench's threads and, with more than one, on one thread too: a step can
        always fall back to fewer threads (fused_pool.c does after a stall), so the faster of the two bounds it."""
        from waferline.hardware.torch_backend import fused_library

        if not self.tensors:
            return
        if fused_library.library() is None:
            self.probe = "torch"
            for i in range(passes + 1):
                t0 = time.perf_counter()
                for f in self.flat:
                    f.amax()
                if i:
                    self.best = min(self.best, time.perf_counter() - t0)
            return
        for threads in sorted({1, self.threads}):
            seconds = fused_library.read_seconds(self.tensors, threads=threads, repeats=passes)
            assert seconds is not None
            self.best = min(self.best, seconds)

    def result(self) -> dict[str, Any]:
        if self.best == float("inf"):
            self.sample()
        gb_s = self.nbytes / self.best / 1e9 if self.tensors else float("nan")
        return {"bytes": self.nbytes, "gb_s": gb_s, "probe": self.probe}


class StepProbe:
    """The best time of one one-token forward pass at the end of `prompt` (prefilled once), over `sample()` calls of
    a few steps each: the model's step without the generation loop around it."""

    def __init__(self, model: Any, prompt: list[int]) -> None:
        import torch

        from waferline.engine.kvcache import Session

        self.session = Session(model, "bench-step", max_tokens=len(prompt) + 8)
        self.prompt_len = len(prompt)
        with torch.inference_mode():
            self.session.forward(prompt)
        self.best = float("inf")

    def sample(self, steps: int = 4) -> None:
        import torch

        self.session.truncate(self.prompt_len)
        with torch.inference_mode():
            for i in range(steps):
                t0 = time.perf_counter()
                self.session.forward([1 + i])
                self.best = min(self.best, time.perf_counter() - t0)

    def result(self) -> float:
        """One-token steps per second at the best sample."""
        if self.best == float("inf"):
            self.sample()
        return 1.0 / self.best
