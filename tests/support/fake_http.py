"""A local HTTP server on 127.0.0.1 that replays answers, for the remote-engine tests: the real network path
(httpx, sockets, chunked streaming, a connection closed by either side) without a real inference server.

Routes map `(method, path)` to a `Reply`, or to a function of the request's JSON body returning one. A streamed reply
is sent chunk by chunk (HTTP/1.1 chunked encoding) with `pause_s` between chunks, so a test can close the stream
early, cancel it, or count how many streams are open at once. Every request is recorded (method, path, JSON body).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


@dataclass
class Reply:
    status: int = 200
    chunks: list[bytes] = field(default_factory=list)
    content_type: str = "application/json"
    pause_s: float = 0.0  # before each chunk after the first
    # Cut the connection after this many chunks without ending the body (a server killed mid-stream).
    cut_after: int | None = None


def json_reply(obj: Any, status: int = 200) -> Reply:
    return Reply(status, [json.dumps(obj).encode()])


Route = Reply | Callable[[dict[str, Any]], Reply]


@dataclass
class Seen:
    method: str
    path: str
    body: dict[str, Any] | None


class FakeServer:
    """What the test sees of the server: its URL, the requests it got, how many streams were open at once."""

    def __init__(self, routes: dict[tuple[str, str], Route]) -> None:
        self.routes = routes
        self.seen: list[Seen] = []
        self.open_streams = 0
        self.max_open_streams = 0
        self.closed_early = 0  # streams the client closed before their end
        self.lock = threading.Lock()
        self.url = ""

    def paths(self, method: str | None = None) -> list[str]:
        return [s.path for s in self.seen if method is None or s.method == method]

    def wait_for_no_streams(self, timeout_s: float = 5.0) -> int:
        """Wait until no stream is open (the server notices a closed one at its next write); how many are."""
        deadline = time.monotonic() + timeout_s
        while self.open_streams and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.open_streams


def _handler(fake: FakeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet: the test reads `fake.seen`

        def do_GET(self) -> None:
            self._answer("GET", None)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            self._answer("POST", json.loads(raw) if raw else {})

        def _answer(self, method: str, body: dict[str, Any] | None) -> None:
            path = self.path.split("?", 1)[0]
            with fake.lock:
                fake.seen.append(Seen(method, path, body))
            route = fake.routes.get((method, path))
            if route is None:
                reply = json_reply({"error": {"code": 404, "message": f"File Not Found: {path}"}}, 404)
            else:
                reply = route(body or {}) if callable(route) else route
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            streamed = len(reply.chunks) > 1
            if streamed:
                with fake.lock:
                    fake.open_streams += 1
                    fake.max_open_streams = max(fake.max_open_streams, fake.open_streams)
            try:
                for i, chunk in enumerate(reply.chunks):
                    if reply.cut_after is not None and i >= reply.cut_after:
                        self.close_connection = True
                        return  # no terminating chunk: the client sees the connection end mid-answer
                    if i and reply.pause_s:
                        time.sleep(reply.pause_s)
                    self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                with fake.lock:
                    fake.closed_early += 1
                self.close_connection = True
            finally:
                if streamed:
                    with fake.lock:
                        fake.open_streams -= 1

    return Handler


@contextlib.contextmanager
def fake_server(routes: dict[tuple[str, str], Route]) -> Iterator[FakeServer]:
    """A FakeServer listening on a free port of 127.0.0.1 for the duration of the block."""
    fake = FakeServer(routes)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    httpd.daemon_threads = True
    fake.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, name="fake-http", daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def sse(*events: dict[str, Any], done: bool = True) -> list[bytes]:
    """Server-sent events, one chunk each (and `data: [DONE]`, as OpenAI-compatible servers end a stream)."""
    out = [b"data: " + json.dumps(e).encode() + b"\n\n" for e in events]
    return [*out, b"data: [DONE]\n\n"] if done else out


def ndjson(*objects: dict[str, Any]) -> list[bytes]:
    """Newline-delimited JSON, one chunk per object (Ollama's streams)."""
    return [json.dumps(o).encode() + b"\n" for o in objects]


def recorded(fixture: Path, *names: str) -> dict[tuple[str, str], Route]:
    """Routes replaying the named exchanges of a recorded fixture (tests/engine/fixtures/remote/*.json): each one's
    status, content type and body (or chunks, sent one by one)."""
    exchanges = json.loads(fixture.read_text(encoding="utf-8"))["exchanges"]
    routes: dict[tuple[str, str], Route] = {}
    for name in names:
        x = exchanges[name]
        chunks = [c.encode() for c in x["chunks"]] if "chunks" in x else [x["body"].encode()]
        routes[(x["method"], x["path"])] = Reply(x["status"], chunks, x["content_type"])
    return routes
