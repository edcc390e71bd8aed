"""server/transport.py's input side: stdin read by the event loop where it is a pipe, on a thread otherwise."""

from __future__ import annotations

import asyncio
import io
import os
import threading
from pathlib import Path

from waferline.server.transport import QUEUED_CHUNKS, PipeChunks, StdinChunks


def test_pipes_are_read_by_the_loop_and_files_on_a_thread(tmp_path: Path) -> None:
    r, w = os.pipe()
    try:
        with open(r, "rb", buffering=0, closefd=False) as pipe:
            assert PipeChunks.readable(pipe)
    finally:
        os.close(r)
        os.close(w)
    path = tmp_path / "input"
    path.write_bytes(b"x")
    with path.open("rb") as f:
        assert not PipeChunks.readable(f)
    assert not PipeChunks.readable(io.BytesIO(b"x"))  # type: ignore[arg-type]


def test_a_pipe_gives_every_byte_then_the_end_and_holds_back_a_fast_writer() -> None:
    """What is written arrives whole and in order, then b"" once the writer closes; while nothing is read, the loop
    stops reading after QUEUED_CHUNKS chunks, so the writer blocks on the full pipe instead of the server's memory
    growing."""
    payload = bytes(range(256)) * 16384  # 4 MiB: many more than QUEUED_CHUNKS reads of a 64 KiB pipe

    async def main() -> tuple[bytes, int]:
        r, w = os.pipe()
        stream = open(r, "rb", buffering=0)  # noqa: SIM115 (the transport closes it at the end of input)
        chunks = PipeChunks()
        await chunks.start(stream)
        writer = threading.Thread(target=_write_all, args=(w, payload))
        writer.start()
        await asyncio.sleep(0.3)  # the writer fills the pipe; nobody reads
        queued = chunks._queue.qsize()
        got = bytearray()
        while data := await chunks.read():
            got += data
        writer.join()
        return bytes(got), queued

    got, queued = asyncio.run(main())
    assert got == payload
    assert 1 <= queued <= QUEUED_CHUNKS


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.close(fd)


def test_a_stream_without_a_descriptor_is_read_on_the_thread() -> None:
    async def main() -> bytes:
        chunks = StdinChunks(io.BytesIO(b"abc"), asyncio.get_running_loop())  # type: ignore[arg-type]
        got = bytearray()
        while data := await chunks.read():
            got += data
        return bytes(got)

    assert asyncio.run(main()) == b"abc"
