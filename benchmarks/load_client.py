"""The client side of `waferline bench-load` (benchmarks/load.py): a JSON-RPC client over the server's pipes that
writes without waiting and matches answers by id, and the server process's memory and CPU from /proc."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Sent:
    doc: int
    at: float
    last_of_burst: bool
    answered_at: float | None = None
    nonempty: bool = False
    error: str | None = None


@dataclass
class Client:
    """A JSON-RPC client over the server's pipes that writes without waiting and matches answers by id."""

    proc: asyncio.subprocess.Process
    sent: dict[int, Sent] = field(default_factory=dict)
    replies: dict[int, asyncio.Future[Any]] = field(default_factory=dict)
    next_id: int = 0
    backlog_max: int = 0
    stderr_tail: list[str] = field(default_factory=list)

    def write(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        self.backlog_max = max(self.backlog_max, self.proc.stdin.transport.get_write_buffer_size())

    def notify(self, method: str, params: Any) -> None:
        self.write({"method": method, "params": params})

    def request(self, method: str, params: Any, sent: Sent | None = None) -> asyncio.Future[Any]:
        self.next_id += 1
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.replies[self.next_id] = future
        if sent is not None:
            self.sent[self.next_id] = sent
        self.write({"id": self.next_id, "method": method, "params": params})
        return future

    async def read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            length = 0
            while (line := await out.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode("ascii").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            if line == b"":
                return
            message = json.loads(await out.readexactly(length))
            if "method" in message:  # a request from the server (progress, registration...): a null answer
                if "id" in message:
                    self.write({"id": message["id"], "result": None})
                continue
            now = time.perf_counter()
            if (sent := self.sent.get(message.get("id"))) is not None:
                sent.answered_at = now
                items = (message.get("result") or {}).get("items") if isinstance(message.get("result"), dict) else []
                sent.nonempty = bool(items)
                sent.error = (message.get("error") or {}).get("message")
            if (future := self.replies.pop(message.get("id"), None)) is not None and not future.done():
                future.set_result(message.get("result"))

    async def drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        while line := await self.proc.stderr.readline():
            self.stderr_tail = [*self.stderr_tail[-20:], line.decode(errors="replace").rstrip()]


def proc_figures(pid: int) -> dict[str, float]:
    """The process's resident memory now and at its peak (MB), and its CPU time so far (s), from /proc."""
    out: dict[str, float] = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(("VmRSS:", "VmHWM:")):
                out[line[:5].lower()] = int(line.split()[1]) / 1024
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        out["cpu_s"] = (int(fields[11]) + int(fields[12])) / 100.0  # utime + stime, in clock ticks (USER_HZ 100)
    except (OSError, IndexError, ValueError):
        pass
    return out
