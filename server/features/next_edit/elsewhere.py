"""A changed signature's call sites in other files: open documents, and files of the repository index not open.

The signature candidate (features/next_edit/signature.py) fixes the calls of its own document; a Python function
is also called from the modules that `from <its module> import name` (`<module>` ending with the file's name).
Those fixes are a code action's multi-file `WorkspaceEdit` ("Update N call sites in other files"), never the
next-edit request's answer (its InlineEdit names one document). Each is exact or not offered, and never made for a
text that moved on:

- an open document's edits carry its version; the action is built only while the version is the same;
- a file that is not open is found through the workspace index's references of the function's name (the index only
  says where to look: the file itself is read from disk and parsed here), and its edits carry the SHA-256 of the
  bytes they were computed on; when the action is built the file is read again and nothing is offered for it unless
  it is byte for byte the same (`reread`).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from waferline.server.features.next_edit.signature import Change, call_site_edits, imports_from
from waferline.server.features.next_edit.source import Edit, Source
from waferline.server.repository.workspace import uri_to_path

if TYPE_CHECKING:
    from waferline.server.document import Document

log = logging.getLogger(__name__)

MAX_FILES = 64  # files not open read for one action: a name called from more is not followed that far
MAX_FILE_BYTES = 1 << 20  # the index's own limit (server/repository/discovery.py)

# (the requesting document's URI, a function name) -> indexed files that use the name, by absolute path
IndexedFiles = Callable[[str, str], list[Path]]


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def module_stem(uri: str) -> str:
    return uri.rsplit("/", 1)[-1].removesuffix(".py")


def other_file_edits(
    change: Change, uri: str, others: Mapping[str, Document], indexed: IndexedFiles | None = None
) -> list[Edit]:
    """The fixes of `change`'s call sites in every other file that imports the function: open documents first (their
    editor text), then the indexed files that are not open (their disk text)."""
    if change.method:
        return []
    out = open_document_edits(change, uri, others)
    if indexed is not None:
        open_paths = {p for u in (uri, *others) if (p := uri_path(u)) is not None}
        try:
            paths = indexed(uri, change.name)
        except Exception:  # the index is an aid: a broken one costs the other files, not the action
            log.exception("the workspace index could not list the uses of %s", change.name)
            paths = []
        closed = [p for p in dict.fromkeys(paths) if p.suffix == ".py" and p.resolve() not in open_paths]
        for path in closed[:MAX_FILES]:
            out.extend(file_edits(change, uri, path))
    return out


def open_document_edits(change: Change, uri: str, others: Mapping[str, Document]) -> list[Edit]:
    stem = module_stem(uri)
    out: list[Edit] = []
    for other_uri, doc in others.items():
        if doc.language_id != "python" or change.name not in doc.readable_text or doc.out_of_sync is not None:
            continue
        root = doc.syntax.root
        if root is None or root.has_error:
            continue
        src = Source(doc.readable_text, root, doc.syntax.source)
        if imports_from(src, stem, change.name):
            edits = call_site_edits(src, change, frozenset(), other_uri)
            out.extend(Edit(e.start, e.end, e.new, e.uri, version=doc.text.version) for e in edits)
    return out


def file_edits(change: Change, uri: str, path: Path) -> list[Edit]:
    """The fixes in one file on disk that is not open, each with the digest of the bytes it was computed on."""
    data = read(path)
    if data is None or change.name.encode() not in data:
        return []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return []
    src = Source.parse(text, "python")
    if src is None or src.root.has_error or not imports_from(src, module_stem(uri), change.name):
        return []
    other_uri, sha = path.as_uri(), digest(data)
    return [Edit(e.start, e.end, e.new, other_uri, digest=sha) for e in call_site_edits(src, change, frozenset())]


def read(path: Path) -> bytes | None:
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            return None
        return path.read_bytes()
    except OSError:
        return None


def reread(uri: str, edits: list[Edit]) -> str | None:
    """The text of the unopened file `uri` when it is still exactly what `edits` were computed on, else None."""
    path = uri_path(uri)
    shas = {e.digest for e in edits}
    if path is None or len(shas) != 1:
        return None
    data = read(path)
    if data is None or digest(data) not in shas:
        return None
    return data.decode("utf-8")


def uri_path(uri: str) -> Path | None:
    path = uri_to_path(uri)
    return None if path is None else path.resolve()
