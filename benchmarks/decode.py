"""`waferline bench`: prefill and decode speed of a model, against this machine's weight-streaming roofline and,
with --compare-hf, against Hugging Face transformers' `generate()` on the same weights.

Decoding one sequence reads every weight once per token, so a step cannot take less time than one read of the
model's weights: the roofline is (bytes/s this machine reads that working set) / (weight bytes read per token). The
bench measures the read speed on the model's own placed weights, read back to back as decode reads them, with wide
loads on the bench's threads (the fused step's read probe, hardware/torch_backend/fused_library.py): a model that
fits in the caches reads at cache speed, one that does not at memory speed, so the figure is an upper bound either
way, and the fraction reached says how much of the step is lost to everything that is not reading weights (arithmetic,
attention, norms, dispatch, sampling).

Timings are wall clock, repeated; the best and the median are reported. On the shared 2-core machines other work
skews them: the JSON carries the load average seen at the start.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any

from waferline.benchmarks.roofline import ReadProbe, StepProbe
from waferline.cli.generate import add_model_arguments
from waferline.engine import heap


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    parser.add_argument("--prompt-tokens", type=int, default=128, help="prompt length (default: 128)")
    parser.add_argument("--new-tokens", type=int, default=128, help="tokens to decode per run (default: 128)")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs; best and median are reported (default: 5)")
    parser.add_argument("--compare-hf", action="store_true", help="also time transformers generate() on the weights")
    parser.add_argument(
        "--hf-dtype", default=None, help="dtype for transformers (default: --dtype; float32 when --dtype is int8)"
    )
    parser.add_argument(
        "--k-curve",
        action="store_true",
        help="time a k-token step against k one-token steps, k = 1..16, from --prompt-tokens cached positions; stop",
    )
    parser.add_argument(
        "--speculate",
        action="store_true",
        help="decode copy-heavy prompts with and without speculative drafts (same prompts, same run), and stop",
    )
    parser.add_argument(
        "--llama-cpp",
        action="store_true",
        help="decode beside llama.cpp's llama-server on the same weights (GGUF F32 and Q8_0), interleaved, at 1 and "
        "2 threads (or --threads), and stop (benchmarks/llama_cpp.py)",
    )
    parser.add_argument("--llama-cpp-bin", default=None, help="folder holding llama-server (default: the make cache)")
    parser.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")


def run(args: argparse.Namespace) -> int:
    import torch

    from waferline.engine.loader import load, set_threads, step_threads
    from waferline.hardware.blocks import BlockWeight
    from waferline.hardware.registry import weight_format
    from waferline.hardware.torch_backend import hugepages

    args.dtype = weight_format(args.backend, args.dtype)  # "auto": what the server places on this backend
    for flag in ("prompt_tokens", "new_tokens", "repeats"):
        if getattr(args, flag) < 1:
            raise ValueError(f"--{flag.replace('_', '-')} must be at least 1")
    load_avg = os.getloadavg()[0]
    log = _Log(quiet=False)
    if args.llama_cpp:
        from waferline.benchmarks import llama_cpp

        side_by_side = llama_cpp.run(args, log)
        if args.json:
            print(json.dumps(side_by_side))
        else:
            llama_cpp.print_report(side_by_side)
        return 0
    log(f"loading {args.model or 'the default model'} ({args.backend}, {args.dtype})")
    t0 = time.perf_counter()
    loaded = load(args.model, backend=args.backend, weights=args.dtype)
    load_s = time.perf_counter() - t0
    heap.settle()  # as the server does after a load: no full collection of the model's objects mid-run
    margs = loaded.args
    set_threads(args.threads, margs.n_params, loaded.model)
    if args.k_curve and args.prompt_tokens + 17 > margs.max_seq_len:
        raise ValueError(
            f"--k-curve steps up to 16 tokens past --prompt-tokens {args.prompt_tokens}: more than the context of "
            f"{margs.max_seq_len} tokens"
        )
    k_curve_only = args.k_curve and not args.speculate  # decodes no --new-tokens
    if not k_curve_only and args.prompt_tokens + args.new_tokens > margs.max_seq_len:
        raise ValueError(
            f"--prompt-tokens {args.prompt_tokens} + --new-tokens {args.new_tokens} exceed the context of "
            f"{margs.max_seq_len} tokens"
        )
    if args.k_curve or args.speculate:
        return run_speculation(args, loaded, load_avg)
    g = torch.Generator().manual_seed(1234)
    prompt = torch.randint(0, margs.vocab_size, (args.prompt_tokens,), generator=g).tolist()

    log(f"timing {args.repeats} runs of {args.prompt_tokens} prompt + {args.new_tokens} new tokens")
    probe, steps = ReadProbe(loaded.model, step_threads(loaded.model)), StepProbe(loaded.model, prompt)

    def between() -> None:
        probe.sample()
        steps.sample()

    ours = time_engine(loaded.model, prompt, args.new_tokens, args.repeats, between=between)
    read = probe.result()
    per_token = weight_bytes_per_token(margs, args.dtype)
    if any(isinstance(layer.qkv.payload, BlockWeight) for layer in getattr(loaded.model, "layers", [])):
        per_token = read["bytes"]  # GGUF blocks as the file stores them: the working set is what a step reads
    fused = getattr(loaded.model, "fused", None)
    report: dict[str, Any] = {
        "model": loaded.name,
        "params": margs.n_params,
        "dtype": args.dtype,
        "backend": args.backend,
        "threads": step_threads(loaded.model),
        "prefill_threads": fused.threads_for(fused.max_tokens) if fused is not None else torch.get_num_threads(),
        "decode_path": "fused" if fused is not None else "per-op",
        "prefetch": fused.prefetch if fused is not None else None,  # the block products' software prefetch, as chosen
        "x8_narrow": x8_narrow(fused),  # the 8-row block products on 256-bit registers (x8_width.py); null: no choice
        "prompt_tokens": args.prompt_tokens,
        "new_tokens": args.new_tokens,
        "repeats": args.repeats,
        "prefill_tok_s": max(ours["prefill_tok_s"]),
        "prefill_tok_s_median": statistics.median(ours["prefill_tok_s"]),
        "decode_tok_s": max(ours["decode_tok_s"]),
        "decode_tok_s_median": statistics.median(ours["decode_tok_s"]),
        "ms_per_token": 1000.0 / max(ours["decode_tok_s"]),
        "decode_cpu_tok_s": max(ours["decode_cpu_tok_s"]),  # new tokens per CPU second of this process
        "weight_bytes_per_token": per_token,
        "read_bytes": read["bytes"],  # the working set the probe read: the placed weights a step reads
        "read_gb_s": read["gb_s"],
        "read_probe": read["probe"],
        "roofline_tok_s": read["gb_s"] * 1e9 / per_token,
        "huge_pages_mb": hugepages.process_huge_mb(),  # the process's memory on 2 MB pages (weights, KV caches)
        "load_s": load_s,
        "load_avg_1m": load_avg,
    }
    report["roofline_fraction"] = report["decode_tok_s"] / report["roofline_tok_s"]
    report["step_tok_s"] = steps.result()  # the model's one-token step alone, sampled as the read is
    report["step_roofline_fraction"] = report["step_tok_s"] / report["roofline_tok_s"]
    if args.compare_hf:
        hf_dtype = args.hf_dtype or ("float32" if args.dtype == "int8" else args.dtype)
        log(f"timing transformers generate() ({hf_dtype})")
        torch.set_num_threads(report["threads"])  # as many as ours (set_threads may have left torch 1 beside them)
        hf = time_hf(loaded, prompt, args.new_tokens, args.repeats, hf_dtype)
        report |= {
            "hf_dtype": hf_dtype,
            "hf_decode_tok_s": max(hf["decode_tok_s"]),
            "hf_decode_tok_s_median": statistics.median(hf["decode_tok_s"]),
            "hf_prefill_tok_s": max(hf["prefill_tok_s"]),
            "hf_decode_cpu_tok_s": max(hf["decode_cpu_tok_s"]),
            "speedup_vs_hf": report["decode_tok_s"] / max(hf["decode_tok_s"]),
            "cpu_speedup_vs_hf": report["decode_cpu_tok_s"] / max(hf["decode_cpu_tok_s"]),
        }
    if args.json:
        print(json.dumps(report))
    else:
        print_table(report)
    return 0


def run_speculation(args: argparse.Namespace, loaded: Any, load_avg: float) -> int:
    """--k-curve and --speculate (benchmarks/speculate.py): one report, a table each or one JSON object."""
    from waferline.benchmarks import speculate
    from waferline.engine.loader import step_threads

    report: dict[str, Any] = {
        "model": loaded.name,
        "dtype": args.dtype,
        "threads": step_threads(loaded.model),
        "decode_path": "fused" if getattr(loaded.model, "fused", None) is not None else "per-op",
        "repeats": args.repeats,
        "load_avg_1m": load_avg,
    }
    title = f"{loaded.name} · {args.dtype} · {report['decode_path']} · {report['threads']} thread(s)"
    if args.k_curve:
        report["k_curve"] = speculate.k_curve(loaded.model, repeats=args.repeats, position=args.prompt_tokens)
        report["k_curve_position"] = args.prompt_tokens
    if args.speculate:
        report["speculate"] = speculate.speculate(loaded, new_tokens=args.new_tokens, repeats=args.repeats)
    if args.json:
        print(json.dumps(report))
        return 0
    if args.k_curve:
        speculate.print_k_curve(report["k_curve"], f"k-token step at {args.prompt_tokens} positions · {title}")
    if args.speculate:
        speculate.print_speculate(report["speculate"], f"speculative decoding · {title}")
    print(f"load average (1 min) at the start: {load_avg:.2f}")
    return 0


class _Log:
    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet

    def __call__(self, msg: str) -> None:
        if not self.quiet:
            print(f"bench: {msg}", file=sys.stderr, flush=True)


def time_engine(
    model: Any, prompt: list[int], new_tokens: int, repeats: int, between: Any = None
) -> dict[str, list[float]]:
    """Greedy generation from a fresh cache each run (no stop tokens, so exactly new_tokens), after one warm-up;
    `between()` (if given) is called before each run and after the last."""
    from waferline.engine.generate import generate
    from waferline.engine.kvcache import Session

    session = Session(model, "bench", max_tokens=len(prompt) + new_tokens)
    generate(session, prompt[:8], max_new_tokens=min(new_tokens, 16))  # warm-up: first calls allocate and tune
    out: dict[str, list[float]] = {"prefill_tok_s": [], "decode_tok_s": [], "decode_cpu_tok_s": []}
    for _ in range(repeats):
        if between is not None:
            between()
        session.reset()
        r = generate(session, prompt, max_new_tokens=new_tokens)
        assert r.prefilled_tokens == len(prompt) and r.new_tokens == new_tokens, r.stop_reason
        out["prefill_tok_s"].append(r.prefill_tok_s)
        out["decode_tok_s"].append(r.decode_tok_s)
        out["decode_cpu_tok_s"].append(r.decode_steps / max(r.timings["decode_cpu_s"], 1e-9))
    if between is not None:
        between()
    return out


def x8_narrow(fused: Any) -> bool | None:
    """Whether a block model's 8-row products run on 256-bit registers (x8_width.py): None off the fused block step or
    where the build has one width only."""
    from waferline.hardware.torch_backend import x8_width

    if fused is None or not fused.blocks:
        return None
    return x8_width.current(fused.lib)


def weight_bytes_per_token(margs: Any, dtype: str) -> int:
    """Weight bytes one decode step reads: every layer's matrices and norms, the final norm, the LM head, and one
    embedding row. int8 counts one byte per weight plus a 2-byte scale per output row; biases stay 16-bit."""
    d, h, inter = margs.dim, margs.head_dim, margs.intermediate_size
    qkv_out = (margs.n_heads + 2 * margs.n_kv_heads) * h
    matrices = [(qkv_out, d), (d, margs.n_heads * h), (2 * inter, d), (d, inter)]
    elem = {"float32": 4, "bfloat16": 2, "float16": 2, "int8": 1}[dtype]
    act = 2 if dtype == "int8" else elem
    per_layer = sum(o * i * elem + (o * act if dtype == "int8" else 0) for o, i in matrices)
    per_layer += 2 * d * act + (qkv_out * act if margs.qkv_bias else 0)
    head = margs.vocab_size * d * elem + (margs.vocab_size * act if dtype == "int8" else 0)
    return margs.n_layers * per_layer + d * act + head + d * act


def time_hf(loaded: Any, prompt: list[int], new_tokens: int, repeats: int, dtype: str) -> dict[str, list[float]]:
    """transformers generate(): greedy, KV cache, same weights and prompt. Decode speed is
    (new_tokens - 1) / (time for new_tokens - time for 1 new token), so prefill is taken out as for ours."""
    import torch

    model = hf_model(loaded, getattr(torch, dtype))
    ids = torch.tensor([prompt])
    kwargs = dict(do_sample=False, use_cache=True, eos_token_id=None, pad_token_id=0)

    def timed(n: int) -> tuple[float, float]:
        """(wall, CPU) seconds of one generate() of n new tokens."""
        t, c = time.perf_counter(), time.process_time()
        with torch.inference_mode():
            out = model.generate(ids, max_new_tokens=n, min_new_tokens=n, **kwargs)
        assert out.shape[1] == len(prompt) + n
        return time.perf_counter() - t, time.process_time() - c

    timed(min(new_tokens, 8))  # warm-up
    out: dict[str, list[float]] = {"prefill_tok_s": [], "decode_tok_s": [], "decode_cpu_tok_s": []}
    steps = max(new_tokens - 1, 1)
    for _ in range(repeats):
        first, first_cpu = timed(1)
        full, full_cpu = timed(new_tokens)
        out["prefill_tok_s"].append(len(prompt) / first)
        out["decode_tok_s"].append(steps / max(full - first, 1e-9))
        out["decode_cpu_tok_s"].append(steps / max(full_cpu - first_cpu, 1e-9))
    return out


def hf_model(loaded: Any, dtype: Any) -> Any:
    """The same weights as `loaded` in a transformers model: from its directory, or, for a preset, rebuilt from
    the preset's seeded random state dict."""
    import transformers

    from waferline.engine.hf import hf_config, init_random

    if loaded.path is not None:
        model = transformers.AutoModelForCausalLM.from_pretrained(loaded.path, dtype=dtype)
    else:
        cfg = hf_config(loaded.args)
        config = transformers.AutoConfig.for_model(**cfg)
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=dtype)
        state = init_random(loaded.args, dtype=dtype)  # seed 0, as load_model builds presets
        missing, unexpected = model.load_state_dict(state, strict=False)
        assert not unexpected, f"transformers model does not take {unexpected[:3]}"
        assert set(missing) <= {"lm_head.weight"}, f"transformers model misses {missing[:3]}"
        if loaded.args.tie_embeddings:
            model.tie_weights()
    return model.eval()


def print_table(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"waferline bench · {report['model']} · {report['backend']} {report['dtype']}")
    table.add_column("measure")
    table.add_column("value", justify="right")
    rows = [
        ("parameters", f"{report['params'] / 1e6:.1f} M"),
        ("threads (decode / prefill)", f"{report['threads']} / {report['prefill_threads']}"),
        (
            "decode path",
            report["decode_path"]
            + (" (one C call per token)" if report["decode_path"] == "fused" else "")
            + ("" if report.get("prefetch") is None else f", prefetch {'on' if report['prefetch'] else 'off'}"),
        ),
        ("prompt / new tokens", f"{report['prompt_tokens']} / {report['new_tokens']}"),
        ("prefill", f"{report['prefill_tok_s']:,.0f} tok/s (median {report['prefill_tok_s_median']:,.0f})"),
        ("decode", f"{report['decode_tok_s']:,.1f} tok/s (median {report['decode_tok_s_median']:,.1f})"),
        ("ms per token", f"{report['ms_per_token']:.2f}"),
        ("decode per CPU second", f"{report['decode_cpu_tok_s']:,.1f} tok"),
        ("weight bytes per token", f"{report['weight_bytes_per_token'] / 1e6:,.1f} MB"),
        ("read speed of the weights", f"{report['read_gb_s']:.1f} GB/s ({report['read_bytes'] / 1e6:,.1f} MB read)"),
        ("on 2 MB pages", "unknown" if report["huge_pages_mb"] is None else f"{report['huge_pages_mb']:,.0f} MB"),
        ("roofline", f"{report['roofline_tok_s']:,.1f} tok/s ({100 * report['roofline_fraction']:.0f}% reached)"),
        (
            "one-token step alone",
            f"{report['step_tok_s']:,.1f}/s ({100 * report['step_roofline_fraction']:.0f}% of roofline)",
        ),
    ]
    if report.get("x8_narrow") is not None:
        rows.insert(3, ("8-row block products", f"{256 if report['x8_narrow'] else 512}-bit registers"))
    if "hf_decode_tok_s" in report:
        rows.append(
            (
                f"transformers ({report['hf_dtype']})",
                f"{report['hf_decode_tok_s']:,.1f} tok/s · waferline is {report['speedup_vs_hf']:.1f}x "
                f"({report['cpu_speedup_vs_hf']:.1f}x per CPU second)",
            )
        )
    rows.append(("load average (1 min)", f"{report['load_avg_1m']:.2f}"))
    for name, value in rows:
        table.add_row(name, value)
    Console().print(table)
