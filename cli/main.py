"""The `waferline` command: one entry point for the subcommands in waferline.cli and waferline.benchmarks.

Each subcommand module exposes `add_arguments(parser)` and `run(args) -> int` and keeps heavy imports (torch and the
model code) inside `run`, so that `waferline --help` stays quick. Errors a user can fix (a bad path, a bad
checkpoint, an unknown preset) are raised as ValueError or OSError with a message naming the file or value; they
are printed as one line without a traceback (set WAFERLINE_DEBUG=1 for the traceback). `python -m waferline.cli` is
the same command, as the editor clients start it from a chosen interpreter.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

# subcommand -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("waferline.cli.serve", "run the language server (stdio, or --tcp HOST:PORT)"),
    "demo": ("waferline.cli.demo", "watch ghost text appear while a developer types through LSP, with latencies"),
    "fetch-model": ("waferline.cli.fetch_model", "put a model in the user's cache (smollm2: the chat model)"),
    "generate": ("waferline.cli.generate", "complete a code prompt with a model and print the speed"),
    "emulate": ("waferline.cli.emulate", "model decode on a wafer-scale engine emulator (and on GPUs)"),
    "train": ("waferline.cli.train", "train the default code model (data, tokenizer, FIM, checkpoints)"),
    "export": ("waferline.cli.export", "write a model directory as a GGUF file for llama.cpp"),
    "eval": ("waferline.cli.eval", "evaluate a model on held-out code: perplexity, line and FIM completion"),
    "eval-editor": (
        "waferline.benchmarks.editor_eval",
        "evaluate suggestions on unseen code through the real server, against baselines",
    ),
    "eval-chat": (
        "waferline.benchmarks.chat_eval",
        "hover/ask/code-action answers through the real server: the chat model against the shipped one",
    ),
    "eval-lookup": (
        "waferline.benchmarks.lookup_eval",
        "how often prompt lookup holds the right line; selection rules",
    ),
    "eval-nes": (
        "waferline.benchmarks.nes_eval",
        "next-edit suggestions on replayed edits through the real server, against baselines",
    ),
    "calibrate": ("waferline.cli.calibrate", "fit the server's confidence to eval-editor records; its curve"),
    "bench": ("waferline.benchmarks.decode", "measure prefill and decode speed of a model"),
    "bench-lsp": ("waferline.benchmarks.lsp", "measure a typing session through LSP: latency, cancels, KV reuse"),
    "bench-first": (
        "waferline.benchmarks.first",
        "time the first completion on a freshly opened 1,000-line file, warm-up on and off",
    ),
    "bench-index": ("waferline.benchmarks.index", "index a folder cold and warm and time lookups (default: stdlib)"),
    "bench-hover": ("waferline.benchmarks.hover", "time deterministic hover on the standard library's index"),
    "bench-syntax": ("waferline.benchmarks.syntax", "time the syntax work of one keystroke on a 2,000-line file"),
    "bench-load": (
        "waferline.benchmarks.load",
        "type into many documents at once without waiting: does the server keep up",
    ),
}


OMP_WAIT_POLICY_SET = False  # whether quiet_openmp set it (not the user)


def quiet_openmp(command: str) -> None:
    """Ask torch's OpenMP workers (libgomp) to sleep between parallel regions instead of spinning, unless the
    environment says otherwise; call before torch is imported. The fused decode step has worker threads of its own,
    and torch's spinning ones took the cores from them and from torch itself: at 2 threads on the shared 2-core
    machines the shipped model prefilled at ~250 tok/s instead of ~7,300 and decoded at ~100 instead of 500-1,400
    (docs/benchmarks.md). Not for `train`, whose threads are its own setting and were not measured with it."""
    global OMP_WAIT_POLICY_SET
    if command != "train" and "OMP_WAIT_POLICY" not in os.environ:
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
        OMP_WAIT_POLICY_SET = True  # benchmarks/llama_cpp.py starts llama-server without it


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="waferline", description="Real-time AI code completion over LSP.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        module = importlib.import_module(module_name)
        sub_parser = sub.add_parser(name, help=help_text, description=help_text)
        module.add_arguments(sub_parser)
        sub_parser.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    quiet_openmp(args.command)
    try:
        return int(args._run(args) or 0)
    except (ValueError, OSError) as e:
        if os.environ.get("WAFERLINE_DEBUG"):
            raise
        print(f"waferline {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
