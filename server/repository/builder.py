"""Turning files into index records, in this process or in a small pool of worker processes.

Parsing is the costly part of a cold build (the standard library's ~1,800 files take seconds of tree-sitter time
alone), so when many files changed the work is spread over worker processes (started with "spawn", which is safe
from a server with threads). Workers get only paths: each reads, hashes and parses its files and sends back records,
a few batches at a time, so that memory stays bounded however large the folder.
"""

from __future__ import annotations

import hashlib
import logging
import multiprocessing
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path

from waferline.server.repository.discovery import file_language, read_source
from waferline.server.repository.search_docs import build_documents
from waferline.server.repository.store import FileRecord
from waferline.server.repository.tags import extract

log = logging.getLogger(__name__)

POOL_MIN_FILES = 200  # fewer changed files than this are parsed in-process: starting workers costs ~1 s
CHUNK_FILES = 16  # files per task sent to a worker
IN_FLIGHT_PER_WORKER = 3


def content_hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def source_lines(text: str) -> list[str]:
    """A file's lines as tree-sitter numbers them: split at "\n" only (str.splitlines also splits at form feeds and
    other separators that old sources contain, which would shift every line number after them)."""
    return [line.removesuffix("\r") for line in text.split("\n")]


def make_record(rel_path: str, data: bytes, digest: str | None = None) -> FileRecord:
    """Extract tags and search documents from a file's bytes (not necessarily those on disk: an editor's buffer)."""
    language = file_language(rel_path) or "text"
    tags = extract(data, language)
    lines = source_lines(data.decode("utf-8", "replace"))
    return FileRecord(rel_path, digest or content_hash(data), language, tags, build_documents(lines, tags))


def read_and_extract(root: str, rel_paths: list[str], max_bytes: int) -> list[tuple[str, FileRecord | None]]:
    """Worker task: for each path, its record, or None when it can no longer be read (gone, binary, too large)."""
    out: list[tuple[str, FileRecord | None]] = []
    for rel in rel_paths:
        data = read_source(Path(root), rel, max_bytes)
        out.append((rel, None if data is None else make_record(rel, data)))
    return out


def default_workers(changed_files: int) -> int:
    if changed_files < POOL_MIN_FILES:
        return 0
    return max(0, min(os.cpu_count() or 1, 4)) if (os.cpu_count() or 1) > 1 else 0


def extract_all(
    root: Path,
    rel_paths: list[str],
    max_bytes: int,
    workers: int,
    should_cancel: Callable[[], bool],
) -> Iterator[tuple[str, FileRecord | None]]:
    """Records for `rel_paths` in order; stops early (without error) once `should_cancel()` is true."""
    if workers <= 0:
        for rel in rel_paths:
            if should_cancel():
                return
            yield from read_and_extract(str(root), [rel], max_bytes)
        return
    chunks = [rel_paths[i : i + CHUNK_FILES] for i in range(0, len(rel_paths), CHUNK_FILES)]
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=context)
    try:
        yield from _pipeline(pool, root, chunks, max_bytes, workers * IN_FLIGHT_PER_WORKER, should_cancel)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _pipeline(
    pool: ProcessPoolExecutor,
    root: Path,
    chunks: Iterable[list[str]],
    max_bytes: int,
    in_flight: int,
    should_cancel: Callable[[], bool],
) -> Iterator[tuple[str, FileRecord | None]]:
    pending: deque[Future[list[tuple[str, FileRecord | None]]]] = deque()
    todo = iter(chunks)
    while True:
        while len(pending) < in_flight and (chunk := next(todo, None)) is not None:
            pending.append(pool.submit(read_and_extract, str(root), chunk, max_bytes))
        if not pending:
            return
        results = pending.popleft().result()
        yield from results
        if should_cancel():
            return
