"""`waferline serve`: the language server, as an editor starts it (stdio by default, or TCP).

stdout is the LSP transport, so nothing else may ever write to it: logs go to stderr, or to --log-file.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from waferline.server.app import WaferlineServer
    from waferline.server.options import Options

# The options a command line may set (as the defaults an editor's settings then override): flags made from their
# declarations in server/options.py, so that their defaults, choices and help are the options' own.
FLAGS = ("model", "backend", "dtype")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from waferline.server.option_parsing import DECLARED

    parser.add_argument("--stdio", action="store_true", help="talk LSP over stdin/stdout (the default)")
    parser.add_argument("--tcp", metavar="HOST:PORT", help="listen for one LSP client on a TCP socket instead")
    for d in (d for d in DECLARED if d.name in FLAGS):
        default = "the shipped model" if d.default is None else d.default
        help = f"{d.spec.doc.replace('%', '%%')} (the `{d.wire}` option's default; default: {default})"
        parser.add_argument(f"--{d.name}", default=d.default, choices=d.spec.choices or None, help=help)
    parser.add_argument("--log-file", help="write logs to this file instead of stderr")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logs (-v info, -vv debug)")


def parse_tcp(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--tcp expects HOST:PORT (for example 127.0.0.1:2087), got {value!r}")
    return host, int(port)


def setup_logging(verbose: int, log_file: str | None) -> None:
    """Logs to stderr or a file, never stdout (the transport)."""
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    handler: logging.Handler = logging.FileHandler(log_file) if log_file else logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    if verbose < 3:  # pygls logs every message body at INFO: only with -vvv
        logging.getLogger("pygls").setLevel(max(level, logging.WARNING))


def run(args: argparse.Namespace, *, make_server: Callable[[Options], WaferlineServer] | None = None) -> int:
    """Serve until the client says exit (or the input ends); LSP's exit code: 0 after `shutdown`, else 1 (see
    server/transport.py). `make_server` builds the server from the command line's options (default:
    handlers.create_server; tests pass one whose engine is a test double)."""
    from waferline.server.handlers import create_server
    from waferline.server.option_parsing import DECLARED, parse_options
    from waferline.server.options import Options
    from waferline.server.transport import serve_stdio, serve_tcp

    tcp = parse_tcp(args.tcp) if args.tcp else None
    setup_logging(args.verbose, args.log_file)
    flags = {d.wire: getattr(args, d.name) for d in DECLARED if d.name in FLAGS}
    defaults, problems = parse_options(flags, Options())
    if problems:
        raise ValueError("; ".join(problems))
    server = (make_server or create_server)(defaults)
    if tcp is not None:
        return serve_tcp(server, *tcp)
    return serve_stdio(server)


def main() -> int:
    """`python -m waferline.cli.serve`: the same as `waferline serve`, for tests and editor configs that
    start the server by module."""
    from waferline.cli.main import quiet_openmp

    quiet_openmp("serve")
    parser = argparse.ArgumentParser(prog="waferline serve", description=__doc__)
    add_arguments(parser)
    try:
        return run(parser.parse_args())
    except ValueError as e:
        print(f"waferline serve: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
