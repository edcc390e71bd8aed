"""`waferline bench-lsp [--json] [--engine URL]`: a developer's typing session through LSP, measured from the editor's
side (through the local model, or a remote engine with --engine).

It starts `waferline serve` as an editor would, opens a real source file, types a few functions key by key at a
human pace (one didChange + one inline completion request per key, as VS Code does), accepts suggestions that
match what comes next, and reports what the session cost: latency per request (keystroke sent -> response
received), how many requests were answered, cancelled or served from the typed-through cache, and how much of the
prompts the KV cache served. The same session, rendered, is `waferline demo`.
"""

from __future__ import annotations

import argparse
import json

from waferline.cli.typing_session import add_session_arguments, print_table, summarize


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_session_arguments(parser)
    parser.add_argument("--no-accept", action="store_true", help="never accept a suggestion: type every character")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.add_argument(
        "--option", action="append", default=[], metavar="NAME=JSON", help="a server option (repeatable)"
    )
    parser.add_argument(
        "--engine",
        metavar="URL",
        help="type through a remote engine at URL instead of the local model (engineUrl; choose the dialect and FIM "
        "layout with --option engineDialect=... --option engineFimTemplate=..., docs/remote.md)",
    )


def run(args: argparse.Namespace) -> int:
    import asyncio

    from waferline.benchmarks.editor_eval import server_options
    from waferline.cli.typing_session import SCRIPT, check_session_args, type_script

    check_session_args(args)
    options = {
        "dtype": args.dtype,
        **({"engineUrl": args.engine} if args.engine else {}),
        **server_options(args.option),
    }
    session = asyncio.run(
        type_script(
            model=args.model, backend=args.backend, source=args.file, chars_per_s=args.cps, script=SCRIPT[: args.keys],
            accept=not args.no_accept, log_file=args.log_file, options=options,
        )
    )  # fmt: skip
    summary = summarize(session)
    if args.json:
        print(json.dumps(summary))
    else:
        print_table(summary)
    return 0
