"""The repository index as the server runs it: built in the background, looked up, kept current (updates.py).

On `initialized`, every workspace folder gets a `WorkspaceIndex` (index.py), built on a thread of its own with
`$/progress` ("indexing 1,234 files") when the client accepts server-initiated progress. Lookups (hover, ask, the
completion prompt's context) work during the build and see what is indexed so far. Afterwards `IndexUpdates`
(updates.py) follows the editor's texts and the disk's changes, all on one thread (`waferline-index`), in the order
the events arrived.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.uris import to_fs_path

from waferline.server.repository.definitions import definition_snippets, window_names
from waferline.server.repository.index import WorkspaceIndex
from waferline.server.repository.updates import IndexUpdates
from waferline.syntax.context import Snippet
from waferline.syntax.plan import CompletionPlan

if TYPE_CHECKING:
    from waferline.server.app import WaferlineServer

log = logging.getLogger(__name__)

INDEX_OF_ENTRIES = 4096
PROGRESS_INTERVAL_S = 0.2  # at most this often a $/progress report
CONTEXT_CACHE_ENTRIES = 64
_progress_ids = itertools.count(1)


def uri_to_path(uri: str) -> Path | None:
    """The file a `file:` URI names, or None for other schemes (untitled:, vscode-notebook-cell:...)."""
    if not uri.startswith("file:"):
        return None
    fs = to_fs_path(uri)
    return Path(fs) if fs else None


class Indexing:
    """The server's indexes, one per workspace folder, and what keeps them current; see the module docstring."""

    def __init__(self, ls: WaferlineServer) -> None:
        self.ls = ls
        self.indexes: dict[Path, WorkspaceIndex] = {}
        self.building: dict[Path, tuple[int, int]] = {}  # folder -> (done, total) while its build runs
        self.updates = IndexUpdates(ls, self.locate)  # the editor's and the disk's changes, on the index thread
        self._index_of: dict[
            Path, WorkspaceIndex | None
        ] = {}  # index_for's answers: resolving a path costs lstat calls
        self._stop = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._context: OrderedDict[tuple[Any, ...], list[Snippet]] = OrderedDict()

    # -- starting and stopping -----------------------------------------------------------------------------------
    def folders(self) -> list[Path]:
        """The workspace folders the client named (or its root), as existing local directories."""
        ws = self.ls.workspace
        uris = [f.uri for f in ws.folders.values()] or ([ws.root_uri] if ws.root_uri else [])
        out = []
        for uri in uris:
            path = uri_to_path(uri)
            if path is None or not path.is_dir():
                log.info("workspace folder %s is not a local folder: not indexed", uri)
                continue
            out.append(path.resolve())
        return out

    async def begin(self) -> None:
        """On `initialized`: index the workspace folders and ask the client to report file changes."""
        await self.start()
        await self.updates.register_watchers()

    async def start(self, folders: list[Path] | None = None) -> None:
        """Index the workspace folders in the background (on `initialized`, and for folders added later)."""
        if not self.ls.options.index_workspace:
            log.info("indexWorkspace is false: the workspace is not indexed")
            return
        self._loop = self.updates.loop = asyncio.get_running_loop()
        todo = [f for f in (folders if folders is not None else self.folders()) if f not in self.indexes]
        if not todo:
            return
        for folder in todo:
            self.building[folder] = (0, 0)  # from now on, status() says "still being indexed"
        token = await self._create_progress()
        if token is not None:
            self.ls.work_done_progress.begin(
                token, types.WorkDoneProgressBegin(title="waferline", message="indexing: listing files", percentage=0)
            )
        thread = threading.Thread(target=self._build_all, args=(todo, token), name="waferline-index-build", daemon=True)
        thread.start()

    async def _create_progress(self) -> str | None:
        window = self.ls.client_capabilities.window
        if window is None or not window.work_done_progress:
            return None
        token = f"waferline-index-{next(_progress_ids)}"
        try:
            await self.ls.work_done_progress.create_async(token)
        except Exception as e:  # a client that refuses the token: index without showing progress
            log.warning("window/workDoneProgress/create refused (%s): indexing without progress", e)
            return None
        return token

    def _open_index(self, folder: Path) -> WorkspaceIndex:
        cache = self.ls.options.index_cache_dir
        return WorkspaceIndex(folder, Path(cache).expanduser() if cache else None)

    def _build_all(self, folders: list[Path], token: str | None) -> None:
        """The build thread: open and build each folder's index in turn, reporting progress to the event loop."""
        files = 0
        started = time.perf_counter()
        for folder in folders:
            if self._stop.is_set():
                break
            try:
                files += self._build_one(folder, token)
            except (OSError, ValueError, RuntimeError) as e:
                self._call_soon(self.ls.report, f"could not index {folder}: {e}")
            except Exception as e:  # sqlite3.Error and what else a broken cache raises: report, keep serving
                log.exception("indexing %s failed", folder)
                self._call_soon(self.ls.report, f"could not index {folder}: {type(e).__name__}: {e}")
            finally:
                self.building.pop(folder, None)
        news = f"indexed {files:,} files in {time.perf_counter() - started:.1f} s"
        self._call_soon(self.ls.news, news)
        if token is not None:
            self._call_soon(self.ls.work_done_progress.end, token, types.WorkDoneProgressEnd(message=news))

    def _build_one(self, folder: Path, token: str | None) -> int:
        index = self._open_index(folder)
        self.indexes[folder] = index  # lookups see what is indexed so far
        self._index_of.clear()
        self._call_soon(self._sync_open_documents, folder)
        last = 0.0

        def progress(done: int, total: int) -> None:
            nonlocal last
            self.building[folder] = (done, total)
            now = time.perf_counter()
            if token is not None and (now - last >= PROGRESS_INTERVAL_S or done == total):
                last = now
                pct = 100 * done // total if total else 100
                report = types.WorkDoneProgressReport(message=f"indexing {total:,} files", percentage=pct)
                self._call_soon(self.ls.work_done_progress.report, token, report)

        report = index.build(progress=progress, should_cancel=self._stop.is_set)
        self.updates.changed()
        return report.files

    def _sync_open_documents(self, folder: Path) -> None:
        """An index opened after documents were: give it their editor text."""
        for uri in list(self.ls.documents):
            path = uri_to_path(uri)
            if path is not None and path.resolve().is_relative_to(folder):
                self.updates.document_changed(uri, delay=0.0)

    def _call_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run `fn(*args)` on the event loop: the LSP transport is not thread-safe."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(fn, *args)

    def close(self) -> None:
        """Shutdown: stop a running build between files and drop queued updates."""
        self._stop.set()
        self.updates.close()

    # -- lookups -------------------------------------------------------------------------------------------------
    def index_for(self, path: Path | None) -> WorkspaceIndex | None:
        """The index of the innermost workspace folder holding `path`."""
        if path is None:
            return None
        if path in self._index_of:
            return self._index_of[path]
        if len(self._index_of) > INDEX_OF_ENTRIES:
            self._index_of.clear()
        self._index_of[path] = found = self._find_index(path)
        return found

    def _find_index(self, path: Path) -> WorkspaceIndex | None:
        real = path.resolve()
        best = None
        for folder, index in list(self.indexes.items()):  # the build thread may add one meanwhile
            if real.is_relative_to(folder) and (best is None or len(folder.parts) > len(best[0].parts)):
                best = (folder, index)
        return best[1] if best is not None else None

    def locate(self, uri: str) -> tuple[WorkspaceIndex, Path] | None:
        """The index of the workspace folder holding `uri`'s file, and that file; None outside every indexed one."""
        path = uri_to_path(uri)
        index = self.index_for(path)
        return None if index is None or path is None else (index, path)

    def files_using(self, uri: str, name: str, limit: int = 2000) -> list[Path]:
        """The indexed files of `uri`'s workspace folder that use `name` (call it, import it...), by path; [] when
        the folder is not indexed. Read from the index as it is (possibly still building): a hint of where to look."""
        index = self.index_for(uri_to_path(uri))
        if index is None:
            return []
        return list(dict.fromkeys(r.path for r in index.references(name, limit)))

    def status(self) -> str | None:
        """A line saying the index is incomplete (still building, or off), or None when it is ready."""
        if not self.ls.options.index_workspace:
            return "the workspace index is off (indexWorkspace = false)"
        if self.building:
            progress = list(self.building.values())  # a snapshot: the build thread updates it
            done, total = sum(d for d, _ in progress), sum(t for _, t in progress)
            return f"the workspace is still being indexed ({done:,} of {total:,} files): results may be incomplete"
        if not self.indexes:
            return "no workspace folder is indexed (the client named no local folder)"
        return None

    # -- completion context --------------------------------------------------------------------------------------
    def completion_context(self, uri: str) -> Callable[[str, CompletionPlan], list[Snippet]] | None:
        """What features/inline.py and code actions call for a document's completion prompt, or None when there is
        nothing to add."""
        if not self.ls.options.repository_context:
            return None
        path = uri_to_path(uri)
        index = self.index_for(path)
        if index is None or path is None:
            return None
        return lambda text, plan: self.definition_snippets(index, path, text, plan)

    def definition_snippets(self, index: WorkspaceIndex, path: Path, text: str, plan: CompletionPlan) -> list[Snippet]:
        """Definitions from other files of the names used in the prompt's window, within `plan.context_budget`.

        Names come from the window without the cursor's line, in document order: what the user is typing does not
        change them, so the snippets (placed first in the prompt) stay the same keystroke after keystroke and the
        engine's KV cache keeps them; they change when a line with a new name is finished.
        """
        names = window_names(text, plan)
        # Typing in this file changes the index too, but not the other files' definitions: only their changes
        # make the cached snippets stale.
        others = self.updates.generation - self.updates.own_changes[path]
        key = (str(path), others, names, plan.context_budget)
        if (hit := self._context.get(key)) is not None:
            self._context.move_to_end(key)
            return hit
        snippets = definition_snippets(index, path, names, plan.context_budget, plan.language_id)
        self._context[key] = snippets
        while len(self._context) > CONTEXT_CACHE_ENTRIES:
            self._context.popitem(last=False)
        return snippets
