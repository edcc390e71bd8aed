"""`waferline serve` whose engine is the test double (fixed_engine.py), for protocol tests — not the product.

    python tests/support/serve_fixed.py --text TEXT [--token-delay-ms MS] [--chat] [any argument of `waferline serve`]

With `--chat` the double also follows instructions (its reply to any chat is the text, streamed: fixed_engine.py).

Everything but the engine is the real server (the same features, options, worker and job queue), started the way
`waferline serve` starts it; the double stands in for the default model, so a `model` setting still loads that model
(a test of a real checkpoint, or of one that fails to load). A test changes what the double writes in mid-session
with the notification `waferlineTest/setCompletion` {"text": ..., "tokenDelayMs": ...}: the engine is rebuilt, as
when a model setting changes, before the next request is served. The request `waferlineTest/fail` raises in its
handler, to show what a client gets from an internal error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fixed_engine import FixedEngine

from waferline.cli import serve as serve_cli
from waferline.engine.api import Engine
from waferline.engine.factory import build_engine
from waferline.server.app import WaferlineServer
from waferline.server.handlers import create_server
from waferline.server.options import Options

SET_COMPLETION = "waferlineTest/setCompletion"
FAIL = "waferlineTest/fail"  # a request whose handler raises: what an internal error looks like to a client


class Double:
    """What the double writes: one per server, read each time the engine is (re)built."""

    def __init__(self, text: str, token_delay_ms: float, chat: bool = False) -> None:
        self.text, self.token_delay_ms, self.chat = text, token_delay_ms, chat

    def engine(self, options: Options) -> Engine:
        if options.model is not None:
            return build_engine(options)
        return FixedEngine(self.text, self.token_delay_ms / 1000.0, chat=self.chat)

    def server(self, defaults: Options) -> WaferlineServer:
        server = create_server(defaults, engine_factory=self.engine)

        @server.feature(SET_COMPLETION)
        async def set_completion(ls: WaferlineServer, params: Any) -> None:
            def get(name: str) -> Any:
                return params.get(name) if isinstance(params, dict) else getattr(params, name, None)

            self.text = str(get("text"))
            if (delay := get("tokenDelayMs")) is not None:
                self.token_delay_ms = float(delay)
            await ls.load_engine()

        @server.feature(FAIL)
        def fail(ls: WaferlineServer, params: Any) -> None:
            raise RuntimeError("a bug in a handler, on purpose (tests/support/serve_fixed.py)")

        return server


def main() -> int:
    parser = argparse.ArgumentParser(prog="serve_fixed.py", description=__doc__)
    serve_cli.add_arguments(parser)
    parser.add_argument("--text", required=True, help="what the test double writes, one character per token")
    parser.add_argument("--token-delay-ms", type=float, default=0.0, help="the double's delay per character")
    parser.add_argument("--chat", action="store_true", help="the double also chats: its reply is the text")
    args = parser.parse_args()
    return serve_cli.run(args, make_server=Double(args.text, args.token_delay_ms, args.chat).server)


if __name__ == "__main__":
    sys.exit(main())
