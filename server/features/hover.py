"""textDocument/hover: what the repository knows about the name under the cursor, and a model-written summary.

The deterministic part (definition, signature, docstring, usage count, call sites) comes from the index
(server/repository/lookup.py) in a few milliseconds, on a helper thread so the event loop keeps reading keystrokes.

A definition without a docstring gets a one-line summary written by the model as fill-in-the-middle at the docstring
position (a Python docstring, else a comment line above the definition), marked as generated. It never delays a
hover: the hover answers at once with what is cached, and a missing summary is started as an idle job on the engine
(model_tasks.HOVER_KEY: only while no completion waits, preempted by any keystroke, bounded by `hoverSummaryMs`).
The next hover of the same definition shows it. Summaries are cached by the definition's text, so an edit to the
definition makes a new one.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lsprotocol import types

from waferline.server.model_tasks import HOVER_KEY, Budget, infill
from waferline.server.repository.index import WorkspaceIndex
from waferline.server.repository.lookup import SymbolInfo, describe_symbol, render_hover_markdown
from waferline.server.repository.symbols import Definition
from waferline.server.repository.workspace import uri_to_path
from waferline.syntax.languages import doc_comment, parser_for
from waferline.syntax.text import column_to_index, utf8_len

if TYPE_CHECKING:
    from waferline.server.app import WaferlineServer
    from waferline.server.document import DocumentSnapshot

log = logging.getLogger(__name__)

SUMMARY_TOKENS = 40
SUMMARY_MAX_CHARS = 160
PREFIX_CHARS = 4000  # of the file before the docstring position: enough context, a short prefill
SUFFIX_CHARS = 1500
CACHE_ENTRIES = 512
_IDENT = re.compile(r"[^\W\d]\w*")


@dataclass(frozen=True)
class Word:
    name: str
    start: int  # str offsets into the document
    end: int


def word_at(doc: DocumentSnapshot, offset: int) -> Word | None:
    """The identifier under (or just before) the cursor, outside comments and strings; None elsewhere."""
    text = doc.text
    start = end = offset
    while start > 0 and (text[start - 1].isalnum() or text[start - 1] == "_"):
        start -= 1
    while end < len(text) and (text[end].isalnum() or text[end] == "_"):
        end += 1
    name = text[start:end]
    if not _IDENT.fullmatch(name):
        return None
    root = doc.syntax.root
    if root is not None:
        node = root.descendant_for_byte_range(utf8_len(text[:start]), utf8_len(text[:start]) + 1)
        kinds = " ".join(n.type for n in (node, node.parent if node is not None else None) if n is not None)
        if "comment" in kinds or "string" in kinds:
            return None
    return Word(name, start, end)


class SummaryCache:
    """Generated summaries by definition text, and the ones being generated (at most one job runs: the newest)."""

    def __init__(self) -> None:
        self.done: OrderedDict[str, str] = OrderedDict()
        self.running: str | None = None

    def get(self, key: str) -> str | None:
        if key in self.done:
            self.done.move_to_end(key)
            return self.done[key]
        return None

    def put(self, key: str, summary: str) -> None:
        self.done[key] = summary
        while len(self.done) > CACHE_ENTRIES:
            self.done.popitem(last=False)


async def file_text(ls: WaferlineServer, index: WorkspaceIndex, path: Path) -> str:
    """A file's text: the editor's when it is open, else the disk's (read through the index: inside the folder,
    on a helper thread)."""
    for doc in ls.documents.values():
        if uri_to_path(doc.uri) == path:
            return doc.readable_text
    return "\n".join(await asyncio.to_thread(index.source_lines, path, 0, 1 << 30))


def summary_key(d: Definition, text: str) -> str:
    (start, _), (end, _) = d.range
    body = "\n".join(text.split("\n")[start : end + 1])
    return hashlib.sha256(f"{d.path}\0{d.qualified_name}\0{body}".encode("utf-8", "surrogatepass")).hexdigest()


def summary_prompt(d: Definition, text: str) -> tuple[str, str, str] | None:
    """(prefix, suffix, closer) of the fill-in-the-middle prompt at the definition's docstring position."""
    lines = text.split("\n")
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    if d.range[0][0] >= len(lines):
        return None
    if d.language == "python" and (body_line := python_body_line(d, text)) is not None:
        indent = lines[body_line][: len(lines[body_line]) - len(lines[body_line].lstrip())]
        at = starts[body_line]
        return text[max(at - PREFIX_CHARS, 0) : at] + indent + '"""', '"""\n' + text[at : at + SUFFIX_CHARS], '"""'
    head = d.range[0][0]
    indent = lines[head][: len(lines[head]) - len(lines[head].lstrip())]
    at = starts[head]
    comment = doc_comment(d.language)
    return text[max(at - PREFIX_CHARS, 0) : at] + indent + comment + " ", "\n" + text[at : at + SUFFIX_CHARS], "\n"


def python_body_line(d: Definition, text: str) -> int | None:
    """The line of the first statement of a Python def or class, when the body starts on a line of its own."""
    parser = parser_for("python")
    assert parser is not None, "the Python grammar is a dependency"
    source = text.encode("utf-8", "surrogatepass")
    (row, units), _ = d.selection_range  # the name; its column in UTF-16 code units
    line = text.split("\n")[row] if row <= text.count("\n") else ""
    column = utf8_len(line[: column_to_index(line, units, "utf-16")])
    node = parser.parse(source).root_node.descendant_for_point_range((row, column), (row, column))
    while node is not None and node.type not in ("function_definition", "class_definition"):
        node = node.parent
    body = node.child_by_field_name("body") if node is not None else None
    if body is None or body.start_point[0] <= row:
        return None
    return body.start_point[0]


def clean_summary(raw: str) -> str:
    """The first line of what the model wrote, without quotes or comment markers; "" if it says nothing."""
    line = raw.split("\n", 1)[0].split('"""', 1)[0].split("*/", 1)[0]
    line = line.strip().lstrip("/#-*! ").strip()
    if len(line) > SUMMARY_MAX_CHARS:
        line = line[: SUMMARY_MAX_CHARS - 1].rstrip() + "…"
    return line if any(c.isalpha() for c in line) else ""


async def generate_summary(ls: WaferlineServer, cache: SummaryCache, index: WorkspaceIndex, d: Definition) -> None:
    """Write the summary of `d` into the cache (an idle engine job; nothing is cached if it is preempted)."""
    text = await file_text(ls, index, d.path)
    key = await asyncio.to_thread(summary_key, d, text)
    prompt = await asyncio.to_thread(summary_prompt, d, text)  # parses the file: off the event loop
    if prompt is None or cache.get(key) is not None:
        return
    prefix, suffix, closer = prompt
    cache.running = key
    try:
        budget = Budget(SUMMARY_TOKENS, ls.options.hover_summary_ms / 1000.0)
        completion = await infill(
            ls.worker, HOVER_KEY, prefix, suffix, budget, should_stop=lambda s: "\n" in s or closer in s, idle=True
        )
    finally:
        if cache.running == key:
            cache.running = None
    if completion is None or not completion.complete or completion.stop_reason == "unavailable":
        return  # preempted by typing, superseded by a newer hover, or no model: the next hover tries again
    cache.put(key, clean_summary(completion.text))
    log.debug("summary of %s: %r", d.qualified_name, cache.done[key])


async def hover(ls: WaferlineServer, cache: SummaryCache, params: types.HoverParams) -> types.Hover | None:
    doc, offset = ls.document_at(params.text_document.uri, params.position)
    if doc.out_of_sync is not None:  # the word at the position is read from a text known to be wrong
        return None
    word = word_at(doc.snapshot(), offset)
    path = uri_to_path(doc.uri)
    index = ls.indexing.index_for(path)
    if word is None or index is None:
        return None
    info: SymbolInfo | None = await asyncio.to_thread(describe_symbol, index, word.name, path)
    if info is None:
        return None
    summary = None
    d = info.definition
    if d is not None and info.needs_summary and ls.options.hover_summary:
        text = await file_text(ls, index, d.path)
        key = await asyncio.to_thread(summary_key, d, text)
        summary = cache.get(key)
        if summary is None and cache.running != key:
            ls.background.spawn(generate_summary(ls, cache, index, d))
    markdown = render_hover_markdown(info, index.root, generated_summary=summary or None)
    rng = types.Range(start=ls.lsp_position(doc, word.start), end=ls.lsp_position(doc, word.end))
    return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=markdown), range=rng)
