"""A raw JSON-RPC client for the server over stdio, for fuzzing: it sends any bytes, valid LSP or not.

    client = RawClient.start(command)        # the server process; stdout and stderr read on their own threads
    client.send({"jsonrpc": "2.0", ...})     # an object (written as JSON, `ensure_ascii` so "\\ud800" stays text)
    client.send_bytes(b"...")                # or a frame, or garbage, exactly as given
    client.wait_for_ids({1, 2}, timeout=20)  # until each id has its response(s), or the timeout

Every frame the server writes is kept in order (`received`; a batch's answers as the one array they came in, which
`responses` and `wait_for_ids` read each on its own), stderr line by line (`stderr`). Requests from the
server (`workspace/configuration`, `workspace/applyEdit`, `window/workDoneProgress/create`) are answered at once,
as an editor would, so that no handler waits on the client. Everything written is kept in `sent` as JSON lines,
which tests/support/replay_lsp.py sends again.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

ANSWERS: dict[str, Any] = {  # what this client answers to the server's own requests
    "workspace/applyEdit": {"applied": False, "failureReason": "the fuzzing client applies nothing"},
    "window/workDoneProgress/create": None,
    "client/registerCapability": None,
}


def _flat(messages: list[Any]) -> list[Any]:
    """The messages, with the answers in a batch's array (JSON-RPC 2.0) each on its own."""
    return [m for ms in messages for m in (ms if isinstance(ms, list) else [ms])]


def frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def encode(message: Any) -> bytes:
    """A message as the JSON text a client sends: lone surrogates stay `\\udXXX` escapes, as editors write them."""
    return json.dumps(message, ensure_ascii=True, separators=(",", ":")).encode("ascii")


@dataclass
class RawClient:
    process: subprocess.Popen[bytes]
    received: list[dict[str, Any]] = field(default_factory=list)  # every message the server wrote, in order
    stderr: list[str] = field(default_factory=list)
    sent: list[str] = field(default_factory=list)  # what was written, one JSON text (or {"raw": ...}) per line
    _lock: threading.Condition = field(default_factory=threading.Condition)

    @classmethod
    def start(cls, command: list[str]) -> RawClient:
        process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        client = cls(process)
        threading.Thread(target=client._read_stdout, daemon=True).start()
        threading.Thread(target=client._read_stderr, daemon=True).start()
        return client

    # -- writing ----------------------------------------------------------------------------------------------------
    def send(self, message: Any) -> None:
        body = encode(message)
        self.sent.append(body.decode("ascii"))
        self._write(frame(body))

    def send_bytes(self, data: bytes) -> None:
        self.sent.append(json.dumps({"raw": data.decode("latin-1")}))
        self._write(data)

    def _write(self, data: bytes) -> None:
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(data)
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # the server is gone: the invariant checks say so

    # -- reading ----------------------------------------------------------------------------------------------------
    def _read_stdout(self) -> None:
        out = self.process.stdout
        assert out is not None
        while True:
            length = None
            while True:  # headers
                line = out.readline()
                if not line:
                    with self._lock:
                        self._lock.notify_all()
                    return
                if line in (b"\r\n", b"\n"):
                    break
                name, _, value = line.decode("ascii", "replace").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            if length is None:
                continue
            body = out.read(length)
            try:
                message = json.loads(body)
            except ValueError:
                message = {"unparsable": body.decode("utf-8", "replace")}
            self._answer(message)
            with self._lock:
                self.received.append(message)
                self._lock.notify_all()

    def _answer(self, message: Any) -> None:
        """Answer a request from the server, as an editor would."""
        if not isinstance(message, dict) or "method" not in message or "id" not in message:
            return
        method = message["method"]
        if method == "workspace/configuration":
            items = (message.get("params") or {}).get("items") or []
            result: Any = [None] * len(items)
        else:
            result = ANSWERS.get(method)
        body = encode({"jsonrpc": "2.0", "id": message["id"], "result": result})
        self._write(frame(body))

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr.append(line.decode("utf-8", "replace"))

    # -- waiting ----------------------------------------------------------------------------------------------------
    def responses(self, start: int = 0) -> list[dict[str, Any]]:
        """Responses (not the server's requests or notifications) among the messages from index `start` on."""
        with self._lock:
            return [m for m in _flat(self.received[start:]) if isinstance(m, dict) and "method" not in m]

    def wait_for_ids(self, ids: Iterable[Any], *, start: int = 0, timeout: float = 30.0) -> bool:
        """Wait until every id has a response (among messages from `start` on); False at the timeout or when the
        server has exited."""
        wanted = {json.dumps(i) for i in ids}
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                got = {
                    json.dumps(m.get("id"))
                    for m in _flat(self.received[start:])
                    if isinstance(m, dict) and "method" not in m
                }
                if wanted <= got:
                    return True
                left = deadline - time.monotonic()
                if left <= 0 or self.process.poll() is not None:
                    return False
                self._lock.wait(min(left, 0.5))

    def request(self, method: str, params: Any, msg_id: Any, *, timeout: float = 30.0) -> dict[str, Any]:
        """Send one request and return its response (AssertionError when none comes)."""
        start = len(self.received)
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        assert self.wait_for_ids([msg_id], start=start, timeout=timeout), f"no answer to {method} ({msg_id!r})"
        return next(m for m in self.responses(start) if m.get("id") == msg_id)

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout: float = 10.0) -> int | None:
        """shutdown + exit when the server is up, then wait for it (killed after the timeout)."""
        if self.alive():
            self.send({"jsonrpc": "2.0", "id": "raw-shutdown", "method": "shutdown"})
            self.wait_for_ids(["raw-shutdown"], timeout=timeout)
            self.send({"jsonrpc": "2.0", "method": "exit"})
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()
        finally:
            for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
                if stream is not None:
                    stream.close()
