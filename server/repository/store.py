"""The index on disk: one SQLite database per workspace folder, with an FTS5 table for ranked (BM25) search.

Why SQLite: lookups by name use B-tree indexes without loading the index into memory (the standard library's index
is ~100 MB on disk and costs the server almost nothing in RAM), one file's rows are replaced in a transaction on
every save, FTS5's `bm25()` ranks search results, and a restart only opens the file. Nothing is pickled.

Trust: the file records a format version (`PRAGMA user_version`), the folder it describes and a fingerprint of the
tag queries; a mismatch, or a file SQLite cannot read or that fails `PRAGMA quick_check`, is deleted and rebuilt.
An error while reading later does the same (the caller rebuilds when `needs_rebuild` is set). Each file's rows carry
the hash of the content they were extracted from, so only changed files are parsed again.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from waferline.server.repository.search_docs import SearchDoc
from waferline.server.repository.tags import FileTags
from waferline.server.repository.terms import text_terms
from waferline.syntax.languages import QUERY_PACKAGE, TAGS

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
# Column weights for bm25(): name, path, signature, docstring, code.
SEARCH_WEIGHTS = (8.0, 2.0, 4.0, 2.0, 1.0)

SCHEMA = """
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE files(id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE, hash TEXT NOT NULL, language TEXT NOT NULL);
CREATE TABLE defs(id INTEGER PRIMARY KEY, file_id INTEGER NOT NULL, name TEXT NOT NULL, kind TEXT NOT NULL,
  container TEXT NOT NULL, sl INTEGER, sc INTEGER, el INTEGER, ec INTEGER, nsl INTEGER, nsc INTEGER, nel INTEGER,
  nec INTEGER, signature TEXT NOT NULL, doc TEXT NOT NULL, parent INTEGER);
CREATE INDEX defs_name ON defs(name);
CREATE INDEX defs_file ON defs(file_id);
CREATE TABLE refs(file_id INTEGER NOT NULL, name TEXT NOT NULL, kind TEXT NOT NULL, sl INTEGER, sc INTEGER,
  el INTEGER, ec INTEGER, enclosing INTEGER);
CREATE INDEX refs_name ON refs(name);
CREATE INDEX refs_file ON refs(file_id);
CREATE TABLE docs(id INTEGER PRIMARY KEY, file_id INTEGER NOT NULL, def_id INTEGER, kind TEXT NOT NULL,
  sl INTEGER NOT NULL, el INTEGER NOT NULL);
CREATE INDEX docs_file ON docs(file_id);
CREATE VIRTUAL TABLE search USING fts5(name, path, signature, doc, body, tokenize = 'porter unicode61');
"""

DEF_COLUMNS = "d.id, f.path, f.language, d.name, d.kind, d.container, d.sl, d.sc, d.el, d.ec, d.nsl, d.nsc, d.nel, \
d.nec, d.signature, d.doc"


@dataclass(frozen=True, slots=True)
class FileRecord:
    """One file's extraction, ready to be written: the tags and the search documents built from them."""

    path: str  # relative to the workspace root, with '/' separators
    content_hash: str
    language: str
    tags: FileTags
    documents: list[SearchDoc]


# The modules whose code decides what a file's rows contain.
EXTRACTOR_MODULES = ("tags.py", "search_docs.py", "terms.py", "store.py", "builder.py")


@cache
def extractor_fingerprint() -> str:
    """Changes whenever the format, a tag query or the extraction code changes: an upgrade re-extracts every file."""
    h = hashlib.sha256(str(FORMAT_VERSION).encode())
    queries = resources.files(QUERY_PACKAGE)
    entries = [e for e in queries.iterdir() if e.name.endswith(f".{TAGS}.scm")]
    entries += [resources.files("waferline.server.repository").joinpath(name) for name in EXTRACTOR_MODULES]
    for entry in sorted(entries, key=lambda e: e.name):
        h.update(entry.name.encode() + entry.read_bytes())
    return h.hexdigest()[:16]


class IndexStore:
    """Thread-safe access to the database (the server reads while a background build writes).

    Two connections to one file: writes go through one, lookups through the other, and in WAL mode a lookup reads
    the last committed state without waiting for a write in progress, so a hover stays fast during a cold build.
    (An in-memory database has one connection, and one lock serialises everything.)
    """

    def __init__(self, db_path: Path | None, root: Path) -> None:
        self.db_path = db_path
        self.root = str(root)
        self.discarded: str | None = None  # why an existing cache file was not trusted, when one was not
        self.needs_rebuild = False
        self._write_lock = threading.RLock()
        self._read_lock = self._write_lock if db_path is None else threading.RLock()
        self._conn = self._open()
        self._reader = self._conn if db_path is None else self._connect()

    # ---- opening, checking, recovering -------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        target = ":memory:" if self.db_path is None else str(self.db_path)
        conn = sqlite3.connect(target, check_same_thread=False, isolation_level=None, timeout=10.0)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")  # a torn write is caught by quick_check and rebuilt
        return conn

    def _open(self) -> sqlite3.Connection:
        if self.db_path is not None:
            self.db_path.parent.mkdir(parents=True, exist_ok=True)
        conn: sqlite3.Connection | None = None
        try:
            conn = self._connect()
            problem = self._problem(conn)
        except sqlite3.DatabaseError as e:
            problem = f"unreadable ({e})"
        if problem is None and conn is not None:
            return conn
        if conn is not None:
            conn.close()
        if problem != "empty":
            self.discarded = problem
            log.warning("index cache %s not trusted: %s; rebuilding", self.db_path, problem)
        self._delete_files()
        conn = self._connect()
        conn.executescript(SCHEMA)
        conn.executemany(
            "INSERT INTO meta VALUES (?, ?)", [("root", self.root), ("extractor", extractor_fingerprint())]
        )
        conn.execute(f"PRAGMA user_version = {FORMAT_VERSION}")
        return conn

    def _problem(self, conn: sqlite3.Connection) -> str | None:
        """None when the database can be trusted, "empty" for a new file, else why it cannot be."""
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version == 0 and conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0:
            return "empty"
        if version != FORMAT_VERSION:
            return f"format version {version}, expected {FORMAT_VERSION}"
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        if meta.get("root") != self.root:
            return f"built for {meta.get('root')!r}, not {self.root!r}"
        if meta.get("extractor") != extractor_fingerprint():
            return "built by another version of the extractor (tag queries or code)"
        check = conn.execute("PRAGMA quick_check").fetchone()[0]
        return None if check == "ok" else f"quick_check: {check}"

    def _delete_files(self) -> None:
        if self.db_path is None:
            return
        for suffix in ("", "-wal", "-shm"):
            Path(f"{self.db_path}{suffix}").unlink(missing_ok=True)

    def _recover(self, error: sqlite3.DatabaseError) -> None:
        """A read or write failed: start from an empty database and ask the owner to rebuild."""
        with self._write_lock, self._read_lock:  # always in this order
            log.warning("index cache %s failed (%s); starting again", self.db_path, error)
            self.discarded = f"failed while in use ({error})"
            self.needs_rebuild = True
            self._reader.close()
            self._conn.close()
            self._delete_files()
            self._conn = self._open()
            self._reader = self._conn if self.db_path is None else self._connect()

    @contextmanager
    def _guarded(self, write: bool) -> Iterator[sqlite3.Connection]:
        try:
            with self._write_lock if write else self._read_lock:
                yield self._conn if write else self._reader
        except sqlite3.DatabaseError as e:  # the lock is released by now: _recover takes both in a fixed order
            self._recover(e)

    def _rows(self, sql: str, params: Iterable[Any] = ()) -> list[tuple]:
        with self._guarded(write=False) as conn:
            return conn.execute(sql, tuple(params)).fetchall()
        return []  # reached only when _guarded recovered from an error

    def close(self) -> None:
        with self._write_lock, self._read_lock:
            self._reader.close()
            self._conn.close()

    # ---- writing ------------------------------------------------------------------------------------------------

    def write(self, records: list[FileRecord], removed: Iterable[str] = ()) -> None:
        """Replace the rows of each record's file and delete the `removed` files, in one transaction."""
        with self._guarded(write=True) as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                for path in removed:
                    self._delete(conn, path)
                for record in records:
                    self._delete(conn, record.path)
                    self._insert(conn, record)
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def _delete(self, conn: sqlite3.Connection, path: str) -> None:
        row = conn.execute("SELECT id FROM files WHERE path = ?", (path,)).fetchone()
        if row is None:
            return
        (file_id,) = row
        conn.execute("DELETE FROM search WHERE rowid IN (SELECT id FROM docs WHERE file_id = ?)", (file_id,))
        for table in ("docs", "refs", "defs"):
            conn.execute(f"DELETE FROM {table} WHERE file_id = ?", (file_id,))
        conn.execute("DELETE FROM files WHERE id = ?", (file_id,))

    def _insert(self, conn: sqlite3.Connection, r: FileRecord) -> None:
        cur = conn.execute(
            "INSERT INTO files(path, hash, language) VALUES (?, ?, ?)", (r.path, r.content_hash, r.language)
        )
        file_id = cur.lastrowid
        # Ids are chosen here (inside the write lock) so that rows can point at each other without a round trip each.
        base = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM defs").fetchone()[0]
        defs = r.tags.definitions
        conn.executemany(
            "INSERT INTO defs VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            [
                (base + i, file_id, d.name, d.kind, d.container, *d.range[0], *d.range[1], *d.name_range[0],
                 *d.name_range[1], d.signature, d.doc, base + d.parent if d.parent >= 0 else None)
                for i, d in enumerate(defs)
            ],
        )  # fmt: skip
        conn.executemany(
            "INSERT INTO refs VALUES (?,?,?,?,?,?,?,?)",
            [
                (file_id, x.name, x.kind, *x.range[0], *x.range[1], base + x.enclosing if x.enclosing >= 0 else None)
                for x in r.tags.references
            ],
        )
        doc_base = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM docs").fetchone()[0]
        path_terms = text_terms(r.path)
        conn.executemany(
            "INSERT INTO docs VALUES (?,?,?,?,?,?)",
            [
                (doc_base + i, file_id, base + d.definition if d.definition >= 0 else None, d.kind, d.start_line,
                 d.end_line)
                for i, d in enumerate(r.documents)
            ],
        )  # fmt: skip
        conn.executemany(
            "INSERT INTO search(rowid, name, path, signature, doc, body) VALUES (?,?,?,?,?,?)",
            [(doc_base + i, d.name, path_terms, d.signature, d.doc, d.body) for i, d in enumerate(r.documents)],
        )

    # ---- reading ------------------------------------------------------------------------------------------------

    def file_hashes(self) -> dict[str, str]:
        return dict(self._rows("SELECT path, hash FROM files"))

    def file_hashes_of(self, paths: list[str]) -> dict[str, str]:
        marks = ",".join("?" * len(paths))
        return dict(self._rows(f"SELECT path, hash FROM files WHERE path IN ({marks})", paths)) if paths else {}

    def counts(self) -> dict[str, int]:
        return {t: self._rows(f"SELECT count(*) FROM {t}")[0][0] for t in ("files", "defs", "refs", "docs")}

    def sample_definition_names(self, n: int) -> list[str]:
        """n names of functions, methods and classes spread evenly over the index (for benchmarks)."""
        names = [r[0] for r in self._rows("SELECT name FROM defs WHERE kind IN ('function', 'method', 'class')")]
        step = max(1, len(names) // max(n, 1))
        return names[::step][:n]

    def definitions(self, name: str) -> list[tuple]:
        sql = (
            f"SELECT {DEF_COLUMNS} FROM defs d JOIN files f ON f.id = d.file_id WHERE d.name = ? ORDER BY f.path, d.sl"
        )
        return self._rows(sql, (name,))

    def definitions_in_file(self, path: str) -> list[tuple]:
        sql = f"SELECT {DEF_COLUMNS} FROM defs d JOIN files f ON f.id = d.file_id WHERE f.path = ? ORDER BY d.sl, d.sc"
        return self._rows(sql, (path,))

    def definitions_by_id(self, ids: list[int]) -> list[tuple]:
        marks = ",".join("?" * len(ids))
        sql = f"SELECT {DEF_COLUMNS} FROM defs d JOIN files f ON f.id = d.file_id WHERE d.id IN ({marks})"
        return self._rows(sql, ids) if ids else []

    def definition_sketches(self, name: str) -> list[tuple]:
        """(id, path, kind, sl, sc) of each definition of `name`: enough to rank thousands cheaply."""
        sql = "SELECT d.id, f.path, d.kind, d.sl, d.sc FROM defs d JOIN files f ON f.id = d.file_id WHERE d.name = ?"
        return self._rows(sql, (name,))

    def references(self, name: str, limit: int, calls_first: bool = False) -> list[tuple]:
        """(path, kind, sl, sc, el, ec, enclosing name, enclosing container) for each use of `name`, by position;
        with `calls_first`, calls before other uses and paths without "test" first, so that a small `limit` keeps
        the uses most worth showing."""
        order = "r.kind != 'call', instr(f.path, 'test') > 0, " if calls_first else ""
        sql = f"""SELECT f.path, r.kind, r.sl, r.sc, r.el, r.ec, e.name, e.container FROM refs r
                  JOIN files f ON f.id = r.file_id LEFT JOIN defs e ON e.id = r.enclosing
                  WHERE r.name = ? ORDER BY {order}f.path, r.sl, r.sc LIMIT ?"""
        return self._rows(sql, (name, limit))

    def reference_count(self, name: str) -> tuple[int, int]:
        """(uses, files that use it)."""
        rows = self._rows("SELECT count(*), count(DISTINCT file_id) FROM refs WHERE name = ?", (name,))
        return rows[0] if rows else (0, 0)

    def search(self, match: str, k: int) -> list[tuple]:
        """(path, kind, sl, el, def columns or NULLs..., score) for the k best documents; higher score is better."""
        weights = ", ".join(str(w) for w in SEARCH_WEIGHTS)
        sql = f"""SELECT f.path, docs.kind, docs.sl, docs.el, d.name, d.container, d.sc, d.ec, d.signature, d.doc,
                         search.body, -bm25(search, {weights}) AS score
                  FROM search JOIN docs ON docs.id = search.rowid JOIN files f ON f.id = docs.file_id
                  LEFT JOIN defs d ON d.id = docs.def_id
                  WHERE search MATCH ? ORDER BY score DESC LIMIT ?"""
        return self._rows(sql, (match, k))
