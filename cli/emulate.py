"""`waferline emulate`: what a model's decode would cost on a wafer-scale engine, and on GPUs for comparison.

Numeric mode (the default) runs the model on the wafer emulator tile by tile on the real numbers, beside the torch
cpu backend on the same weights: it checks that the greedy tokens agree, measures what the emulation costs here,
and reports the modeled per-token time from the emulator's counters. Analytic mode (--analytic) runs the same
engine forward on shapes alone, so that an 8B or 70B model on a full wafer is projected in a fraction of a second.
Both decode one token after a prompt of --context tokens; the modeled time is that token's.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

# Shapes from Meta's public config.json of Llama-3.1-70B; analytic projection only (random 70B weights are useless
# and do not fit this machine), so it lives here rather than among the engine's presets.
EXTRA_SHAPES: dict[str, dict[str, Any]] = {
    "llama-3.1-70b": dict(
        model_type="llama", vocab_size=128256, dim=8192, n_layers=80, n_heads=64, n_kv_heads=8,
        intermediate_size=28672, max_seq_len=131072, rope_theta=500000.0, norm_eps=1e-5,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 8192},
    ),
}  # fmt: skip
NUMERIC_LIMIT_BYTES = 2e9  # real-number emulation holds the weights twice (wafer + reference): keep it well in RAM


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default=None, help="preset name or model directory (default: the shipped model)")
    parser.add_argument("--wafer", default="wse-3", help="wafer preset: wse-2, wse-3, mini-RxC (default wse-3)")
    parser.add_argument("--analytic", action="store_true", help="shapes only: no weights, no numbers")
    parser.add_argument("--context", type=int, default=1024, help="tokens in the cache before the decoded one")
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


def run(args: argparse.Namespace) -> int:
    import torch

    from waferline.engine.checkpoint import parse_dtype
    from waferline.hardware.gpu_model import GPUS, project
    from waferline.hardware.wafer import WaferDevice, get_spec

    started = time.perf_counter()
    if args.threads:
        torch.set_num_threads(args.threads)
    spec = get_spec(args.wafer)
    dtype = parse_dtype(args.dtype or ("float16" if args.analytic else "float32"))
    if args.context < 1 or args.tokens < 1:
        raise ValueError("--context and --tokens must be at least 1")
    name, model_args, tensors = _model(args.model)
    max_tokens = args.context + (1 if args.analytic else args.tokens)
    if max_tokens > model_args.max_seq_len:
        raise ValueError(f"--context {args.context} leaves no room in the model's {model_args.max_seq_len} positions")
    if args.analytic:
        import torch._dynamo  # torch's meta kernel for cat imports it on first use: a one-time cost, not ours
    projection_start = time.perf_counter()
    device = WaferDevice(dtype=dtype, spec=spec, analytic=args.analytic, spill=args.spill)
    result: dict[str, Any] = {"model": name, "wafer": spec.name, "mode": "analytic" if args.analytic else "numeric"}
    if args.analytic:
        _analytic(device, model_args, args.context)
        result["projection_s"] = time.perf_counter() - projection_start
    else:
        elem = torch.empty((), dtype=dtype).element_size()
        if model_args.n_params * elem > NUMERIC_LIMIT_BYTES:
            raise ValueError(f"{name} is too large to emulate on real numbers here; add --analytic")
        if tensors is None:
            raise ValueError(f"{name} has shapes only; add --analytic")
        result.update(_numeric(device, model_args, tensors, args.context, args.tokens, dtype))
    report = device.report()
    counts = device.counters()
    per_token = {k: counts[k] / counts["tokens"] for k in _PER_TOKEN}
    work = _gpu_work(model_args, args.context, torch.empty((), dtype=dtype).element_size(), per_token["ops"])
    gpus = {g: project(s, work) for g, s in GPUS.items()}
    result.update(
        dtype=str(dtype).removeprefix("torch."),
        context=args.context,
        tiles=spec.tiles,
        tiles_used=int(counts["tiles_used"]),
        sram_bytes_used=int(counts["sram_bytes_used"]),
        sram_bytes_capacity=int(counts["sram_bytes_capacity"]),
        weight_bytes=int(counts["weight_bytes"]),
        kv_bytes_reserved=int(counts["kv_bytes_reserved"]),
        spilled_bytes=int(counts["spilled_bytes"]),
        routes_per_tile=int(counts["routes_per_tile"]),
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
        elapsed_s=time.perf_counter() - started,
    )
    if args.plot:
        from waferline.hardware.wafer.plot import save_plot

        save_plot(device.grid, report, args.plot, f"{name}, {result['mode']}, context {args.context}")
        result["plot"] = str(args.plot)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(_text(result))
    if args.table:
        print(device.placement_table(limit=40))
    return 0


_PER_TOKEN = ("ops", "macs", "macs.tile", "sram_read_bytes", "sram_write_bytes", "wavelet_hops", "collectives",
              "collective_hops", "off_wafer_bytes", "cycles")  # fmt: skip


def _model(model: str | None) -> tuple[str, Any, Any]:
    """(name, ModelArgs, a function giving a fresh stream of HF-named tensors, or None for shapes only)."""
    from waferline.engine.checkpoint import args_from_config, resolve_model
    from waferline.engine.hf import iter_random
    from waferline.engine.model import ModelArgs
    from waferline.engine.weights import read_json, stream_tensors, weight_shards

    if model in EXTRA_SHAPES:
        return model, ModelArgs(**EXTRA_SHAPES[model]), None
    target = resolve_model(model)
    if isinstance(target, str):
        margs = ModelArgs.from_name(target)
        return target, margs, lambda: iter_random(margs, seed=0)
    margs = args_from_config(read_json(target / "config.json"), target / "config.json")
    shards = weight_shards(target)
    return target.resolve().name, margs, lambda: stream_tensors(shards)


def _analytic(device: Any, margs: Any, context: int) -> None:
    import torch

    from waferline.engine.hf import from_hf, iter_meta
    from waferline.engine.model import Transformer

    model = Transformer(margs, device)
    model.load(from_hf(margs, iter_meta(margs)))
    kv = model.open_cache(context + 1)
    model.forward(torch.zeros(context, dtype=torch.long), kv, 0)
    device.reset_counters()
    model.forward(torch.zeros(1, dtype=torch.long), kv, context)


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


def _text(r: dict[str, Any]) -> str:
    us = 1e6
    lines = [
        f"model {r['model']} ({r['dtype']}) on {r['wafer']}, {r['mode']}, decoding at position {r['context']}",
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
    if r["routes_per_tile"] > 0:
        lines.append(f"  routing      {r['routes_per_tile']} of {r['routes_available']} colours per router in use")
    projection = f", of which {r['projection_s']:.2f} s projecting" if "projection_s" in r else ""
    lines.append(f"  (took {r['elapsed_s']:.2f} s{projection})")
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="waferline emulate")
    add_arguments(parser)
    sys.exit(run(parser.parse_args()))
