"""`waferline serve` as a process: stdout carries LSP frames and nothing else, --tcp serves a socket, bad flags fail
with one clear line."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

from lsp_support import serve_command

SERVE = [sys.executable, "-m", "waferline.cli.serve"]


def frame(msg: dict) -> bytes:
    body = json.dumps(msg).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def read_frames(data: bytes) -> list[dict]:
    """Parse LSP frames; fail if any byte is not part of one (a log line on stdout would break the client)."""
    frames = []
    while data:
        header, sep, rest = data.partition(b"\r\n\r\n")
        assert sep and header.startswith(b"Content-Length: "), f"not an LSP frame: {data[:80]!r}"
        n = int(header.split(b"\r\n")[0].split(b": ")[1])
        frames.append(json.loads(rest[:n]))
        data = rest[n:]
    return frames


INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}, "processId": None}}
SESSION = [
    INIT,
    {"jsonrpc": "2.0", "method": "initialized", "params": {}},
    {"jsonrpc": "2.0", "id": 2, "method": "shutdown"},
    {"jsonrpc": "2.0", "method": "exit"},
]


def test_stdout_carries_only_lsp_frames_even_at_debug_level() -> None:
    stdin = b"".join(frame(m) for m in SESSION)
    # The engine's test double (no model to load), started through `waferline serve`'s own code.
    done = subprocess.run([*serve_command("x"), "-vv"], input=stdin, capture_output=True, timeout=60)
    frames = read_frames(done.stdout)
    assert [f.get("id") for f in frames if "id" in f] == [1, 2]
    assert frames[0]["result"]["capabilities"]["inlineCompletionProvider"] is not None
    assert b"DEBUG" in done.stderr, "logs went to stderr"
    assert done.returncode == 0


def test_tcp_serves_a_client() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen([*SERVE, "--tcp", f"127.0.0.1:{port}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                conn = socket.create_connection(("127.0.0.1", port), timeout=10)
                break
            except OSError:
                assert time.monotonic() < deadline, "the server did not listen"
                time.sleep(0.1)
        with conn:
            conn.sendall(frame(INIT))
            data = b""
            while b"capabilities" not in data or len(read_frames_safe(data)) < 1:
                chunk = conn.recv(65536)
                assert chunk, "connection closed before the answer"
                data += chunk
            assert read_frames_safe(data)[0]["id"] == 1
    finally:
        proc.kill()
        proc.wait(10)


def read_frames_safe(data: bytes) -> list[dict]:
    try:
        return read_frames(data)
    except (AssertionError, ValueError):
        return []


def test_bad_tcp_address_is_one_clear_line() -> None:
    done = subprocess.run([*SERVE, "--tcp", "nowhere"], capture_output=True, timeout=60, text=True)
    assert done.returncode == 2
    assert "HOST:PORT" in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""


def test_requests_before_initialize_and_after_shutdown_get_the_lifecycle_errors() -> None:
    """LSP's lifecycle: a request before `initialize` is ServerNotInitialized (-32002), one after `shutdown`
    InvalidRequest (-32600); both are answered, and `exit` after `shutdown` ends the process with 0."""
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "textDocument/hover",
         "params": {"textDocument": {"uri": "file:///x.py"}, "position": {"line": 0, "character": 0}}},
        {"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {"capabilities": {}}},
        {"jsonrpc": "2.0", "method": "initialized", "params": {}},
        {"jsonrpc": "2.0", "id": 3, "method": "shutdown"},
        {"jsonrpc": "2.0", "id": 4, "method": "waferline/stats", "params": {}},
        {"jsonrpc": "2.0", "method": "exit"},
    ]  # fmt: skip
    done = subprocess.run(
        serve_command("x"), input=b"".join(frame(m) for m in messages),
        capture_output=True, timeout=120,
    )  # fmt: skip
    answers = {f["id"]: f for f in read_frames(done.stdout) if "id" in f}
    assert answers[1]["error"]["code"] == -32002
    assert "result" in answers[2] and "result" in answers[3]
    assert answers[4]["error"]["code"] == -32600
    assert done.returncode == 0
