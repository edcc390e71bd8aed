"""Every LSP feature waferline serves, registered in one place. Each handler reads params, calls one method of the
server (server/app.py), of a feature object it holds, or a plain function of a feature module (server/features/),
and builds lsprotocol types; the work lives elsewhere."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

from waferline.engine.api import Engine
from waferline.server.app import ACCEPT_COMMAND, WaferlineServer
from waferline.server.document import Document
from waferline.server.features.actions import lsp as actions
from waferline.server.features.ask import ASK_COMMAND, ASK_METHOD, ask
from waferline.server.features.ask_stream import partial_result_token
from waferline.server.features.hover import hover as hover_at
from waferline.server.features.inline import Suggestion, advance
from waferline.server.features.next_edit import lsp as next_edit
from waferline.server.options import SECTION, Options
from waferline.server.params import field, position
from waferline.syntax.text import PositionError

log = logging.getLogger(__name__)

STATS_METHOD = "waferline/stats"
DOCUMENT_METHOD = "waferline/document"  # what the server holds for a document: lets a client check it is in sync
# The client's notification that the user is in a document at a position (active editor changed, buffer entered,
# cursor placed): where a warm-up prefills the next suggestion's prompt (server/features/warm.py).
FOCUS_METHOD = "waferline/didFocus"
# The client's notification that the user kept text of an inline suggestion: {textDocument: {uri}, kind: "word" |
# "line" | "full", text}, for each accept of the next word, the next line or the whole rest (docs/editors.md).
ACCEPT_TEXT_METHOD = "waferline/didAcceptCompletionText"
KEPT_KINDS = ("word", "line", "full")


def suggestion_range(doc: Document, s: Suggestion, position: types.Position) -> types.Range:
    """The range a suggestion replaces: from the cursor over the characters it supersedes (an auto-closed `)`).
    Computed from the snapshot the suggestion was made for, so later edits cannot shift it."""
    replaced = doc.text.text[s.offset : s.replace_end]
    try:  # the cursor as the server read it: past a line's end is its end, (line_count, 0) the document's end
        line, character = doc.text.position_at(doc.text.offset_at(position.line, position.character))
    except PositionError:  # the text changed under the request: the client's own position
        line, character = position.line, position.character
    end = advance(line, character, replaced, doc.text.encoding)
    return types.Range(
        start=types.Position(line=line, character=character), end=types.Position(line=end[0], character=end[1])
    )


def accept_command(uri: str, s: Suggestion) -> types.Command:
    # The last argument tells a client (and `waferline eval-editor`) how sure the server was; editors ignore it.
    quality = {"confidence": s.confidence, "features": s.features} if s.confidence is not None else {}
    return types.Command(
        title="waferline: suggestion accepted", command=ACCEPT_COMMAND, arguments=[uri, s.source, quality]
    )


def create_server(
    defaults: Options | None = None, *, engine_factory: Callable[[Options], Engine] | None = None
) -> WaferlineServer:
    """A server with every feature registered; `defaults` come from the command line. `engine_factory` builds the
    engine for the current options (default: the local model, engine/factory.py's `build_engine`)."""
    server = WaferlineServer(defaults=defaults, engine_factory=engine_factory)

    @server.feature(types.INITIALIZE)
    def initialize(ls: WaferlineServer, params: types.InitializeParams) -> None:
        ls.configure(params.initialization_options, source="initializationOptions")
        td = params.capabilities.text_document
        ls.client_has_inline = td is not None and td.inline_completion is not None

    @server.feature(types.INITIALIZED)
    async def initialized(ls: WaferlineServer, params: types.InitializedParams) -> None:
        ls.background.spawn(
            ls.indexing.begin()
        )  # after the engine load is queued (completions wait for it), not before
        await ls.load_engine()

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: WaferlineServer, params: None) -> None:
        ls.indexing.close()
        ls.shutdown_engine()

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: WaferlineServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.open_document(params.text_document)
        ls.indexing.updates.document_changed(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: WaferlineServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.change_document(params)
        ls.indexing.updates.document_changed(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: WaferlineServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.close_document(params.text_document.uri)
        ls.indexing.updates.document_closed(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=False))
    def did_save(ls: WaferlineServer, params: types.DidSaveTextDocumentParams) -> None:
        ls.indexing.updates.document_saved(params.text_document.uri)

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched_files(ls: WaferlineServer, params: types.DidChangeWatchedFilesParams) -> None:
        ls.indexing.updates.files_changed(params)

    @server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    async def did_change_workspace_folders(ls: WaferlineServer, params: types.DidChangeWorkspaceFoldersParams) -> None:
        await ls.indexing.start()  # pygls has updated its folder list: index the new ones

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    async def hover(ls: WaferlineServer, params: types.HoverParams) -> types.Hover | None:
        return await hover_at(ls, ls.summaries, params)

    @server.feature(ASK_METHOD)
    async def ask_request(ls: WaferlineServer, params: Any) -> dict[str, Any]:
        return await ask(ls, params, partial_result_token=partial_result_token(params))

    @server.command(ASK_COMMAND)
    async def ask_command(ls: WaferlineServer, *args: Any) -> dict[str, Any]:
        return await ask(ls, args[0] if len(args) == 1 else None)

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(code_action_kinds=actions.KINDS, resolve_provider=True)
    )
    def code_action(ls: WaferlineServer, params: types.CodeActionParams) -> list[types.CodeAction]:
        return actions.code_actions(ls, params) + next_edit.code_actions(ls, params)

    @server.feature(types.CODE_ACTION_RESOLVE)
    async def code_action_resolve(ls: WaferlineServer, params: types.CodeAction) -> types.CodeAction:
        return await actions.resolve(ls, params)

    @server.command(actions.APPLY_COMMAND)
    async def apply_action(ls: WaferlineServer, *args: Any) -> dict[str, Any]:
        return await actions.execute(ls, actions.APPLY_COMMAND, args)

    @server.command(actions.REWRITE_COMMAND)
    async def rewrite(ls: WaferlineServer, *args: Any) -> dict[str, Any]:
        return await actions.execute(ls, actions.REWRITE_COMMAND, args)

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(ls: WaferlineServer, params: types.DidChangeConfigurationParams) -> None:
        settings: Any = params.settings
        if not settings and _can_pull_configuration(ls):  # the pull model: the client sends an empty notification
            settings = (await ls.workspace_configuration_async(_configuration_params()))[0]
        if ls.configure(settings, source="didChangeConfiguration"):
            await ls.load_engine()

    @server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
    async def inline_completion(
        ls: WaferlineServer, params: types.InlineCompletionParams
    ) -> types.InlineCompletionList:
        explicit = params.context.trigger_kind == types.InlineCompletionTriggerKind.Invoked
        doc, offset = ls.document_at(params.text_document.uri, params.position)
        if (predicted := next_edit.inline_fallback(ls, doc, offset)) is not None:
            return types.InlineCompletionList(items=[predicted])
        ls.warmups.requested(doc, offset)
        s = await ls.inline.answer(doc, offset, ls.options, explicit=explicit)
        if s is None:
            return types.InlineCompletionList(items=[])
        item = types.InlineCompletionItem(
            insert_text=s.text, range=suggestion_range(doc, s, params.position), command=accept_command(doc.uri, s)
        )
        return types.InlineCompletionList(items=[item])

    @server.feature(types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions(resolve_provider=False))
    async def completion(ls: WaferlineServer, params: types.CompletionParams) -> types.CompletionList:
        doc, offset = ls.document_at(params.text_document.uri, params.position)  # checked first, whatever follows
        # Clients with inline completion get the suggestion as ghost text; repeating it in the menu would show it twice.
        if ls.client_has_inline or not ls.options.completion_fallback:
            return types.CompletionList(is_incomplete=False, items=[])
        explicit = params.context is not None and params.context.trigger_kind == types.CompletionTriggerKind.Invoked
        ls.warmups.requested(doc, offset)
        s = await ls.inline.answer(doc, offset, ls.options, explicit=explicit)
        if s is None:
            return types.CompletionList(is_incomplete=True, items=[])
        rng = suggestion_range(doc, s, params.position)
        if rng.end.line != rng.start.line:  # a completion edit must stay on one line: insert only
            rng = types.Range(start=params.position, end=params.position)
        label = s.text.splitlines()[0] if s.text.strip("\r\n") else s.text
        item = types.CompletionItem(
            label=(label[:60] + "…") if len(label) > 60 else label or "⏎",
            kind=types.CompletionItemKind.Snippet,
            detail="waferline",
            documentation=types.MarkupContent(kind=types.MarkupKind.PlainText, value=s.text),
            sort_text="0",
            filter_text=s.text,
            insert_text_format=types.InsertTextFormat.PlainText,
            text_edit=types.TextEdit(range=rng, new_text=s.text),
            command=accept_command(doc.uri, s),
        )
        return types.CompletionList(is_incomplete=True, items=[item])

    @server.command(ACCEPT_COMMAND)
    def accepted(ls: WaferlineServer, *args: Any) -> None:
        ls.stats.accepted += 1

    @server.feature(STATS_METHOD)
    def stats(ls: WaferlineServer, params: Any) -> dict[str, Any]:
        state = ls.engine_state()
        return {**ls.stats.snapshot(), "engine": state["engine"], "chat_engine": state["chatEngine"],
                "engine_state": state["state"], "engine_problems": state["problems"],
                "inlineEdit": ls.next_edits.counters.snapshot()}  # fmt: skip

    for method in next_edit.INLINE_EDIT_METHODS:  # the same handler under Copilot's name and ours

        @server.feature(method)
        async def inline_edit(ls: WaferlineServer, params: Any) -> dict[str, Any]:
            return await next_edit.inline_edit(ls, params)

    @server.feature(next_edit.DID_SHOW_METHOD)
    def did_show_inline_edit(ls: WaferlineServer, params: Any) -> None:
        next_edit.did_show(ls, params)

    @server.feature(next_edit.DID_END_METHOD)
    def did_end_inline_edit(ls: WaferlineServer, params: Any) -> None:
        next_edit.did_end(ls, params)

    @server.command(next_edit.ACCEPT_COMMAND)
    def accept_inline_edit(ls: WaferlineServer, *args: Any) -> None:
        next_edit.accept(ls, args)

    @server.feature(FOCUS_METHOD)
    def did_focus(ls: WaferlineServer, params: Any) -> None:
        uri = field(field(params, "textDocument"), "uri")
        if not isinstance(uri, str):
            raise JsonRpcInvalidParams(f"{FOCUS_METHOD} expects {{'textDocument': {{'uri': string}}, 'position'?}}")
        at = field(params, "position")
        pos = position(at, f"{FOCUS_METHOD}'s position") if at is not None else None
        ls.warmups.focused(uri, None if pos is None else (pos.line, pos.character))

    @server.feature(DOCUMENT_METHOD)
    def document_state(ls: WaferlineServer, params: Any) -> dict[str, Any]:
        uri = field(params, "uri")
        if not isinstance(uri, str):
            raise JsonRpcInvalidParams(f"{DOCUMENT_METHOD} expects {{'uri': string, 'includeText'?: bool}}")
        return ls.document_state(ls.document(uri), include_text=field(params, "includeText") is True)

    @server.feature(ACCEPT_TEXT_METHOD)
    def did_accept_text(ls: WaferlineServer, params: Any) -> None:
        kind, text = field(params, "kind"), field(params, "text")
        if kind not in KEPT_KINDS or not isinstance(text, str):
            shape = f"{{textDocument: {{uri}}, kind: one of {', '.join(KEPT_KINDS)}, text}}"
            raise JsonRpcInvalidParams(f"{ACCEPT_TEXT_METHOD} expects {shape}")
        ls.stats.add_kept(kind, len(text))

    return server


def _can_pull_configuration(ls: WaferlineServer) -> bool:
    ws = ls.client_capabilities.workspace
    return ws is not None and bool(ws.configuration)


def _configuration_params() -> types.ConfigurationParams:
    return types.ConfigurationParams(items=[types.ConfigurationItem(section=SECTION)])
