"""`waferline emulate`: what a model's decode would cost on a wafer-scale engine, and on GPUs for comparison.

Numeric mode runs the model on the wafer emulator tile by tile on the real numbers, beside the torch
cpu backend on the same weights: it checks that the greedy tokens agree, measures what the emulation costs here,
and reports the modeled per-token time from the emulator's counters. Analytic mode (--analytic) runs the same
engine forward on shapes alone, so that an 8B or 70B model on a full wafer is projected in a fraction of a second.
Both decode one token after a prompt of --context tokens (default 1024, or fewer for a model with fewer positions);
the modeled time is that token's. Without --analytic or --numeric the mode is numeric when the model has weights
small enough to emulate here, analytic otherwise. The layers go over as many wafers as needed (--wafers N to choose;
cli/emulate_plan.py), and a routing plan that fits the routers' colours is found. --sweep (cli/emulate_sweep.py)
projects over grid side, all-reduce group count and context; --speculate K costs a K-token verification step
(cli/emulate_speculate.py); --validate prints the predictions beside published figures (cli/emulate_validate.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

NUMERIC_LIMIT_BYTES = 2e9  # real-number emulation holds the weights twice (wafer + reference): keep it well in RAM
NUMERIC_TILE_LIMIT = 128 * 128  # default to numeric only on grids this small: a full wafer takes seconds per token
DEFAULT_CONTEXT = 1024  # decode position when --context is not given (less when the model has fewer positions)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        default=None,
        help="model directory (config.json alone is enough for analytic mode), engine preset, or published "
        "configuration (llama-3.1-8b, llama-3.1-70b, llama-3.1-405b, qwen2-72b, qwen2.5-coder-7b, ...); "
        "default: the shipped model",
    )
    parser.add_argument("--wafer", default="wse-3", help="wafer preset: wse-2, wse-3, mini-RxC (default wse-3)")
    parser.add_argument(
        "--wafers", type=int, default=None, help="systems to split the layers over (default: the fewest that hold it)"
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--analytic", action="store_true", help="shapes only: no weights, no numbers")
    mode.add_argument("--numeric", action="store_true", help="real numbers (default when the weights exist and fit)")
    parser.add_argument(
        "--context", type=int, default=None, help="tokens in the cache before the decoded one (default 1024 or less)"
    )
    parser.add_argument("--tokens", type=int, default=16, help="numeric mode: tokens to decode and compare")
    parser.add_argument(
        "--dtype", default=None, help="float32, bfloat16, float16 (default: float32 numeric, float16 analytic)"
    )
    parser.add_argument("--spill", action="store_true", help="stream weights that do not fit from off-wafer memory")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--plot", default=None, metavar="FILE.png", help="write the tile map and time breakdown")
    parser.add_argument("--table", action="store_true", help="print the tile-memory table")
    parser.add_argument(
        "--threads", type=int, default=None, help="torch CPU threads for numeric mode (default: torch's)"
    )
    parser.add_argument(
        "--sweep",
        default=None,
        metavar="FILE.png",
        nargs="?",
        const="emulate-sweep.png",
        help="analytic sweep over grid side, all-reduce group count and context: a table, and a PNG "
        "(default emulate-sweep.png)",
    )
    parser.add_argument(
        "--validate", action="store_true", help="the predictions beside every published single-stream decode figure"
    )
    parser.add_argument("--speculate", type=int, default=0, metavar="K", help="analytic: cost a K-token verification")
    parser.add_argument("--acceptance", type=float, default=0.7, help="with --speculate: per-token acceptance rate")
    parser.add_argument(
        "--draft",
        default=None,
        metavar="MODEL",
        help="with --speculate: the draft model (as --model), its K steps costed on wafers of its own",
    )
    parser.add_argument(
        "--draft-wafer",
        default=None,
        metavar="PRESET",
        help="with --draft: the draft's wafer preset, e.g. cs-3:240x240 for a region (default: --wafer's)",
    )


def run(args: argparse.Namespace) -> int:
    import torch

    from waferline.cli.emulate_plan import per_wafer, plan, resolve
    from waferline.engine.checkpoint import parse_dtype
    from waferline.hardware.gpu_model import GPUS, project
    from waferline.hardware.wafer import get_spec

    started = time.perf_counter()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.validate:
        from waferline.cli.emulate_validate import validate

        return validate(args.json)
    spec = get_spec(args.wafer)
    target = resolve(args.model)
    name, model_args, tensors = target.name, target.args, target.tensors
    analytic = _analytic_mode(args, target, parse_dtype(args.dtype or "float32"))
    dtype = parse_dtype(args.dtype or ("float16" if analytic else "float32"))
    if args.sweep is not None:
        from waferline.cli.emulate_sweep import sweep

        return sweep(args, target, spec, dtype)
    steps = 1 if analytic else args.tokens
    context = args.context if args.context is not None else max(1, min(DEFAULT_CONTEXT, model_args.max_seq_len - steps))
    if context < 1 or args.tokens < 1:
        raise ValueError("--context and --tokens must be at least 1")
    if context + steps > model_args.max_seq_len:
        raise ValueError(
            f"--context {context} leaves no room for {steps} more in the model's {model_args.max_seq_len} positions"
        )
    import torch._dynamo

    projection_start = time.perf_counter()
    planned = plan(model_args, spec, dtype, context, wafers=args.wafers, spill=args.spill)
    result: dict[str, Any] = {"model": name, "model_source": target.source, "wafer": spec.name}
    result["mode"] = "analytic" if analytic else "numeric"
    if analytic:
        device = planned.device
        result["projection_s"] = time.perf_counter() - projection_start
    else:
        from waferline.cli.emulate_plan import make_device

        device = make_device(
            planned.spec, planned.wafers, model_args, dtype, False, planned.spill, context + args.tokens
        )
        assert tensors is not None
        result.update(_numeric(device, model_args, tensors, context, args.tokens, dtype))
    report = device.report()
    counts = device.counters()
    per_token = {k: counts[k] / counts["tokens"] for k in _PER_TOKEN}
    work = _gpu_work(model_args, context, torch.empty((), dtype=dtype).element_size(), per_token["ops"])
    gpus = {g: project(s, work) for g, s in GPUS.items()}
    result.update(
        dtype=str(dtype).removeprefix("torch."),
        context=context,
        wafers=planned.wafers,
        spill=planned.spill,  # asked for, or chosen because one tensor is larger than a wafer
        tiles=int(counts["tiles"]),
        tiles_used=int(counts["tiles_used"]),
        sram_bytes_used=int(counts["sram_bytes_used"]),
        sram_bytes_capacity=int(counts["sram_bytes_capacity"]),
        weight_bytes=int(counts["weight_bytes"]),
        kv_bytes_reserved=int(counts["kv_bytes_reserved"]),
        spilled_bytes=int(counts["spilled_bytes"]),
        per_wafer=per_wafer(device, model_args.n_layers),
        routes_per_tile=int(counts["routes_per_tile"]),
        routes_unmerged=planned.colours_unmerged,
        route_merges=[list(m) for m in planned.spec.route_merge],
        routes_available=spec.routes_per_tile,
        modeled_tok_s=report.tok_s,
        seconds_per_token=report.seconds_per_token,
        cycles_per_token=report.cycles_per_token,
        breakdown=report.breakdown,
        by_op=report.by_op,
        per_token=per_token,
        gpu={g: p.tok_s for g, p in gpus.items()},
        gpu_detail={
            g: {"gpus": p.gpus, "memory_s": p.memory_s, "compute_s": p.compute_s, "launch_s": p.launch_s}
            for g, p in gpus.items()
        },
    )
    if args.speculate:
        from waferline.cli.emulate_speculate import speculate

        if args.draft_wafer and not args.draft:
            raise ValueError("--draft-wafer goes with --draft")
        draft = resolve(args.draft) if args.draft else None
        draft_spec = get_spec(args.draft_wafer) if args.draft_wafer else None
        result["speculation"] = speculate(
            planned, model_args, dtype, context, args.speculate, args.acceptance, draft and draft.args, draft_spec
        )
        if draft is not None:
            result["speculation"]["draft"] = draft.name
    result["elapsed_s"] = time.perf_counter() - started
    if args.plot:
        from waferline.hardware.wafer.plot import save_plot

        save_plot(device.grid, report, args.plot, f"{name}, {result['mode']}, context {context}")
        result["plot"] = str(args.plot)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(_text(result))
    if args.table:
        print(device.placement_table(limit=40))
    return 0


def _analytic_mode(args: argparse.Namespace, target: Any, numeric_dtype: Any) -> bool:
    """--analytic or --numeric as asked; otherwise numeric when the model has weights and it and the grid are small
    enough to emulate here."""
    import torch

    from waferline.hardware.wafer import get_spec

    elem = torch.empty((), dtype=numeric_dtype).element_size()
    too_large = target.args.n_params * elem > NUMERIC_LIMIT_BYTES
    small = get_spec(args.wafer).tiles <= NUMERIC_TILE_LIMIT
    if args.numeric or (
        not args.analytic and args.sweep is None and target.tensors is not None and small and not too_large
    ):
        if too_large:
            raise ValueError(f"{target.name} is too large to emulate on real numbers here; add --analytic")
        if target.tensors is None:
            raise ValueError(f"{target.name} has shapes only ({target.source}); add --analytic")
        return False
    return True


_PER_TOKEN = ("ops", "macs", "macs.tile", "sram_read_bytes", "sram_write_bytes", "wavelet_hops", "collectives",
              "collective_hops", "off_wafer_bytes", "cycles")  # fmt: skip


def _numeric(device: Any, margs: Any, tensors: Any, context: int, steps: int, dtype: Any) -> dict[str, Any]:
    """Greedy decode on the wafer and on the torch cpu backend from the same weights and prompt, step by step in
    lockstep (so that both see the same machine load), timing every step of each; medians per token."""
    import statistics

    import torch

    from waferline.engine.hf import from_hf
    from waferline.engine.model import Transformer
    from waferline.hardware import open_device

    prompt = torch.randint(0, margs.vocab_size, (context,), generator=torch.Generator().manual_seed(0))
    models, caches, logits = {}, {}, {}
    for label, dev in (("wafer", device), ("torch_cpu", open_device("cpu", dtype=dtype))):
        models[label] = Transformer(margs, dev)
        models[label].load(from_hf(margs, tensors()))
        caches[label] = models[label].open_cache(context + steps)
        logits[label] = models[label].forward(prompt, caches[label], 0)
    device.reset_counters()  # count the decode steps only
    tokens: dict[str, list[int]] = {"wafer": [], "torch_cpu": []}
    seen: dict[str, list[Any]] = {"wafer": [], "torch_cpu": []}
    times: dict[str, list[float]] = {"wafer": [], "torch_cpu": []}
    for _ in range(steps):
        for label, model in models.items():
            seen[label].append(logits[label][-1].float())
            tokens[label].append(int(logits[label][-1].argmax()))
            start = time.perf_counter()
            logits[label] = model.forward(torch.tensor(tokens[label][-1:]), caches[label], caches[label].length)
            times[label].append(time.perf_counter() - start)
    w_s, t_s = statistics.median(times["wafer"]), statistics.median(times["torch_cpu"])
    diff = (torch.stack(seen["wafer"]) - torch.stack(seen["torch_cpu"])).abs().max()
    return {
        "tokens_match_reference": tokens["wafer"] == tokens["torch_cpu"],
        "max_logit_diff": float(diff),
        "tokens": tokens["wafer"],
        "torch_cpu_tok_s": 1.0 / t_s,
        "emulation_s_per_token": w_s,
        "emulation_vs_torch_cpu": w_s / t_s,
        "torch_threads": torch.get_num_threads(),
    }


def _gpu_work(margs: Any, context: int, elem: int, kernels: float) -> Any:
    """Bytes, flops and kernels of one decode token at position `context`, from the model's shape."""
    from waferline.hardware.gpu_model import DecodeWork

    matmul_params = margs.n_params - margs.vocab_size * margs.dim * (1 if margs.tie_embeddings else 2)
    matmul_params += margs.vocab_size * margs.dim  # the LM head is a matmul; the embedding lookup reads one row
    kv_per_token = 2 * margs.n_layers * margs.n_kv_heads * margs.head_dim * elem
    attention_flops = 4 * margs.n_layers * margs.n_heads * margs.head_dim * (context + 1)  # q.k and p.v
    return DecodeWork(
        weight_bytes=matmul_params * elem,
        kv_bytes=kv_per_token * (context + 1),
        flops=2 * matmul_params + attention_flops,
        kernels=round(kernels),
        resident_bytes=margs.n_params * elem + kv_per_token * (context + 1),
        bytes_per_element=elem,
    )


def _size(n: float) -> str:
    """Bytes in GB, MB or kB, three significant figures or so."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6)):
        if n >= scale:
            return f"{n / scale:.3f} {unit}" if unit == "GB" else f"{n / scale:.2f} {unit}"
    return f"{n / 1e3:.1f} kB"


def _stages(stages: list[dict[str, Any]]) -> str:
    """Per wafer: layers, SRAM occupancy, modeled µs per token (a range when there are more than four)."""
    us = 1e6
    if len(stages) <= 4:
        return "; ".join(
            f"{int(w['layers'])} layers, {w['occupancy']:.0%} SRAM, {w['seconds_per_token'] * us:.1f} µs"
            for w in stages
        )
    layers = sorted(int(w["layers"]) for w in stages)
    occupancy = sorted(w["occupancy"] for w in stages)
    times = sorted(w["seconds_per_token"] * us for w in stages)
    return (
        f"{layers[0]}-{layers[-1]} layers, {occupancy[0]:.0%}-{occupancy[-1]:.0%} SRAM, "
        f"{times[0]:.1f}-{times[-1]:.1f} µs each"
    )


def _text(r: dict[str, Any]) -> str:
    us = 1e6
    lines = [
        f"model {r['model']} ({r['dtype']}, {r['model_source']}) on {r['wafer']}, {r['mode']}, decoding at position "
        f"{r['context']}",
        f"  tiles        {r['tiles_used']:,} of {r['tiles']:,} hold data; SRAM {_size(r['sram_bytes_used'])} "
        f"of {_size(r['sram_bytes_capacity'])} (weights {_size(r['weight_bytes'])}, "
        f"KV {_size(r['kv_bytes_reserved'])}, spilled {_size(r['spilled_bytes'])})",
        f"  modeled      {r['modeled_tok_s']:,.0f} tokens/s ({r['seconds_per_token'] * us:.2f} µs/token, "
        f"{r['cycles_per_token']:,.0f} cycles)",
        "  breakdown    " + ", ".join(f"{k} {v * us:.2f} µs" for k, v in r["breakdown"].items()),
        "  by op        "
        + ", ".join(f"{k} {v * us:.2f}" for k, v in sorted(r["by_op"].items(), key=lambda kv: -kv[1])),
        "  gpu          "
        + ", ".join(
            f"{g} {t:,.0f} tok/s" + (f" on {r['gpu_detail'][g]['gpus']} GPUs" if r["gpu_detail"][g]["gpus"] > 1 else "")
            for g, t in r["gpu"].items()
        ),
    ]
    if r["mode"] == "numeric":
        lines += [
            f"  reference    tokens match torch cpu: {r['tokens_match_reference']} over {len(r['tokens'])} tokens "
            f"(max logit diff {r['max_logit_diff']:.2e})",
            f"  this machine torch cpu {r['torch_cpu_tok_s']:,.1f} tok/s measured; emulation "
            f"{r['emulation_s_per_token'] * 1e3:.2f} ms/token ({r['emulation_vs_torch_cpu']:.1f}x torch cpu; "
            f"medians, {r['torch_threads']} threads)",
        ]
    if r["wafers"] > 1:
        lines.append(
            f"  wafers       {r['wafers']} systems as pipeline stages, "
            f"{r['breakdown']['inter_wafer'] * us:.2f} µs/token between wafers; " + _stages(r["per_wafer"])
        )
    if r["routes_per_tile"] > 0:
        merged = (
            f" (the collectives' {r['routes_unmerged']} exceed it: {len(r['route_merges'])} patterns run on longer "
            f"ones, " + ", ".join(f"{k} {a}->{b}" for k, a, b in r["route_merges"]) + ")"
            if r["route_merges"]
            else ""
        )
        lines.append(
            f"  routing      {r['routes_per_tile']} of {r['routes_available']} colours per router in use{merged}"
        )
    if "speculation" in r:
        sp = r["speculation"]
        drafting = (
            f" + drafting {sp['k']} x {sp['draft_s'] * us:.1f} µs ({sp['draft']}, {sp['draft_wafers']} wafer(s))"
            if "draft_s" in sp
            else ""
        )
        lines.append(
            f"  speculation  k={sp['k']}, acceptance {sp['acceptance']:.2f}: verifying {sp['k']} tokens costs "
            f"{sp['verify_s'] * us:.1f} µs{drafting} for {sp['tokens_per_step']:.2f} tokens: "
            f"{sp['effective_tok_s']:,.0f} tokens/s effective ({sp['speedup']:.2f}x"
            + ("" if drafting else "; draft cost not included")
            + ")"
        )
    projection = f", of which {r['projection_s']:.2f} s projecting" if "projection_s" in r else ""
    lines.append(f"  (took {r['elapsed_s']:.2f} s{projection})")
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="waferline emulate")
    add_arguments(parser)
    sys.exit(run(parser.parse_args()))
