"""Resident memory of a model load: how much the process grows over its imports when `engine.loader.load` places a
model file, against the file's size (issue #27 asks for 1.3x), the peak while loading, and where the growth lies.

    python -m waferline.benchmarks.resident FILE.gguf [--json]

Linux only (it reads /proc/self/status and /proc/self/smaps). torch and the engine's modules (the GGUF reader and the
torch backend included, which the loader imports lazily) are imported, and garbage collected, before the first reading,
so the delta is what the load itself keeps: placed weights, scratch, the tokenizer, library code pages first touched by
the load (the file-backed part), and whatever the allocator did not give back.

With `--warm-torch` a few tensor operations run before the first reading too, as in a process that has served a
request: the first arithmetic on a tensor maps a share of libtorch's code that every torch process maps at its first
operation, whatever model it loads (6 MiB on this machine when the library is in the page cache as small pages, 19
MiB when it is there as large folios, e.g. just after pip wrote it), and that otherwise counts as the load's.
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import os
import re
import sys
import time

_KEYS = ("VmRSS", "RssAnon", "RssFile", "VmHWM")


def status_mib() -> dict[str, float]:
    """This process's VmRSS, RssAnon, RssFile and VmHWM in MiB."""
    out: dict[str, float] = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in _KEYS:
                out[key] = int(value.split()[0]) / 1024
    return out


def mappings_mib(top: int) -> list[tuple[str, float]]:
    """The `top` largest resident mappings, by file (anonymous memory as "[anon]")."""
    acc: collections.Counter[str] = collections.Counter()
    name = "[anon]"
    with open("/proc/self/smaps") as f:
        for line in f:
            if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                parts = line.split()
                name = parts[5] if len(parts) > 5 else "[anon]"
            elif line.startswith("Rss:"):
                acc[name] += int(line.split()[1])
    return [(k, round(v / 1024, 1)) for k, v in acc.most_common(top)]


def warm_torch() -> None:
    """The tensor operations any request runs (arithmetic, a copy, a reduction): their library code mapped now."""
    import torch

    x = torch.arange(0, 64, 2, dtype=torch.float64) / 64
    y = (1.0 / (10000.0**x)).float()
    torch.cat((y, y)).softmax(0).argmax()


def measure(path: str, *, warm: bool = False) -> dict[str, object]:
    import torch  # noqa: F401  (imported before the first reading, as a server has it)

    # the loader imports these when it first needs them: module code, not the model's memory
    import waferline.engine.gguf.read
    import waferline.hardware.torch_backend.torch_device  # noqa: F401
    from waferline.engine.loader import load

    if warm:
        warm_torch()
    gc.collect()
    before = status_mib()
    started = time.perf_counter()
    model = load(path)
    seconds = time.perf_counter() - started
    after = status_mib()
    size = os.path.getsize(path) / 2**20
    grown = after["VmRSS"] - before["VmRSS"]
    report: dict[str, object] = {
        "file_mib": round(size, 1),
        "warm_torch": warm,
        "grown_mib": {k: round(after[k] - before[k], 1) for k in _KEYS},
        "ratio": round(grown / size, 3),
        "load_s": round(seconds, 3),
        "mappings_mib": mappings_mib(8),
    }
    del model
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m waferline.benchmarks.resident", description=__doc__.split("\n")[0])
    parser.add_argument("model", help="a model file engine.loader.load reads (GGUF, safetensors, a waferline dir)")
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    parser.add_argument(
        "--warm-torch", action="store_true", help="run a few tensor operations before the first reading"
    )
    args = parser.parse_args(argv)
    if not os.path.exists("/proc/self/status"):
        print("error: this benchmark reads /proc (Linux only)", file=sys.stderr)
        return 2
    if not os.path.exists(args.model):
        print(f"error: no such file: {args.model}", file=sys.stderr)
        return 2
    report = measure(args.model, warm=args.warm_torch)
    if args.json:
        print(json.dumps(report))
        return 0
    grown = report["grown_mib"]
    assert isinstance(grown, dict)
    warmed = " (torch warmed first)" if args.warm_torch else ""
    print(
        f"file {report['file_mib']} MiB; the load grew the process{warmed} by {grown['VmRSS']} MiB ({report['ratio']}x)"
    )
    print(f"  in {report['load_s']} s")
    print(f"  anonymous {grown['RssAnon']}, file-backed {grown['RssFile']}; peak (VmHWM) +{grown['VmHWM']} MiB")
    for name, mib in report["mappings_mib"]:  # type: ignore[attr-defined]
        print(f"  {mib:8.1f} MiB  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
