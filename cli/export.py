"""`waferline export`: write a model directory as one GGUF file that llama.cpp (llama-server, llama-cli) loads.

    waferline export --model engine/models/waferline-mini --out waferline-mini-q8_0.gguf --type q8_0

The file's greedy tokens equal waferline's on the same prompt, in waferline's own reader (tests/engine/test_gguf.py)
and in llama.cpp's llama-server (tests/engine/test_gguf_llama_cpp.py). waferline also runs GGUF files directly:
`--model FILE.gguf`.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default=None, help="a model directory (default: the shipped model)")
    parser.add_argument("--out", required=True, type=Path, help="the .gguf file to write")
    kinds = ("f32", "f16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1")  # engine/gguf/write.py KINDS
    parser.add_argument("--type", default="q8_0", choices=kinds, help="2-D weights as (default: q8_0)")
    parser.add_argument("--overwrite", action="store_true", help="replace --out if it exists")


def run(args: argparse.Namespace) -> int:
    from waferline.engine.checkpoint import resolve_model
    from waferline.engine.gguf.write import export_gguf

    model = resolve_model(args.model)
    if not isinstance(model, Path):
        raise ValueError(f"{model!r} is a preset (random weights); export a model directory")
    out = export_gguf(model, args.out, args.type, overwrite=args.overwrite)
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB, {args.type}) from {model}")
    return 0
