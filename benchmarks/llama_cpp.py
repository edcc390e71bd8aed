"""`waferline bench --llama-cpp`: waferline's decode beside llama.cpp's on the same weights, in one run.

The model (a directory; the shipped one by default) is exported to GGUF twice (`waferline export`'s code: F32 and
Q8_0), and one llama-server per file and thread count is started (`-t N -tb N`), as a user runs it: with its
repacked block layouts where one check load and completion works on this CPU, else `--no-repack` (llama.cpp's
repacking of Q8_0 weights for AMX crashed the server on earlier machines' CPUs); the report says which. Then,
round after round, each of waferline int8 (the fused step's W8A8), llama.cpp Q8_0, waferline float32 and llama.cpp
F32 decodes the same prompt (the same token ids) for the same number of new tokens at each thread count, greedy:
interleaved, so that a shared machine's load drifts over all of them alike, and the order reversed every other
round. llama.cpp's figure is its own
`timings.predicted_per_second` from `/completion` (`cache_prompt` off, `ignore_eos` on, so exactly `n_predict` new
tokens; its timing leaves out the HTTP exchange); waferline's is `generate`'s decode rate (one-token steps over
their time, sampling included, prefill excluded), as `waferline bench` reports it. The report gives the best and the
median per way and the ratios (waferline / llama.cpp) of each, with the load average at the start and the end.

With `--model FILE.gguf` both sides run that file as it is: llama-server, and waferline with the file's blocks kept
(fused_blocks.c, fused_kquants.c) and loaded as `waferline bench` and the server load it (`load_file`), ways
"waferline blocks" and "llama.cpp file".
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

WAYS = (
    ("waferline int8", "int8"),
    ("llama.cpp Q8_0", "q8_0"),
    ("waferline float32", "float32"),
    ("llama.cpp F32", "f32"),
)
PAIRS = (("waferline int8", "llama.cpp Q8_0"), ("waferline float32", "llama.cpp F32"))
# --model FILE.gguf: the file itself on both sides (waferline keeps its blocks, fused_blocks.c)
FILE_WAYS = (("waferline blocks", "blocks"), ("llama.cpp file", "file"))
FILE_PAIRS = (("waferline blocks", "llama.cpp file"),)


def find_llama_server(folder: str | None) -> Path:
    """llama-server in `folder`, else in $WAFERLINE_LLAMA_CPP_CACHE/<version>/bin (what `make llama-cpp` builds; when
    unset, the checkout's .cache/llama.cpp), else on PATH; ValueError saying how to get one otherwise."""
    candidates: list[Path] = []
    if folder:
        candidates.append(Path(folder).expanduser() / "llama-server")
    else:
        checkout = Path(__file__).resolve().parents[1] / ".cache" / "llama.cpp"  # an editable install's checkout
        cache = Path(os.environ.get("WAFERLINE_LLAMA_CPP_CACHE") or checkout)
        candidates += [s.parent / "bin" / "llama-server" for s in sorted(cache.glob("*/.stamp"))]
        on_path = shutil.which("llama-server")
        if on_path:
            candidates.append(Path(on_path))
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return path
    where = f"in {folder}" if folder else "in $WAFERLINE_LLAMA_CPP_CACHE/*/bin or on PATH"
    raise ValueError(f"no llama-server {where}: build it with `make llama-cpp`, or pass --llama-cpp-bin DIR")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def healthy_server(
    cmd: list[str], url: str, log: Path, *, timeout_s: float, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """Run `cmd` (a llama-server listening at `url`) with its output in `log`; yield the process once `url`/health
    answers 200, and stop it afterwards. Raises RuntimeError, with the log's end, if it exits or stays unhealthy."""
    import httpx

    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"llama-server exited {proc.returncode}: {log.read_text(errors='replace')[-2000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"llama-server did not become healthy in {timeout_s:.0f} s (log: {log})")
            time.sleep(0.2)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def llama_server(
    binary: Path, model: Path, threads: int, context: int, log: Path, *, repack: bool = True
) -> Iterator[str]:
    """A llama-server for `model` on a free port of 127.0.0.1 with `threads` threads; yields its URL once healthy.
    repack: llama.cpp's default, its CPU-specific layouts of Q4_0/Q8_0 blocks (off: `--no-repack`)."""
    port = free_port()
    cmd = [str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(port), "-t", str(threads),
           "-tb", str(threads), "-c", str(context), "-np", "1", "--no-webui"]  # fmt: skip
    if not repack:
        cmd.append("--no-repack")
    from waferline.cli import main

    env = dict(os.environ)
    if main.OMP_WAIT_POLICY_SET:  # llama.cpp's OpenMP threads run as they would for the user: as llama.cpp sets them
        env.pop("OMP_WAIT_POLICY", None)
    url = f"http://127.0.0.1:{port}"
    with healthy_server(cmd, url, log, timeout_s=120, env=env):
        yield url


def repacking_works(binary: Path, model: Path, log: Path) -> bool:
    """Whether llama-server loads `model` with its repacked layouts and answers one completion on this CPU (on the
    AMX Xeons of earlier sessions it crashed while repacking Q8_0/Q4_0: SIGSEGV)."""
    import httpx

    try:
        with llama_server(binary, model, 1, 64, log) as url:
            llama_decode(url, [1, 2, 3], 2)
        return True
    except (RuntimeError, OSError, httpx.HTTPError):  # it exited, stayed unhealthy, or died answering
        return False


def llama_decode(url: str, prompt: list[int], new_tokens: int) -> dict[str, float]:
    """One greedy /completion of `new_tokens` new tokens after `prompt`: llama.cpp's decode and prefill rates."""
    import httpx

    body = {"prompt": prompt, "n_predict": new_tokens, "temperature": 0.0, "cache_prompt": False, "ignore_eos": True}
    r = httpx.post(url + "/completion", json=body, timeout=600)
    r.raise_for_status()
    out = r.json()
    timings = out["timings"]
    if int(out.get("tokens_predicted", new_tokens)) != new_tokens:
        raise RuntimeError(f"llama-server predicted {out.get('tokens_predicted')} tokens, not {new_tokens}")
    return {
        "decode_tok_s": float(timings["predicted_per_second"]),
        "prefill_tok_s": float(timings["prompt_per_second"]),
    }


def waferline_decode(model: Any, prompt: list[int], new_tokens: int, threads: int) -> dict[str, float]:
    import torch

    from waferline.engine.generate import generate
    from waferline.engine.kvcache import Session
    from waferline.engine.loader import set_threads

    set_threads(threads, 0, model)  # the fused step's threads (torch's too, or 1 beside a step that takes prompts)
    session = Session(model, "bench-llama-cpp", max_tokens=len(prompt) + new_tokens)
    with torch.inference_mode():
        r = generate(session, prompt, max_new_tokens=new_tokens)
    assert r.new_tokens == new_tokens, r.stop_reason
    return {"decode_tok_s": r.decode_tok_s, "prefill_tok_s": r.prefill_tok_s}


def load_file(path: Path) -> Any:
    """A GGUF file as `waferline bench`, `generate` and the server load it (engine/loader.py: its blocks kept, a
    bfloat16 KV cache). Until 2026-12-07 (session 31) this side loaded it with `load_model`'s float32 device: the
    same blocks, but a float32 cache and attention, so that at 1024 cached positions its decode was about half
    what a user gets (docs/benchmarks-decode.md)."""
    from waferline.engine.loader import load

    return load(path, weights="auto")


def run(args: Any, log: Callable[[str], None]) -> dict[str, Any]:
    """The side-by-side report (one JSON-able dict) for `args` (the bench's arguments)."""
    import torch

    from waferline.engine import heap
    from waferline.engine.checkpoint import resolve_model
    from waferline.engine.gguf.write import export_gguf
    from waferline.engine.loader import load

    model_dir = resolve_model(args.model)
    if not isinstance(model_dir, Path):
        raise ValueError(f"--llama-cpp needs a model directory to export or a GGUF file, not the preset {model_dir!r}")
    binary = find_llama_server(args.llama_cpp_bin)
    thread_counts = [args.threads] if args.threads else [1, 2]
    uptime_start = _uptime()
    gguf_file = model_dir.suffix == ".gguf"
    ways, pairs = (FILE_WAYS, FILE_PAIRS) if gguf_file else (WAYS, PAIRS)
    if gguf_file:
        loaded = {"blocks": load_file(model_dir)}
    else:
        loaded = {fmt: load(model_dir, weights=fmt) for fmt in ("int8", "float32")}
    heap.settle()  # as the server does after a load (engine/heap.py)
    margs = next(iter(loaded.values())).args
    if args.prompt_tokens + args.new_tokens > margs.max_seq_len:
        raise ValueError(f"--prompt-tokens + --new-tokens exceed the model's context of {margs.max_seq_len}")
    g = torch.Generator().manual_seed(1234)
    prompt = torch.randint(0, margs.vocab_size, (args.prompt_tokens,), generator=g).tolist()
    context = args.prompt_tokens + args.new_tokens + 8
    samples: dict[tuple[str, int], list[dict[str, float]]] = {(w, t): [] for w, _ in ways for t in thread_counts}
    with tempfile.TemporaryDirectory(prefix="waferline-llama-cpp-") as tmp, contextlib.ExitStack() as stack:
        if gguf_file:
            files = {"file": model_dir}
        else:
            files = {kind: export_gguf(model_dir, Path(tmp) / f"model-{kind}.gguf", kind) for kind in ("f32", "q8_0")}
        urls: dict[tuple[str, int], str] = {}
        repack: dict[str, bool] = {}
        for kind, path in files.items():
            # as a user runs it (repacked) where that works on this CPU, else with --no-repack
            repack[kind] = repacking_works(binary, path, Path(tmp) / f"{kind}-repack-check.log")
            for t in thread_counts:
                log(f"starting llama-server ({kind}, {t} thread(s), {'repacked' if repack[kind] else '--no-repack'})")
                urls[kind, t] = stack.enter_context(
                    llama_server(binary, path, t, context, Path(tmp) / f"{kind}-{t}.log", repack=repack[kind])
                )

        def once(way: str, what: str, t: int) -> dict[str, float]:
            if what in loaded:
                return waferline_decode(loaded[what].model, prompt, args.new_tokens, t)
            return llama_decode(urls[what, t], prompt, args.new_tokens)

        for way, what in ways:  # warm-up: first calls allocate, compile, fault pages in
            for t in thread_counts:
                once(way, what, t)
        for rnd in range(args.repeats):
            log(f"round {rnd + 1} of {args.repeats}")
            order = [(w, what, t) for t in thread_counts for w, what in ways]
            for way, what, t in order if rnd % 2 == 0 else reversed(order):
                samples[way, t].append(once(way, what, t))
    report: dict[str, Any] = {
        "model": str(model_dir), "prompt_tokens": args.prompt_tokens, "new_tokens": args.new_tokens,
        "repeats": args.repeats, "llama_server": str(binary), "llama_repack": repack,
        "uptime_start": uptime_start, "uptime_end": _uptime(),
        "decode_path": {fmt: "fused" if lm.model.fused is not None else "per-op" for fmt, lm in loaded.items()},
        "kv_dtype": {fmt: str(lm.model.device.dtype).removeprefix("torch.") for fmt, lm in loaded.items()},
        "threads": {}, "ways": [w for w, _ in ways], "pairs": [list(p) for p in pairs],
    }  # fmt: skip
    for t in thread_counts:
        per: dict[str, Any] = {}
        for way, _ in ways:
            rates = [s["decode_tok_s"] for s in samples[way, t]]
            per[way] = {"decode_tok_s": max(rates), "decode_tok_s_median": statistics.median(rates),
                        "prefill_tok_s": max(s["prefill_tok_s"] for s in samples[way, t])}  # fmt: skip
        for ours, theirs in pairs:
            per[f"{ours} / {theirs}"] = {
                "best": per[ours]["decode_tok_s"] / per[theirs]["decode_tok_s"],
                "median": per[ours]["decode_tok_s_median"] / per[theirs]["decode_tok_s_median"],
            }
        report["threads"][str(t)] = per
    return report


def _uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "load average: " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def print_report(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"decode beside llama.cpp · {Path(report['model']).name} · {report['new_tokens']} new tokens")
    for col in ("threads", "way", "decode tok/s best", "median", "prefill tok/s"):
        table.add_column(col, justify="right")
    for t, per in report["threads"].items():
        for way in report["ways"]:
            r = per[way]
            table.add_row(t, way, f"{r['decode_tok_s']:,.0f}", f"{r['decode_tok_s_median']:,.0f}",
                          f"{r['prefill_tok_s']:,.0f}")  # fmt: skip
        for ours, theirs in report["pairs"]:
            ratio = per[f"{ours} / {theirs}"]
            table.add_row(t, f"{ours} / {theirs}", f"{ratio['best']:.2f}x", f"{ratio['median']:.2f}x", "")
    Console().print(table)
    repack = ", ".join(f"{k} {'repacked' if v else '--no-repack'}" for k, v in report.get("llama_repack", {}).items())
    print(f"llama.cpp: {repack}\nstart: {report['uptime_start']}\nend:   {report['uptime_end']}")
