"""Keeping the server's indexes current after their first build (workspace.py builds them), from the editor and the
disk:

- didOpen/didChange: the editor's text replaces the file's, re-extracted UPDATE_DELAY_S after the last change (one
  parse per pause in typing, never per keystroke, and at most one per UPDATE_MIN_INTERVAL_S while typing goes on), on
  the index thread, never on the event loop; didSave at once.
  Updates coalesce per document, latest wins: a document has at most one timer and one text waiting for the index
  thread (`_waiting`, keyed by URI), so however far the index thread falls behind, what waits is bounded by the
  open documents, never by the keystrokes, and a text superseded before its turn is never parsed;
- didClose: back to the file on disk;
- workspace/didChangeWatchedFiles (registered dynamically when the client supports it): created and changed files are
  re-read, deleted ones dropped; a changed `.gitignore` starts an incremental build (only changed files are parsed).

All these index writes run on one thread (`waferline-index`), in the order the events arrived.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from waferline.server.repository.discovery import TEXT_LANGUAGES
from waferline.server.repository.index import WorkspaceIndex
from waferline.syntax.languages import EXTENSIONS

if TYPE_CHECKING:
    from waferline.server.app import WaferlineServer

log = logging.getLogger(__name__)

UPDATE_DELAY_S = 0.3  # after the last didChange of a document, re-extract it
UPDATE_MIN_INTERVAL_S = 2.0  # and not sooner than this after its previous re-extraction (a server behind its input
# sees long pauses between one document's keystrokes; this keeps it from re-indexing at every one)
WATCHER_ID = "waferline-watched-files"

# A URI -> the index of the workspace folder holding its file, and that file; None outside every indexed folder
Locate = Callable[[str], tuple[WorkspaceIndex, Path] | None]


def watched_globs() -> list[str]:
    """What the client should watch: files of every indexed language, and .gitignore files."""
    exts = sorted({e.lstrip(".") for e in (*EXTENSIONS, *TEXT_LANGUAGES)})
    return ["**/*.{" + ",".join(exts) + "}", "**/.gitignore"]


class IndexUpdates:
    """The index writes that follow the editor and the disk, on the index thread; see the module docstring."""

    def __init__(self, ls: WaferlineServer, locate: Locate) -> None:
        self.ls = ls
        self.locate = locate
        self.loop: asyncio.AbstractEventLoop | None = None  # the event loop the timers run on (set by Indexing.start)
        self.generation = 0  # bumped after every index change: cached completion context older than it is stale
        self.own_changes: Counter[Path] = Counter()  # of those, the changes of each file itself
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="waferline-index")
        self._timers: dict[str, asyncio.TimerHandle] = {}  # uri -> the one timer of its pending re-extraction
        self._due: dict[str, float] = {}  # uri -> when (loop time) its re-extraction is due: a change moves it
        # uri -> (index, path, text) for the index thread, latest wins; the thread takes it out when it gets to it
        self._waiting: dict[str, tuple[WorkspaceIndex, Path, str]] = {}
        self._waiting_lock = threading.Lock()
        self._last_update: dict[str, float] = {}  # uri -> when (loop time) it was last handed to the index thread
        self._stop = threading.Event()

    def changed(self, path: Path | None = None) -> None:
        """An index changed; `path` is the file it changed (None: possibly many)."""
        if path is not None:
            self.own_changes[path] += 1
        self.generation += 1

    def submit(self, fn: Callable[..., Any], *args: Any, path: Path | None = None) -> None:
        """Run an index write on the index thread; `path` is the file it changes (None: possibly many)."""

        def run() -> None:
            try:
                fn(*args)
            except Exception:  # a failed update leaves the previous rows: log it, keep the thread alive
                log.exception("index update %s%s failed", getattr(fn, "__name__", fn), args[:1])
            self.changed(path)

        if not self._stop.is_set():
            self._thread.submit(run)

    def close(self) -> None:
        """Shutdown: drop queued updates."""
        self._stop.set()
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        self._due.clear()
        with self._waiting_lock:
            self._waiting.clear()
        self._thread.shutdown(wait=False, cancel_futures=True)

    # -- the editor's texts --------------------------------------------------------------------------------------
    def document_changed(self, uri: str, *, delay: float = UPDATE_DELAY_S) -> None:
        """didOpen, didChange: re-extract the document's text once typing pauses. A keystroke only moves the due
        time of the document's one timer (no timer per keystroke, no copy of the text)."""
        loop = self.loop
        if loop is None or not uri.startswith("file:"):
            return
        now = loop.time()
        due = now + delay
        if delay > 0 and (last := self._last_update.get(uri)) is not None:
            due = max(due, last + UPDATE_MIN_INTERVAL_S)
        if uri in self._due:
            self.ls.stats.count("index_coalesced")
        self._due[uri] = due
        timer = self._timers.get(uri)
        if timer is None or timer.when() > due:  # none yet, or a save asks for sooner than the one there
            if timer is not None:
                timer.cancel()
            self._timers[uri] = loop.call_at(due, self._due_reached, uri)

    def document_saved(self, uri: str) -> None:
        self.document_changed(uri, delay=0.0)

    def _due_reached(self, uri: str) -> None:
        """The document's timer fired: flush it if typing paused long enough, else wait for the new due time."""
        self._timers.pop(uri, None)
        due = self._due.get(uri)
        if due is None or self.loop is None:
            return
        now = self.loop.time()
        if due > now:
            self._timers[uri] = self.loop.call_at(due, self._due_reached, uri)
            return
        del self._due[uri]
        self._last_update[uri] = now
        self._flush(uri)

    def _flush(self, uri: str) -> None:
        doc = self.ls.documents.get(uri)
        found = self.locate(uri)
        if doc is None or found is None:
            return
        index, path = found
        with self._waiting_lock:
            queued = uri in self._waiting
            self._waiting[uri] = (index, path, doc.readable_text)
        if queued:  # the index thread has not got to the previous text: it takes this one instead
            self.ls.stats.count("index_coalesced")
        else:
            self.submit(self._update_waiting, uri, path=path)

    def _update_waiting(self, uri: str) -> None:
        """On the index thread: re-extract the latest text waiting for `uri`, if it is still waiting."""
        with self._waiting_lock:
            item = self._waiting.pop(uri, None)
        if item is not None:
            index, path, text = item
            index.update_file(path, text)
            self.ls.stats.count("index_updates")

    def document_closed(self, uri: str) -> None:
        if (old := self._timers.pop(uri, None)) is not None:
            old.cancel()
        self._due.pop(uri, None)
        self._last_update.pop(uri, None)
        with self._waiting_lock:
            self._waiting.pop(uri, None)  # its text is no longer the file's: back to the disk's
        if (found := self.locate(uri)) is not None:
            index, path = found
            self.submit(index.close_file, path, path=path)

    # -- the disk ------------------------------------------------------------------------------------------------
    def files_changed(self, params: types.DidChangeWatchedFilesParams) -> None:
        """workspace/didChangeWatchedFiles: re-read created and changed files, drop deleted ones."""
        rebuild: dict[Path, WorkspaceIndex] = {}
        for change in params.changes:
            found = self.locate(change.uri)
            if found is None:
                continue
            index, path = found
            if path.name == ".gitignore":
                rebuild[index.root] = index
            elif change.type == types.FileChangeType.Deleted:
                self.submit(index.remove_path, path)
            else:
                self.submit(index.refresh_file, path)
        for index in rebuild.values():  # what is ignored changed: an incremental build re-lists the files
            self.submit(index.build)

    async def register_watchers(self) -> None:
        """Ask the client to send workspace/didChangeWatchedFiles for indexed files, when it can register it."""
        ws = self.ls.client_capabilities.workspace
        caps = ws.did_change_watched_files if ws is not None else None
        if not self.ls.options.index_workspace or caps is None or not caps.dynamic_registration:
            return
        watchers = [types.FileSystemWatcher(glob_pattern=g) for g in watched_globs()]
        options = types.DidChangeWatchedFilesRegistrationOptions(watchers=watchers)
        reg = types.Registration(
            id=WATCHER_ID, method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES, register_options=options
        )
        try:
            await self.ls.client_register_capability_async(types.RegistrationParams(registrations=[reg]))
        except Exception as e:  # the client refused: the index still follows open documents
            log.warning("could not register file watchers (%s): files changed outside the editor are not seen", e)
