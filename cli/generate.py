"""`waferline generate`: complete a code prompt with a model, stream the completion, print the speed.

stdout gets the prompt (unless --no-echo) and the completion as it is generated; stderr gets the model line and the
speed line, so `waferline generate ... > out.txt` keeps only text.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from waferline.hardware.registry import AUTO, WEIGHT_FORMATS, backend_names, describe_backends, describe_formats


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """--model, --backend, --dtype and --threads, as `generate` and `bench` both take them."""
    parser.add_argument("--model", default=None, help="a preset name or a model directory (default: the shipped model)")
    parser.add_argument(
        "--backend", default="cpu", choices=backend_names(), help=f"{describe_backends()} (default: cpu)"
    )
    parser.add_argument(
        "--dtype",
        default=AUTO,
        choices=(AUTO, *WEIGHT_FORMATS),
        help=f"weights and activations: {describe_formats()}; int8 = int8 weights (bfloat16 or 8-bit activations, "
        "see docs/engine.md); default: auto, as the server",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="threads (default: 1 for models under 50M parameters, else all cores but one, and every core for the "
        "prompt's chunks; a number sets both)",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    src = parser.add_mutually_exclusive_group()
    src.add_argument("--prompt", default=None, help="the text to complete")
    src.add_argument("--file", type=Path, default=None, help="read the text to complete from this file")
    parser.add_argument("--max-tokens", type=int, default=64, help="new tokens at most (default: 64)")
    parser.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    parser.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling mass (with --temperature)")
    parser.add_argument("--seed", type=int, default=None, help="makes sampling reproducible")
    parser.add_argument("--stop", action="append", default=[], help="a stop string (repeatable)")
    parser.add_argument("--no-echo", action="store_true", help="print only the completion, not the prompt")


def run(args: argparse.Namespace) -> int:
    from waferline.engine.generate import generate
    from waferline.engine.kvcache import Session
    from waferline.engine.loader import load, set_threads, step_threads
    from waferline.hardware.registry import weight_format

    if args.max_tokens < 0:
        raise ValueError(f"--max-tokens must be >= 0, got {args.max_tokens}")
    if args.file is not None:
        prompt = args.file.read_text(encoding="utf-8")
    else:
        prompt = args.prompt if args.prompt is not None else "def fibonacci(n):\n"
    args.dtype = weight_format(args.backend, args.dtype)
    loaded = load(args.model, backend=args.backend, weights=args.dtype)
    set_threads(args.threads, loaded.args.n_params, loaded.model)
    tokenizer = loaded.tokenizer
    ids = tokenizer.encode(prompt)
    if loaded.special.add_bos and loaded.special.bos_id is not None:
        ids = [loaded.special.bos_id, *ids]
    if not ids:
        raise ValueError("the prompt is empty")
    context = loaded.args.max_seq_len
    if len(ids) > context:
        raise ValueError(f"prompt too long: {len(ids)} tokens, but {loaded.name} has a context of {context} tokens")
    note = " (random weights: the text is noise, the speed is real)" if loaded.path is None else ""
    print(f"{loaded.name} · {args.backend} {args.dtype} · {step_threads(loaded.model)} threads{note}", file=sys.stderr)

    session = Session(loaded.model, "cli", max_tokens=min(context, len(ids) + max(args.max_tokens, 1)))
    if not args.no_echo:
        sys.stdout.write(prompt)

    shown: list[str] = []

    def show(_token: int, delta: str) -> None:
        if delta:
            shown.append(delta)
            sys.stdout.write(delta)
            sys.stdout.flush()

    result = generate(
        session,
        ids,
        max_new_tokens=args.max_tokens,
        temperature=args.temperature,
        top_p=args.top_p,
        seed=args.seed,
        stop_token_ids=loaded.special.stop_ids,
        stop_strings=args.stop,
        tokenizer=tokenizer,
        on_token=show,
    )
    streamed = "".join(shown)  # the result's text may hold a tail the stream held back (see generate.TokenCallback)
    sys.stdout.write(result.text[len(streamed) :] + "\n")
    sys.stdout.flush()
    print(speed_line(result), file=sys.stderr)
    return 0


def speed_line(result: Any) -> str:
    """One line: prefill and decode speed of a GenerationResult."""
    parts = [
        f"prompt {result.prompt_tokens} tokens ({result.reused_tokens} reused) prefilled in "
        f"{result.prefill_s * 1e3:.1f} ms ({result.prefill_tok_s:.0f} tok/s)",
        f"{result.new_tokens} new tokens, decode {result.decode_tok_s:.0f} tok/s ({result.ms_per_token:.2f} ms/token)",
        f"stop: {result.stop_reason}",
    ]
    return " · ".join(parts)
