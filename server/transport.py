"""The server's connection to its client, over stdio or one TCP socket: bytes in through server/framing.py, each
message handed to `WaferlineProtocol.receive` (server/protocol.py), answers out through pygls' writer.

This replaces pygls' own read loop (pygls/io_.py `run_async`), which ends the conversation at the first bad frame.
Stdin that is a pipe, a socket or a terminal (what an editor gives) is read by the event loop itself, through
asyncio's read-pipe transport (`PipeChunks`): each chunk costs one wake-up of the loop. Anything else (a file, a
stream without a descriptor) is read on a daemon thread (`StdinChunks`, with os.read), so the event loop never
blocks on it and a blocked read never keeps the process from exiting; handing a chunk from that thread to the loop
costs two more wake-ups (0.6 ms against 0.4 for a round trip over pipes on the 2-core machine, 2026-12-02). Either
way at most `QUEUED_CHUNKS` chunks wait for the loop, so a client that writes faster than the server reads is held
back by the pipe rather than by the server's memory. A frame left incomplete
is judged after `IDLE_S` seconds without input (see framing.py). The process's exit code is LSP's: 0 after
`shutdown`, 1 without.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import stat
import sys
import threading
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any, BinaryIO

from pygls.io_ import StdoutWriter

from waferline.server.framing import Dropped, Event, FrameParser, Message
from waferline.server.protocol import WaferlineProtocol

if TYPE_CHECKING:
    from waferline.server.app import WaferlineServer

log = logging.getLogger(__name__)

CHUNK = 64 * 1024  # bytes per read
QUEUED_CHUNKS = 16  # chunks read ahead of the event loop (1 MiB)
IDLE_S = 0.25  # seconds without input after which an incomplete frame is judged


async def read_messages(read: Callable[[], Awaitable[bytes]], protocol: WaferlineProtocol) -> None:
    """Read frames until the input ends (`read` returns b"") and hand each message to the protocol."""
    parser = FrameParser()
    reading: asyncio.Future[bytes] | None = None
    judged = False  # the pause since the last bytes has been used to judge an incomplete frame
    while True:
        if reading is None:
            reading = asyncio.ensure_future(read())
        timeout = IDLE_S if parser.pending and not judged else None
        done, _ = await asyncio.wait({reading}, timeout=timeout)
        if not done:
            judged = True
            await deliver(protocol, parser.idle())
            continue
        data, reading, judged = reading.result(), None, False
        await deliver(protocol, parser.feed(data) if data else parser.close())
        if not data:
            return


async def deliver(protocol: WaferlineProtocol, events: list[Event]) -> None:
    """Hand messages to the protocol; log what was wrong with a frame (one line), answer what can be answered.

    After each message the event loop turns once, so that the task an asynchronous handler was given takes its
    first step (reads its document) before the next message of the same chunk is handled: a request sent before a
    `didOpen` or `didChange` is served against the document as it was when the request came (found by the fuzzer).
    """
    for event in events:
        if isinstance(event, Message):
            if event.problem is not None:
                log.warning("bad frame, its message read anyway: %s", event.problem)
            try:
                protocol.receive(event.value)
            except (BrokenPipeError, ConnectionError):
                raise  # the client is gone: the conversation ends
            except Exception:  # a bug in handling one message must not end the conversation
                log.exception("internal error handling a message")
            await asyncio.sleep(0)
        elif isinstance(event, Dropped):
            log.warning("bad frame: %s", event.reason)
        else:
            log.warning("bad frame, answered %d: %s", event.code, event.reason)
            protocol.refuse(event.code, event.reason)


class StdinChunks:
    """Chunks of a binary stream read on a daemon thread, awaited on the event loop; b"" at the end of input."""

    def __init__(self, stream: BinaryIO, loop: asyncio.AbstractEventLoop) -> None:
        self._stream, self._loop = stream, loop
        self._queue: asyncio.Queue[bytes] = asyncio.Queue(QUEUED_CHUNKS)
        threading.Thread(target=self._run, name="waferline-stdin", daemon=True).start()

    async def read(self) -> bytes:
        return await self._queue.get()

    def _run(self) -> None:
        read = _reader(self._stream)
        while True:
            try:
                data = read(CHUNK)
            except (OSError, ValueError) as e:  # closed under us: the input has ended
                log.info("stdin: %s", e)
                data = b""
            try:  # waits while the queue is full: the pipe, not memory, holds what the loop has not read
                asyncio.run_coroutine_threadsafe(self._queue.put(data), self._loop).result()
            except (RuntimeError, concurrent.futures.CancelledError):  # the loop has stopped
                return
            if not data:
                return


class PipeChunks(asyncio.Protocol):
    """Chunks of a pipe, socket or terminal, read by the event loop (asyncio's read-pipe transport), awaited like
    `StdinChunks`; b"" at the end of input. Reading pauses while `QUEUED_CHUNKS` chunks wait."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[bytes] = asyncio.Queue()
        self._transport: asyncio.ReadTransport | None = None
        self._ended = False

    @staticmethod
    def readable(stream: BinaryIO) -> bool:
        """Whether `stream` is a descriptor the read-pipe transport takes."""
        try:
            mode = os.fstat(stream.fileno()).st_mode
        except (AttributeError, OSError, ValueError):
            return False
        return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)

    async def start(self, stream: BinaryIO) -> None:
        await asyncio.get_running_loop().connect_read_pipe(lambda: self, stream)

    async def read(self) -> bytes:
        data = await self._queue.get()
        t = self._transport
        if t is not None and not t.is_reading() and self._queue.qsize() < QUEUED_CHUNKS:  # a no-op once closed
            t.resume_reading()
        return data

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.ReadTransport)
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        self._queue.put_nowait(data)
        if self._queue.qsize() >= QUEUED_CHUNKS and self._transport is not None and self._transport.is_reading():
            self._transport.pause_reading()

    def eof_received(self) -> bool:
        self._end()
        return False  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is not None:
            log.info("stdin: %s", exc)
        self._end()

    def _end(self) -> None:
        if not self._ended:
            self._ended = True
            self._queue.put_nowait(b"")


def _reader(stream: BinaryIO) -> Callable[[int], bytes]:
    """A read of up to n bytes that returns what is there. On a file descriptor, os.read: a buffered reader's lock,
    held by a thread blocked in it, would abort the interpreter's shutdown ("could not acquire lock for <stdin>")."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError
        return getattr(stream, "read1", stream.read)
    return partial(os.read, fd)


def serve_stdio(server: WaferlineServer, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> int:
    """Serve one client on stdin/stdout until `exit` or the end of input; the process's exit code."""
    protocol = _protocol(server)
    protocol.set_writer(StdoutWriter(stdout or sys.stdout.buffer))

    async def serve() -> None:
        stream = stdin or sys.stdin.buffer
        chunks: PipeChunks | StdinChunks
        if PipeChunks.readable(stream):
            chunks = PipeChunks()
            await chunks.start(stream)
        else:
            chunks = StdinChunks(stream, asyncio.get_running_loop())
        await read_messages(chunks.read, protocol)

    return _run(server, serve())


def serve_tcp(server: WaferlineServer, host: str, port: int) -> int:
    """Listen on host:port and serve the first client that connects until `exit` or it disconnects."""
    protocol = _protocol(server)

    async def serve() -> None:
        finished = asyncio.Event()

        async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            protocol.set_writer(writer)  # pygls writes bytes to it, as to stdout
            try:
                await read_messages(lambda: reader.read(CHUNK), protocol)
            finally:
                finished.set()

        listener = await asyncio.start_server(connection, host, port)
        log.info("serving on %s", ", ".join(str(s.getsockname()) for s in listener.sockets))
        async with listener:
            await finished.wait()

    return _run(server, serve())


def _protocol(server: WaferlineServer) -> WaferlineProtocol:
    protocol = server.protocol
    assert isinstance(protocol, WaferlineProtocol), "WaferlineServer is built with WaferlineProtocol"
    return protocol


def _run(server: WaferlineServer, serve: Any) -> int:
    try:
        asyncio.run(serve)
    except SystemExit as e:  # `exit`: pygls' handler ends the process with LSP's code
        return e.code if isinstance(e.code, int) else 1
    except (BrokenPipeError, ConnectionError):
        log.error("the connection to the client is lost; shutting down")
    finally:
        server.shutdown()
    return 0 if server.protocol._shutdown else 1  # the input ended: as `exit` would
