"""The language server's state: open documents with their syntax trees, options, the engine worker, statistics.

`WaferlineServer` is the one object that owns state; server/handlers.py registers the LSP handlers on it, and each
handler calls a method here, a feature object it holds (`inline`: server/features/inline.py) or a plain function
of a feature module. Documents (server/document.py) are kept in `DocumentText`s (the position-encoding-aware text
of syntax/text.py) and are the only copy: pygls' own workspace copy is bypassed, so a bad edit is refused in one
place, with the text left as it was.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from lsprotocol import types
from pygls.exceptions import FeatureRequestError, JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer

from waferline.engine.api import Engine
from waferline.engine.factory import build_engine
from waferline.server import memory, params
from waferline.server.background import Background
from waferline.server.document import Document, readable, readable_change
from waferline.server.engine_state import ENGINE_STATE_METHOD, Problem, outage_message
from waferline.server.features.ask import PromptMemory
from waferline.server.features.hover import SummaryCache
from waferline.server.features.inline import InlineCompletions
from waferline.server.features.next_edit.feature import NextEdits
from waferline.server.features.warm import WarmUps
from waferline.server.option_parsing import ENGINE_OPTIONS, parse_options
from waferline.server.options import Options
from waferline.server.protocol import WaferlineProtocol
from waferline.server.repository.workspace import Indexing
from waferline.server.stats import Stats
from waferline.server.worker import Worker
from waferline.syntax.text import PositionError, TextChange

log = logging.getLogger(__name__)

VERSION = "0.1.0"
PENDING_POLL_S = 0.25  # how often the engine is described again while a chat model loads in the background
MAX_REPORTED = 256  # problems remembered as shown (each shown once): a few KB whatever the client sends
ACCEPT_COMMAND = "waferline.accept"  # the command an inline item carries, so the editor reports accepts


class WaferlineServer(LanguageServer):
    def __init__(self, *, defaults: Options | None = None, engine_factory: Callable[[Options], Engine] | None = None):
        super().__init__("waferline", VERSION, protocol_cls=WaferlineProtocol, converter_factory=params.converter)
        self.defaults = defaults or Options()  # from the command line; client settings override them
        self.options = self.defaults
        self.documents: dict[str, Document] = {}
        self.stats = Stats()
        self.worker = Worker(self.stats)
        self._engine_factory = engine_factory or build_engine
        self._reported: OrderedDict[str, None] = OrderedDict()  # what was shown to the user, the latest kept
        self.client_has_inline = False
        self.background = Background()
        self.indexing = Indexing(self)  # the workspace index: hover, waferline/ask, completion context
        self.inline = InlineCompletions(self.worker, self.stats, self.documents, self.background, self.indexing)
        # prompts prefilled before the first keystroke (on open, focus, after an edit no request followed)
        self.warmups = WarmUps(self.inline, self.worker, self.documents, self.background, lambda: self.options)
        self.summaries = SummaryCache()  # model-written hover summaries
        self.ask_prompts = PromptMemory()  # the evidence of the last ask's prompt, put first again when shared
        # next-edit suggestions and each document's edit history
        self.next_edits = NextEdits(self.documents, self.worker, self.indexing.files_using)
        self.experimental_capabilities = {"inlineEditProvider": True}  # in the initialize result (protocol.py)
        self.worker.health.on_change = self.engine_state_changed

    def report_server_error(self, error: Exception, source: Any) -> None:
        """pygls' hook for errors outside a request's answer: log them with their traceback; show the user a short
        line (once per message), since a broken notification handler can leave the server's text out of date."""
        if isinstance(error, JsonRpcInvalidParams):  # bad input from the client, answered with this error
            log.warning("%s", error)
            return
        log.error("%s: %r", getattr(source, "__name__", source), error, exc_info=error)
        if source is not FeatureRequestError:
            self.report(f"internal error ({type(error).__name__}: {error}); see the server log")

    # -- options -------------------------------------------------------------------------------------------------
    def configure(self, settings: Any, *, source: str) -> bool:
        """Apply client settings; True when the engine must be rebuilt (model, backend, weights... changed)."""
        new, problems = parse_options(settings, self.options)
        for problem in problems:
            self.report(f"{source}: {problem}")
        engine_changed = any(getattr(new, k) != getattr(self.options, k) for k in ENGINE_OPTIONS)
        if new != self.options:
            self.forget_suggestions()  # made under other options
        self.options = new
        log.info("options from %s: %s", source, new)
        return engine_changed

    def report(self, message: str, *, show: bool = True, key: str | None = None) -> None:
        """Log a problem the user can act on, and show it in the editor the first time it (or its `key`) happens.
        The last `MAX_REPORTED` keys are remembered: a client that makes a new mistake per message (each naming its
        own URI) costs a bounded set, not one entry per message."""
        log.warning("%s", message)
        key = message if key is None else key
        if show and key not in self._reported:
            self._reported[key] = None
            if len(self._reported) > MAX_REPORTED:
                self._reported.popitem(last=False)
            self.window_show_message(
                types.ShowMessageParams(type=types.MessageType.Warning, message=f"waferline: {message}")
            )

    def news(self, message: str) -> None:
        """Routine news for the editor's log (window/logMessage), not a popup."""
        log.info("%s", message)
        self.window_log_message(types.LogMessageParams(type=types.MessageType.Info, message=f"waferline: {message}"))

    def forget_suggestions(self) -> None:
        """Drop every document's remembered suggestions: they are not to be reused."""
        self.inline.forget()

    async def load_engine(self) -> None:
        """(Re)build the engine on its thread; requests queued meanwhile wait for it. Suggestions the previous
        engine made are forgotten."""
        self.forget_suggestions()
        options = self.options
        try:
            description = await self.worker.load(lambda: self._engine_factory(options))
        except (ValueError, OSError, RuntimeError) as e:
            self.report(f"could not load the model ({e}); completions are off until the model setting is fixed")
            self.send_engine_state()
            return
        self.news(f"engine ready: {description}")
        if (warning := self.worker.warning()) is not None:
            self.report(warning)
        self.send_engine_state()
        self.warmups.engine_loaded()
        if self.worker.pending():
            self.background.spawn(self._settle_engine())

    async def _settle_engine(self) -> None:
        """A chat model loading in the background (engine/deferred.py): once it is ready or has failed, the user is
        told (once, when it failed) and the clients' status follows."""
        engines = self.worker.engines_loaded
        while self.worker.pending():
            await asyncio.sleep(PENDING_POLL_S)
            self.worker.refresh()
        if self.worker.engines_loaded != engines:
            return  # a newer engine took its place: its own load reports it
        if (warning := self.worker.warning()) is not None:
            self.report(warning)
        else:
            self.news(f"chat model ready: {self.worker.describe_chat()}")
        self.send_engine_state()

    def engine_state(self) -> dict[str, Any]:
        """What `waferline/engineState` and `waferline/stats` say of the engine: loading, failed, ready, degraded
        (a remote engine down, the local model answering) or down, with the reasons and the engines' descriptions."""
        if self.worker.load_error is not None:
            state: dict[str, Any] = {"state": "failed", "problems": {"completion": self.worker.load_error}}
        elif not self.worker.loaded():
            state = {"state": "loading", "problems": {}}
        else:
            state = self.worker.health.snapshot()
        return {**state, "engine": self.worker.describe(), "chatEngine": self.worker.describe_chat()}

    def send_engine_state(self) -> None:
        self.protocol.notify(ENGINE_STATE_METHOD, self.engine_state())

    def engine_state_changed(self, route: str, problem: Problem | None) -> None:
        """An engine stopped answering (told once per outage, as a popup) or answers again (logged); the clients'
        status follows either way."""
        self.worker.refresh()
        if problem is not None:
            log.warning("%s", outage_message(route, problem))
            self.window_show_message(types.ShowMessageParams(
                type=types.MessageType.Warning, message=f"waferline: {outage_message(route, problem)}"
            ))  # fmt: skip
        else:
            self.news(
                f"the remote engine for {'inline completions' if route == 'completion' else 'chat'} answers again"
            )
        self.send_engine_state()

    # -- documents -----------------------------------------------------------------------------------------------
    @property
    def encoding(self) -> str:
        enc = self.workspace.position_encoding if self.protocol._workspace is not None else None
        return str(getattr(enc, "value", enc) or "utf-16")

    def open_document(self, item: types.TextDocumentItem) -> Document:
        doc = Document.open(item.uri, item.language_id, item.text, version=item.version, encoding=self.encoding)
        if item.uri in self.documents:
            log.info("%s opened again; the new text replaces the old", item.uri)
            self.worker.drop(item.uri)
            self.inline.forget(item.uri)
            self.next_edits.closed(item.uri)
        self.documents[item.uri] = doc
        self.warmups.opened(doc)
        return doc

    def change_document(self, params: types.DidChangeTextDocumentParams) -> None:
        """Apply each content change in order (`_apply_changes`: what happens when one cannot apply)."""
        doc = self.documents.get(params.text_document.uri)
        if doc is None:
            self.report(f"didChange for {params.text_document.uri}, which was never opened (ignored)")
            return
        t0 = time.perf_counter()
        self._apply_changes(doc, params)
        self.stats.add_phases({"did_change": (time.perf_counter() - t0) * 1000.0})
        self.warmups.edited(doc)

    def _apply_changes(self, doc: Document, params: types.DidChangeTextDocumentParams) -> None:
        """Each change in order, on the text the previous one left (LSP). The one rule for a change that cannot apply
        (docs/reliability.md, "Text sync"): the server's text is then known to differ from the client's, so the
        document is out of sync: that change and every later ranged change are dropped (the server does not guess)
        until a whole-text change sets the text again, in this notification or a later one; nothing is completed
        against the text meanwhile. The version becomes the notification's in every case, also for no changes."""
        before_version = doc.text.version
        edits: list[TextChange | str] = []  # for the syntax tree, once every change has applied
        texts: list[str] = []  # the text before each change, for the edit history
        edited_line = None
        version = params.text_document.version
        for change in params.content_changes:
            self.stats.keystrokes += 1
            if isinstance(change, types.TextDocumentContentChangePartial):
                if doc.out_of_sync is not None:
                    self.stats.changes_dropped += 1  # against a text the server does not have: cannot apply
                    continue
                r = change.range
                rng = ((r.start.line, r.start.character), (r.end.line, r.end.character))
                texts.append(doc.text.text)
                try:
                    applied = doc.text.apply_change(rng, change.text)
                except PositionError as e:
                    texts.pop()
                    self.stats.changes_dropped += 1
                    self._lose_sync(doc, version, str(e))
                    continue
                edits.append(applied)
                edited_line = r.start.line
                doc.cursor = applied.new_end  # where typing leaves the cursor: the end of what was inserted
            else:
                texts.append(doc.text.text)
                doc.text.apply_change(None, change.text)
                edits.append(change.text)
                doc.cursor = None if doc.cursor is None else min(doc.cursor, len(change.text))
                if doc.out_of_sync is not None:
                    log.info("%s is in sync again: the whole text came with version %s", doc.uri, version)
                    doc.out_of_sync = None
                    self.stats.resyncs += 1
        if edited_line is not None:
            doc.edited_line, doc.edited_at = edited_line, time.monotonic()
        for edit in edits:
            if isinstance(edit, str):
                doc.syntax.replace(readable(edit))
            else:
                doc.syntax.apply(readable_change(edit))
        # The version is the document's after the changes, even when there are none (LSP's VersionedTextDocument).
        doc.text.version = version
        if doc.out_of_sync is None:
            self.next_edits.changed(doc, before_version, list(zip(texts, edits, strict=True)))
        else:  # what the history holds no longer describes the client's text
            self.next_edits.closed(doc.uri)

    def _lose_sync(self, doc: Document, version: int, reason: str) -> None:
        """A change of `doc` could not apply: its text is no longer the client's (logged; the user told once)."""
        doc.out_of_sync = f"a change of version {version} could not apply: {reason}"
        self.stats.desyncs += 1
        self.report(
            f"{doc.uri} is out of sync with the editor ({doc.out_of_sync}); no completions there until the editor "
            "sends the whole text again (reopen the file)",
            key=f"out of sync: {doc.uri}",
        )

    def close_document(self, uri: str) -> None:
        """Drop every copy of the document's text the server holds, and give the memory back."""
        self.warmups.closed(uri)
        if self.documents.pop(uri, None) is not None:
            self.worker.drop(uri)
            self.inline.forget(uri)
            self.next_edits.closed(uri)
            memory.trim_soon()  # its KV session and text go back to the OS (one trim per burst of closes)

    def document(self, uri: str) -> Document:
        """The open document, or an InvalidParams error the client can read."""
        doc = self.documents.get(uri)
        if doc is None:
            raise JsonRpcInvalidParams(f"document {uri} is not open (send textDocument/didOpen first)")
        return doc

    def document_at(self, uri: str, position: types.Position) -> tuple[Document, int]:
        """The open document and the `str` offset of a position in it; InvalidParams when either is not there."""
        doc = self.document(uri)
        return doc, self.offset_of(doc, position)

    def document_state(self, doc: Document, *, include_text: bool = False) -> dict[str, Any]:
        text = doc.text.text
        state: dict[str, Any] = {
            "uri": doc.uri, "version": doc.text.version, "languageId": doc.language_id, "encoding": doc.text.encoding,
            "length": len(text), "lines": doc.text.line_count, "plainText": doc.syntax.plain_reason,
            "sha256": hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest(),
            "inSync": doc.out_of_sync is None, "syncProblem": doc.out_of_sync,
        }  # fmt: skip
        if include_text:
            state["text"] = text
        return state

    def offset_of(self, doc: Document, position: types.Position) -> int:
        return params.offset(doc, position)

    def lsp_position(self, doc: Document, offset: int) -> types.Position:
        line, character = doc.text.position_at(offset)
        return types.Position(line=line, character=character)

    def shutdown_engine(self) -> None:
        self.worker.close()
