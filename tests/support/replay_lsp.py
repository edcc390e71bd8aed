"""Send a fuzzing session again: the JSON lines a failing fuzz test printed, to a fresh server, and show the answers.

    python tests/support/replay_lsp.py SESSION.jsonl             # the server with the engine's test double
    python tests/support/replay_lsp.py SESSION.jsonl --real      # `waferline serve` (the default model)
    python tests/support/replay_lsp.py SESSION.jsonl --encoding utf-8 --wait 10

The server is started and initialized as the fuzz tests start it; then each line is written as one framed message
(a line `{"raw": "..."}` is written as those bytes, unframed), without waiting; then the replay waits up to
`--wait` seconds for every request's answer. Printed: each message the server wrote, tracebacks from its stderr,
and the requests left unanswered. The exit status is 1 when a request went unanswered or the server exited.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lsp_session import start_server, tracebacks
from raw_lsp import RawClient

HERE = Path(__file__).resolve().parent
FIXED = [sys.executable, str(HERE / "serve_fixed.py"), "-v", "--text=x + 1"]
REAL = [sys.executable, "-m", "waferline.cli.serve", "-v"]


def replay(client: RawClient, lines: list[str], wait: float) -> int:
    start = len(client.received)
    ids = []
    for line in lines:
        message = json.loads(line)
        if isinstance(message, dict) and set(message) == {"raw"}:
            client.send_bytes(message["raw"].encode("latin-1"))
            continue
        client.send(message)
        if isinstance(message, dict) and "id" in message and "method" in message:
            ids.append(message["id"])
    client.wait_for_ids(ids, start=start, timeout=wait)
    for m in client.received[start:]:
        print("<", json.dumps(m, ensure_ascii=False)[:2000])
    for t in tracebacks(client.stderr):
        print(t, file=sys.stderr)
    answered = {json.dumps(m.get("id")) for m in client.responses(start)}
    missing = [i for i in ids if json.dumps(i) not in answered]
    if missing:
        print(f"unanswered: {missing}", file=sys.stderr)
    if not client.alive():
        print(f"the server exited with {client.process.poll()}", file=sys.stderr)
        return 1
    return 1 if missing else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("session", type=Path, help="the JSON lines a fuzz test printed")
    parser.add_argument("--real", action="store_true", help="`waferline serve` with the default model")
    parser.add_argument("--encoding", choices=["utf-16", "utf-8", "utf-32"], help="the client's position encoding")
    parser.add_argument("--wait", type=float, default=30.0, help="seconds to wait for the answers (default 30)")
    args = parser.parse_args()
    lines = [line for line in args.session.read_text(encoding="utf-8").splitlines() if line.strip()]
    client, _ = start_server(REAL if args.real else FIXED, args.encoding)
    try:
        return replay(client, lines, args.wait)
    finally:
        client.stop()


if __name__ == "__main__":
    sys.exit(main())
