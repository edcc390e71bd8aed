"""The `waferline` command: one entry point whose subcommands live beside the code they drive.

Each subcommand module exposes `add_arguments(parser)` and `run(args) -> int` and keeps heavy imports (torch,
pygls) inside `run`, so that `waferline --help` stays quick. Errors a user can fix (a bad path, a bad checkpoint,
an unknown preset) are raised as ValueError or OSError with a message naming the file or value; they are printed as
one line without a traceback (set WAFERLINE_DEBUG=1 for the traceback).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

# subcommand -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "generate": ("waferline.engine.generate_cli", "complete a code prompt with a model and print the speed"),
    "bench": ("waferline.engine.bench", "measure prefill and decode speed of a model"),
    "emulate": ("waferline.engine.emulate_cli", "model decode on a wafer-scale engine emulator (and on GPUs)"),
    "bench-index": ("waferline.server.index_bench", "index a folder cold and warm and time lookups (default: stdlib)"),
    "serve": ("waferline.server.serve_cli", "run the language server (stdio, or --tcp HOST:PORT)"),
    "demo": ("waferline.server.demo", "watch ghost text appear while a developer types through LSP, with latencies"),
    "bench-lsp": ("waferline.server.bench_lsp", "measure a typing session through LSP: latency, cancels, KV reuse"),
    "train": ("waferline.training.train_cli", "train the default code model (data, tokenizer, FIM, checkpoints)"),
    "eval": ("waferline.training.eval_cli", "evaluate a model on held-out code: perplexity, line and FIM completion"),
}


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
