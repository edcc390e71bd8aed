"""`waferline emulate --speculate K --acceptance A`: the analytic cost of speculative decoding's verification step.

The target model verifies K drafted tokens in one forward pass of K positions (all K logits returned to the host),
costed on the planned wafers by the same phases as any forward: every GEMV carries K tokens' chunks, attention
scores K queries, the logits of K positions leave the wafer. With a per-token acceptance rate A (each drafted token
accepted independently), one verification yields on average (1 - A^(K+1)) / (1 - A) tokens (the accepted prefix
plus the target's own next token: Leviathan et al., "Fast Inference from Transformers via Speculative Decoding",
ICML 2023), so the effective speed is that over the verification time. Without --draft the draft model's own time
is not included (it depends on where the draft runs): the figure is the target's side, an upper bound. With
--draft MODEL the draft is projected on wafers of its own (as many as it needs, of the same preset, or of
--draft-wafer's: a grid such as cs-3:240x240 stands for a region of a wafer set aside for it, whose shorter
collectives make its steps faster) and its K one-token steps at the same context are added to each verification
step (the drafted ids cross to the target's wafers in the time of the system link's hop, which the draft's own host
I/O already charges).

The step costed is the engine's own verification (`Transformer.verify`, as `Session.verify` calls it), run here on
shapes alone: the same code, on real numbers, gives the torch backend's logits at each of the K positions
(tests/hardware/test_wafer_verify.py), so what is costed is what is checked.
"""

from __future__ import annotations

from typing import Any

import torch


def expected_tokens(k: int, acceptance: float) -> float:
    """Tokens one verification of k drafted tokens yields on average, with i.i.d. per-token acceptance."""
    assert k >= 1 and 0.0 <= acceptance <= 1.0, f"k={k}, acceptance={acceptance}"
    if acceptance == 1.0:
        return float(k + 1)
    return (1 - acceptance ** (k + 1)) / (1 - acceptance)


def speculate(
    planned: Any,
    margs: Any,
    dtype: torch.dtype,
    context: int,
    k: int,
    acceptance: float,
    draft: Any = None,
    draft_spec: Any = None,
) -> dict[str, Any]:
    """The k-token verification step costed on `planned` (the target's wafers) at `context`, with the draft model's
    k one-token steps added when `draft` (the draft's ModelArgs) is given, on `draft_spec` (default: the target's)."""
    from waferline.cli.emulate_plan import make_device
    from waferline.engine.hf import from_hf, iter_meta
    from waferline.engine.model import Transformer

    if k < 1 or not 0.0 <= acceptance <= 1.0:
        raise ValueError("--speculate takes K >= 1 and --acceptance a rate in [0, 1]")
    if context + k > margs.max_seq_len:
        raise ValueError(f"--context {context} leaves no room for {k} drafted tokens in {margs.max_seq_len} positions")
    device = make_device(planned.spec, planned.wafers, margs, dtype, True, planned.spill, context + k)
    model = Transformer(margs, device)
    model.load(from_hf(margs, iter_meta(margs)))
    kv = model.open_cache(context + k)
    model.forward(torch.zeros(context, dtype=torch.long), kv, 0)
    device.reset_counters()
    model.forward(
        [0] * k, kv, context, last_only=False, like_steps=True
    )  # the k-token step: one forward of k positions, every weight read once
    verify_s = device.report(tokens=1).seconds_per_token  # the whole step
    decode_tok_s = planned.device.report().tok_s
    tokens = expected_tokens(k, acceptance)
    out: dict[str, Any] = {"k": k, "acceptance": acceptance, "verify_s": verify_s,
                           "verify_vs_decode": verify_s * decode_tok_s, "tokens_per_step": tokens}  # fmt: skip
    step_s = verify_s
    if draft is not None:
        import dataclasses

        from waferline.cli.emulate_plan import plan

        if context + k > draft.max_seq_len:
            raise ValueError(f"--context {context} leaves no room for {k} drafted tokens in the draft's positions")
        spec = draft_spec or dataclasses.replace(planned.spec, route_merge=())  # routes fitted for its own program
        drafted = plan(draft, spec, dtype, context, wafers=None, spill=False)
        draft_s = drafted.device.report().seconds_per_token
        step_s += k * draft_s
        out.update(draft_s=draft_s, draft_wafers=drafted.wafers, step_s=step_s)
    out.update(effective_tok_s=tokens / step_s, speedup=tokens / step_s / decode_tok_s)
    return out
