"""WorkspaceIndex: the index of one workspace folder, as the server uses it.

The server builds it in a background thread on `initialized` (`build(progress=...)` reports "indexing N files"),
keeps it current with `update_file` (didChange/didSave: the editor's text wins over the disk while the file is open),
`close_file`, `refresh_file` and `remove_file` (workspace/didChangeWatchedFiles), and asks it `definitions`,
`references`, `search` and `definitions_for_names` from any thread. It reads only inside its folder and executes
nothing from it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pathspec

from waferline.server.repository.builder import content_hash, default_workers, extract_all, make_record, source_lines
from waferline.server.repository.discovery import (
    DEFAULT_EXCLUDES,
    DiscoveryOptions,
    discover,
    file_language,
    is_test_path,
    read_source,
)
from waferline.server.repository.store import FileRecord, IndexStore
from waferline.server.repository.symbols import Definition, Hit, Reference
from waferline.server.repository.tags import Point
from waferline.server.repository.terms import identifier_terms, match_expression, query_terms

log = logging.getLogger(__name__)

DB_NAME = "index.sqlite3"
WRITE_BATCH_FILES = 64
AMBIGUOUS_NAME = 3  # a name with this many definitions elsewhere tells a completion prompt nothing reliable
SEARCH_CANDIDATES = 100  # BM25's best, re-ranked by name_bonus and TEST_WEIGHT
TEST_WEIGHT = 0.5
PROMPT_KINDS_FIRST = ("class", "struct", "interface", "enum", "type", "function", "method")


def default_cache_dir() -> Path:
    """`$XDG_CACHE_HOME/waferline/index` (or `~/.cache/waferline/index`): one sub-folder per workspace folder."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "waferline" / "index"


def cache_path(cache_dir: Path, root: Path) -> Path:
    """Where the index of `root` lives: a folder named by a hash of the folder's resolved path."""
    key = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:16]
    return cache_dir / key / DB_NAME


def name_bonus(name: str, query_terms: set[str]) -> float:
    """1 when the query names the identifier exactly (`urlparse`, `add_argument`), up to 0.5 for the share of its
    words the query uses ("copy a directory tree" and `copy_tree`), else 0."""
    if not name:
        return 0.0
    parts = identifier_terms(name)
    if parts[-1] in query_terms:  # the whole identifier (its parts joined)
        return 1.0
    words = parts[:-1] if len(parts) > 1 else parts
    return 0.5 * sum(w in query_terms for w in words) / len(words) if words else 0.0


@dataclass(frozen=True, kw_only=True)
class IndexOptions(DiscoveryOptions):
    workers: int | None = None  # processes for parsing; None: 0 for small changes, up to 4 for a large build


@dataclass
class BuildReport:
    files: int = 0  # indexable files found
    parsed: int = 0  # files (re)extracted in this build
    reused: int = 0  # files whose cached rows matched their content hash
    removed: int = 0  # files dropped from the index (deleted, now ignored, unreadable)
    skipped: Counter[str] = field(default_factory=Counter)
    source: str = ""  # "git" or "walk"
    truncated: bool = False
    cancelled: bool = False
    seconds: float = 0.0
    cache_discarded: str | None = None  # why the cached index was not trusted, if it was not


class WorkspaceIndex:
    def __init__(
        self, root: Path, cache_dir: Path | None = None, *, options: IndexOptions | None = None, persist: bool = True
    ) -> None:
        """`cache_dir` defaults to default_cache_dir(); `persist=False` keeps the index in memory only."""
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise ValueError(f"{root}: not a folder")
        self.options = options or IndexOptions()
        self.db_path = cache_path(cache_dir or default_cache_dir(), self.root) if persist else None
        self.store = IndexStore(self.db_path, self.root)
        self.ready = False  # True once a build has completed (results before that may be partial)
        self._exclude = pathspec.GitIgnoreSpec.from_lines([*DEFAULT_EXCLUDES, *self.options.exclude])
        self._overlay: dict[str, str] = {}  # relative path -> text of a file open in the editor
        self._build_lock = threading.Lock()
        self._paths: dict[str, Path] = {}  # relative -> absolute, made once per file rather than once per row

    def _absolute(self, rel: str) -> Path:
        path = self._paths.get(rel)
        if path is None:
            path = self._paths[rel] = self.root / rel
        return path

    def close(self) -> None:
        self.store.close()

    # ---- building and keeping current ----------------------------------------------------------------------

    def build(
        self,
        progress: Callable[[int, int], None] | None = None,
        should_cancel: Callable[[], bool] = lambda: False,
    ) -> BuildReport:
        """Bring the index up to date with the folder: parse new and changed files, drop vanished ones.

        `progress(done, total)` is called every few dozen files; `should_cancel()` is polled between files, and a
        cancelled build keeps what it has written (the next build continues from there).
        """
        with self._build_lock:
            self.store.needs_rebuild = False  # an empty store after a failure is rebuilt by this very build
            report = self._build_once(progress, should_cancel)
            if self.store.needs_rebuild and not report.cancelled:  # the cache broke during it: once more
                self.store.needs_rebuild = False
                report = self._build_once(progress, should_cancel)
            self.ready = self.ready or not report.cancelled
            return report

    def _build_once(
        self, progress: Callable[[int, int], None] | None, should_cancel: Callable[[], bool]
    ) -> BuildReport:
        started = time.perf_counter()
        found = discover(self.root, self.options)
        report = BuildReport(files=len(found.files), skipped=found.skipped, source=found.source)
        report.truncated, report.cache_discarded = found.truncated, self.store.discarded
        known = self.store.file_hashes()
        open_files = set(self._overlay)
        present = set(found.files)
        removed = [p for p in known if p not in present and p not in open_files]
        changed = []
        for rel in found.files:
            if rel in open_files:
                report.reused += 1
                continue
            data = read_source(self.root, rel, self.options.max_file_bytes)
            if data is None:
                report.skipped["binary or unreadable"] += 1
                removed.extend([rel] if rel in known else [])
            elif known.get(rel) == content_hash(data):
                report.reused += 1
            else:
                changed.append(rel)
        done, total = report.reused, len(found.files)
        if progress is not None:
            progress(done, total)
        workers = self.options.workers if self.options.workers is not None else default_workers(len(changed))
        batch: list[FileRecord] = []
        for rel, record in extract_all(self.root, changed, self.options.max_file_bytes, workers, should_cancel):
            done += 1
            if record is None:
                removed.append(rel)
            elif rel not in self._overlay:  # opened in the editor meanwhile: its text wins
                batch.append(record)
            if len(batch) >= WRITE_BATCH_FILES:
                self.store.write(batch, removed)
                report.parsed, report.removed = report.parsed + len(batch), report.removed + len(removed)
                batch, removed = [], []
                if progress is not None:
                    progress(done, total)
        self.store.write(batch, removed)
        report.parsed, report.removed = report.parsed + len(batch), report.removed + len(removed)
        report.cancelled = done < total and should_cancel()
        if progress is not None:
            progress(done, total)
        report.seconds = time.perf_counter() - started
        log.info("indexed %s: %s", self.root, report)
        return report

    def relative(self, path: Path | str) -> str | None:
        """The index's name for a file (relative, '/'-separated), or None when it is outside the folder,
        excluded, or in a language that is not indexed."""
        real = Path(os.path.realpath(path))
        if not real.is_relative_to(self.root):
            return None
        rel = real.relative_to(self.root).as_posix()
        if file_language(rel) is None or self._exclude.match_file(rel):
            return None
        return rel

    def update_file(self, path: Path | str, text: str) -> bool:
        """Index the editor's text of a file (didOpen/didChange/didSave); False when the file is not indexed.

        Costs a parse of the file (about 1 ms per 100 lines): call it off the event loop, or debounced.
        """
        rel = self.relative(path)
        if rel is None:
            return False
        self._overlay[rel] = text
        self._write_if_changed(rel, text.encode("utf-8", "surrogatepass"))
        return True

    def close_file(self, path: Path | str) -> bool:
        """The editor closed the file: index what is on disk again (didClose)."""
        rel = self.relative(path)
        if rel is None:
            return False
        self._overlay.pop(rel, None)
        return self.refresh_file(path)

    def refresh_file(self, path: Path | str) -> bool:
        """Re-read one file from disk (workspace/didChangeWatchedFiles: created or changed)."""
        rel = self.relative(path)
        if rel is None or rel in self._overlay:
            return False
        data = read_source(self.root, rel, self.options.max_file_bytes)
        if data is None:
            self.store.write([], [rel])
            return False
        self._write_if_changed(rel, data)
        return True

    def _write_if_changed(self, rel: str, data: bytes) -> None:
        """Re-extract a file whose content is not the one its rows were extracted from."""
        digest = content_hash(data)
        if self.store.file_hashes_of([rel]).get(rel) != digest:
            self.store.write([make_record(rel, data, digest)])

    def remove_file(self, path: Path | str) -> bool:
        """Forget a file (deleted, or didChangeWatchedFiles: deleted)."""
        rel = self.relative(path)
        if rel is None:
            return False
        self._overlay.pop(rel, None)
        self.store.write([], [rel])
        return True

    def remove_path(self, path: Path) -> None:
        """A deleted file, or a deleted folder: every indexed file under it goes."""
        if self.remove_file(path):
            return
        probe = self.relative(path / "x.py")  # the folder's own name would not pass the language filter
        if probe is None:
            return
        prefix = probe.removesuffix("x.py")
        for known in [k for k in self.store.file_hashes() if k.startswith(prefix)]:
            self.remove_file(self.root / known)

    # ---- answering -----------------------------------------------------------------------------------------

    def _definition(self, row: tuple) -> Definition:
        _, path, language, name, kind, container, sl, sc, el, ec, nsl, nsc, nel, nec, signature, doc = row
        return Definition(
            name, kind, self._absolute(path), ((sl, sc), (el, ec)), ((nsl, nsc), (nel, nec)), signature, doc, container,
            language,
        )  # fmt: skip

    def definitions(self, name: str) -> list[Definition]:
        """Every definition named `name` (exact, case-sensitive), ordered by path and line."""
        return [self._definition(row) for row in self.store.definitions(name)]

    def definitions_in_file(self, path: Path | str) -> list[Definition]:
        rel = self.relative(path)
        return [] if rel is None else [self._definition(row) for row in self.store.definitions_in_file(rel)]

    def definitions_ranked(
        self, name: str, key: Callable[[Path, str, Point], Any], n: int
    ) -> tuple[list[Definition], int]:
        """The n best definitions of `name` by `key(path, kind, start)` (lowest first), and how many there are.

        For hover: a name like `__init__` has thousands of definitions, and building them all would cost more than
        the whole hover may take."""
        sketches = self.store.definition_sketches(name)
        best = sorted(sketches, key=lambda s: key(self._absolute(s[1]), s[2], (s[3], s[4])))[:n]
        rows = {row[0]: row for row in self.store.definitions_by_id([s[0] for s in best])}
        return [self._definition(rows[s[0]]) for s in best if s[0] in rows], len(sketches)

    def references(self, name: str, limit: int = 1000, calls_first: bool = False) -> list[Reference]:
        """Uses of `name` (calls, inheritance, types, imports), ordered by path and position, at most `limit`
        (with `calls_first`: calls, then non-test paths, first)."""
        out = []
        for path, kind, sl, sc, el, ec, enc_name, enc_container in self.store.references(name, limit, calls_first):
            enclosing = None if enc_name is None else (f"{enc_container}.{enc_name}" if enc_container else enc_name)
            out.append(Reference(name, kind, self._absolute(path), ((sl, sc), (el, ec)), enclosing))
        return out

    def reference_count(self, name: str) -> tuple[int, int]:
        """(uses of `name`, files that use it)."""
        uses, files = self.store.reference_count(name)
        return int(uses), int(files)

    def search(self, query: str, k: int = 10) -> list[Hit]:
        """The k best matches for a question or identifier.

        BM25 (SQLite FTS5) over names, paths, signatures, docstrings and code picks SEARCH_CANDIDATES; then a hit
        whose name the query spells out gains (FTS5's BM25 saturates term counts over a whole row, so a body that
        repeats a word can outscore the definition named by it), and test code counts half.
        """
        match = match_expression(query)
        if match is None or k <= 0:
            return []
        terms = set(query_terms(query))
        hits = []
        for row in self.store.search(match, max(SEARCH_CANDIDATES, 4 * k)):
            path, kind, sl, el, name, container, sc, ec, signature, doc, body, bm25 = row
            span = ((sl, sc), (el, ec)) if name is not None else ((sl, 0), (el + 1, 0))
            absolute = self._absolute(path)
            score = bm25 * (1 + name_bonus(name or "", terms)) * (TEST_WEIGHT if is_test_path(absolute) else 1)
            hit = Hit(absolute, span, kind, name or "", container or "", signature or "", doc or "", body, score)
            hits.append(hit)
        hits.sort(key=lambda h: -h.score)
        return hits[:k]

    def definitions_for_names(
        self, names: Iterable[str], exclude_path: Path | str | None, limit: int = 8
    ) -> list[Definition]:
        """Definitions, in other files, of the names used near the cursor: context for the completion prompt.

        A name defined in `exclude_path` (the file being edited) is skipped (the prompt already shows it), and so is
        a name with AMBIGUOUS_NAME or more definitions elsewhere. At most one definition per name (classes and
        functions before variables), at most `limit` in all, returned sorted by path and line: a stable order keeps
        the prompt's prefix, and with it the model's KV cache, reusable while the cursor moves.
        """
        excluded = None if exclude_path is None else Path(os.path.realpath(exclude_path))
        chosen: list[Definition] = []
        for name in dict.fromkeys(names):
            if len(chosen) >= limit:
                break
            found = self.definitions(name)
            if excluded is not None and any(d.path == excluded for d in found):
                continue
            if not found or len(found) >= AMBIGUOUS_NAME:
                continue
            rank = {kind: i for i, kind in enumerate(PROMPT_KINDS_FIRST)}
            chosen.append(min(found, key=lambda d: (rank.get(d.kind, len(rank)), str(d.path), d.range)))
        return sorted(chosen, key=lambda d: (str(d.path), d.range))

    def source_lines(self, path: Path, start: int, end: int) -> list[str]:
        """Lines start..end (inclusive, zero-based) of an indexed file: the editor's text when open, else the disk's."""
        rel = self.relative(path)
        if rel is None:
            return []
        text = self._overlay.get(rel)
        if text is None:
            data = read_source(self.root, rel, self.options.max_file_bytes)
            text = "" if data is None else data.decode("utf-8", "replace")
        return source_lines(text)[start : end + 1]
