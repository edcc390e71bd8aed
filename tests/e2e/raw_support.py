"""A raw LSP client over a real `waferline serve` process's stdio, for what pytest-lsp cannot send: bad frames and
malformed messages, written as bytes. The server is the one with the engine's test double (tests/support/
serve_fixed.py), so no model loads; every frame it writes is parsed strictly (stdout carries nothing else)."""

from __future__ import annotations

import contextlib
import json
import queue
import subprocess
import threading
from collections.abc import Iterator
from typing import IO, Any

from lsp_support import serve_command

INIT = {"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {"capabilities": {}, "processId": None}}


def body(msg: Any) -> bytes:
    return json.dumps(msg).encode()


def frame(msg: Any, *, length: Any = None) -> bytes:
    data = body(msg)
    return b"Content-Length: %s\r\n\r\n" % str(len(data) if length is None else length).encode() + data


def request(msg_id: Any, method: str = "waferline/stats", params: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": {} if params is None else params}


class RawServer:
    """`waferline serve` (with the test double) started with pipes; `answer` waits for the response to an id."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [*serve_command("x"), "-v"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        self._responses: queue.Queue[dict[str, Any]] = queue.Queue()
        self.sent: list[dict[str, Any]] = []  # every frame the server wrote: responses, its notifications, requests
        self._stderr = bytearray()
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._threads = [
            threading.Thread(target=self._read_stdout, args=(self.proc.stdout,), daemon=True),
            threading.Thread(target=self._read_stderr, args=(self.proc.stderr,), daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def write(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, msg: Any) -> None:
        self.write(frame(msg))

    def answer(self, timeout: float = 30.0) -> dict[str, Any]:
        """The next response the server writes."""
        try:
            return self._responses.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no answer within {timeout} s; stderr:\n{self.stderr[-3000:]}") from None

    def answers_until(self, msg_id: Any, timeout: float = 30.0) -> list[dict[str, Any]]:
        """Every response up to and including the one to `msg_id`."""
        got = []
        while not got or not isinstance(got[-1], dict) or got[-1].get("id") != msg_id:  # a batch's answer: a list
            got.append(self.answer(timeout))
        return got

    def initialize(self) -> None:
        self.send(INIT)
        assert "result" in self.answer(), "initialize answered"
        self.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})

    def finish(self, timeout: float = 30.0) -> tuple[list[dict[str, Any]], int]:
        """Shut down and exit: the responses still unread (the last one is shutdown's), and the exit code."""
        self.send(request("bye", "shutdown", None))
        rest = self.answers_until("bye", timeout)
        self.send({"jsonrpc": "2.0", "method": "exit"})
        return rest, self.wait(timeout)

    def wait(self, timeout: float = 30.0) -> int:
        """The exit code, once the process has ended and all it wrote has been read (`stderr` is complete)."""
        try:
            code = self.proc.wait(timeout)
        finally:
            self.kill()
        for thread in self._threads:
            thread.join(10)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    @property
    def stderr(self) -> str:
        """What the server logged so far (all of it after `wait` or `finish`)."""
        return self._stderr.decode("utf-8", "replace")

    def _read_stdout(self, out: IO[bytes]) -> None:
        while True:
            header = out.readline()
            if not header:
                return
            assert header.startswith(b"Content-Length: "), f"not an LSP frame on stdout: {header[:80]!r}"
            length = int(header.split(b":")[1])
            while out.readline() not in (b"\r\n", b""):
                pass
            msg = json.loads(out.read(length))
            self.sent.append(msg)
            if "method" not in msg:
                self._responses.put(msg)

    def _read_stderr(self, err: IO[bytes]) -> None:
        for line in err:
            self._stderr += line


@contextlib.contextmanager
def raw_session(*, initialize: bool = True) -> Iterator[RawServer]:
    """A started (and, unless told otherwise, initialized) server; killed on the way out if it is still running."""
    server = RawServer()
    try:
        if initialize:
            server.initialize()
        yield server
    finally:
        server.kill()
