"""Code actions over LSP: offered by `textDocument/codeAction` at once, computed by `codeAction/resolve`.

An offered action carries only `data` (kind, document, version, range): no model has run. Resolving it finds the same
target again, shows `$/progress` (cancellable) while the model runs, and answers with one `WorkspaceEdit` for the
version the action was offered for: the client applies all of it or, if the document moved on, none of it. A refused
action comes back without an edit, with `disabled.reason` saying why, and the reason is also shown
(`window/showMessage`). A client that cannot resolve code actions gets the same actions as `waferline.applyAction`
commands, which compute the edit and send it with `workspace/applyEdit`.

`waferline.rewrite` (instruction-following models only) is a command: the client asks the user for the instruction
and sends `[{"uri", "version", "start", "end", "instruction"}]` (the offered action's argument plus the instruction),
or `[{"textDocument": {"uri"}, "range", "instruction"}]`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import AsyncIterator
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

from waferline.server.features.actions.compute import Outcome, compute, refuse
from waferline.server.features.actions.targets import REPAIR, REWRITE, Source, Target, find_targets
from waferline.server.params import field, position, span

if TYPE_CHECKING:
    from waferline.server.app import WaferlineServer
    from waferline.server.document import Document

log = logging.getLogger(__name__)

APPLY_COMMAND = "waferline.applyAction"
REWRITE_COMMAND = "waferline.rewrite"
KINDS = [types.CodeActionKind.QuickFix, types.CodeActionKind.RefactorRewrite]
_tokens = itertools.count(1)


@dataclass(frozen=True)
class ActionData:
    kind: str
    uri: str
    version: int
    start: int  # str offsets of the requested range in that version
    end: int
    instruction: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "uri": self.uri, "version": self.version, "start": self.start, "end": self.end}


def parse_data(ls: WaferlineServer, data: Any, kind: str | None = None) -> ActionData:
    """An action's data or a command's argument; InvalidParams when it is not one. Its offsets are checked
    against the document when the action runs (`run_action`), for the version it names."""
    text_document = field(data, "textDocument")
    if text_document is not None or field(data, "range") is not None:  # {"textDocument", "range"} from a client
        uri = field(text_document, "uri")
        doc = ls.document(uri) if isinstance(uri, str) else None
        rng = field(data, "range")
        if doc is None or rng is None:
            raise JsonRpcInvalidParams("expected {textDocument: {uri}, range: {start, end}, instruction?}")
        start = ls.offset_of(doc, position(field(rng, "start"), "the range's start"))
        end = ls.offset_of(doc, position(field(rng, "end"), "the range's end"))
        data = {"kind": kind, "uri": doc.uri, "version": doc.text.version, "start": min(start, end),
                "end": max(start, end), "instruction": field(data, "instruction")}  # fmt: skip
    kind_, uri_, version = kind or field(data, "kind"), field(data, "uri"), field(data, "version")
    start_, end_, instruction = field(data, "start"), field(data, "end"), field(data, "instruction")
    if not (isinstance(kind_, str) and isinstance(uri_, str) and _is_int(version) and _is_int(start_)
            and _is_int(end_)):  # fmt: skip
        raise JsonRpcInvalidParams(f"not a waferline code action: {data!r}"[:300])
    if instruction is not None and not isinstance(instruction, str):
        raise JsonRpcInvalidParams("instruction must be a string")
    return ActionData(kind_, uri_, version, start_, end_, instruction)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _source(doc: Document) -> Source:
    return Source(doc.readable_text, doc.language_id, doc.syntax)


def _supports_resolve(ls: WaferlineServer) -> bool:
    td = ls.client_capabilities.text_document
    ca = td.code_action if td is not None else None
    support = ca.resolve_support if ca is not None else None
    return support is not None and "edit" in support.properties


def _wanted(kind: str, only: list[str] | None) -> bool:
    return not only or any(kind == o or kind.startswith(o + ".") for o in only)


def code_actions(ls: WaferlineServer, params: types.CodeActionParams) -> list[types.CodeAction]:
    """The actions the range offers, without running the model."""
    doc = ls.document(params.text_document.uri)
    start, end = ls.offset_of(doc, params.range.start), ls.offset_of(doc, params.range.end)
    start, end = min(start, end), max(start, end)
    if doc.out_of_sync is not None:  # an edit of a text known to be wrong would corrupt the editor's (reliability.md)
        return []
    instructable = ls.worker.can_chat()
    only = [str(k.value if hasattr(k, "value") else k) for k in (params.context.only or [])]
    actions = []
    for target in find_targets(_source(doc), start, end):
        kind = types.CodeActionKind.QuickFix if target.kind == REPAIR else types.CodeActionKind.RefactorRewrite
        if not _wanted(kind.value, only) or (target.kind == REWRITE and not instructable):
            continue
        data = ActionData(target.kind, doc.uri, doc.text.version, start, end).to_json()
        action = types.CodeAction(title=target.title, kind=kind, is_preferred=target.kind == REPAIR or None)
        if target.kind == REWRITE:
            action.command = types.Command(title=target.title, command=REWRITE_COMMAND, arguments=[data])
        elif _supports_resolve(ls):
            action.data = data
        else:
            action.command = types.Command(title=target.title, command=APPLY_COMMAND, arguments=[data])
        actions.append(action)
    return actions


@contextlib.asynccontextmanager
async def progress(ls: WaferlineServer, title: str) -> AsyncIterator[Future[Any] | None]:
    """Server-initiated `$/progress` around a model run, when the client accepts it; yields the token's
    cancellation future (cancelled when the user presses the progress notification's cancel button)."""
    window = ls.client_capabilities.window
    token = f"waferline-action-{next(_tokens)}"
    if window is None or not window.work_done_progress:
        yield None
        return
    try:
        await ls.work_done_progress.create_async(token)
    except Exception as e:  # refused by the client: run without progress
        log.info("no progress for %s: %s", title, e)
        yield None
        return
    ls.work_done_progress.begin(
        token, types.WorkDoneProgressBegin(title=title, message="the model is writing", cancellable=True)
    )
    try:
        yield ls.work_done_progress.tokens.get(token)
    finally:
        ls.work_done_progress.end(token, types.WorkDoneProgressEnd())
        ls.work_done_progress.tokens.pop(token, None)


async def run_action(ls: WaferlineServer, data: ActionData) -> tuple[Document, Outcome | None, str | None]:
    """(document, outcome, reason): the outcome for the target `data` names, or the reason there is none."""
    doc = ls.document(data.uri)
    if doc.out_of_sync is not None:
        return doc, None, "the server's copy of the document is out of sync with the editor's; reopen the file"
    if doc.text.version != data.version:
        return doc, None, "the document changed since the action was offered; ask for code actions again"
    revision = doc.text.revision  # versions may repeat: the server's own count of edits says whether one came
    start, end = span(doc, data.start, data.end)  # the version is the offered one: its offsets must fit
    src = _source(doc)
    target: Target | None = next((t for t in find_targets(src, start, end) if t.kind == data.kind), None)
    if target is None:
        return doc, None, "this action no longer applies here"
    async with progress(ls, target.title) as cancel_button:
        inner = asyncio.ensure_future(compute(ls, data.uri, src, target, data.instruction))
        if cancel_button is not None:
            cancel_button.add_done_callback(lambda f: inner.cancel() if f.cancelled() else None)
        try:
            outcome = await inner
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():  # $/cancelRequest: pygls answers RequestCancelled
                raise
            outcome = refuse(target, "cancelled")
    if outcome.new_text is None:
        return doc, outcome, outcome.reason
    if doc.text.version != data.version or doc.text.revision != revision or doc.out_of_sync is not None:
        # typed while the model ran (or the text went out of sync): an edit for the old text would corrupt it
        return doc, outcome, "the document changed while the model ran; nothing was changed"
    return doc, outcome, None


def workspace_edit(ls: WaferlineServer, doc: Document, version: int, outcome: Outcome) -> types.WorkspaceEdit:
    """One edit of one document, for the version it was computed for."""
    assert outcome.new_text is not None, "a refused outcome has no edit"
    new_text = outcome.new_text
    if "\r\n" in doc.text.text:  # keep the document's line endings
        new_text = new_text.replace("\r\n", "\n").replace("\n", "\r\n")
    rng = types.Range(start=ls.lsp_position(doc, outcome.target.start), end=ls.lsp_position(doc, outcome.end))
    edit = types.TextEdit(range=rng, new_text=new_text)
    ws = ls.client_capabilities.workspace
    if ws is not None and ws.workspace_edit is not None and ws.workspace_edit.document_changes:
        ident = types.OptionalVersionedTextDocumentIdentifier(uri=doc.uri, version=version)
        return types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(text_document=ident, edits=[edit])])
    return types.WorkspaceEdit(changes={doc.uri: [edit]})


def _tell(ls: WaferlineServer, title: str, reason: str) -> None:
    log.info("%s: %s", title, reason)
    ls.window_show_message(
        types.ShowMessageParams(type=types.MessageType.Warning, message=f"{title}: no change, {reason}")
    )


async def resolve(ls: WaferlineServer, action: types.CodeAction) -> types.CodeAction:
    """codeAction/resolve: the edit, or the action disabled with the reason it has none."""
    if action.data is None or action.edit is not None:
        return action
    data = parse_data(ls, action.data)
    doc, outcome, reason = await run_action(ls, data)
    if reason is not None or outcome is None:
        reason = reason or "no edit"
        action.disabled = types.CodeActionDisabled(reason=reason)
        _tell(ls, action.title, reason)
        return action
    action.edit = workspace_edit(ls, doc, data.version, outcome)
    return action


async def execute(ls: WaferlineServer, command: str, args: tuple[Any, ...]) -> dict[str, Any]:
    """waferline.applyAction and waferline.rewrite: compute the edit and send it with workspace/applyEdit."""
    if len(args) != 1:
        raise JsonRpcInvalidParams(f"{command} takes one argument (an object), got {len(args)}")
    data = parse_data(ls, args[0], REWRITE if command == REWRITE_COMMAND else None)
    if command == REWRITE_COMMAND and not (data.instruction or "").strip():
        raise JsonRpcInvalidParams(f"{REWRITE_COMMAND} needs an instruction: the editor asks the user for it")
    doc, outcome, reason = await run_action(ls, data)
    title = outcome.target.title if outcome is not None else f"waferline: {data.kind}"
    if reason is not None or outcome is None:
        _tell(ls, title, reason or "no edit")
        return {"applied": False, "reason": reason}
    edit = workspace_edit(ls, doc, data.version, outcome)
    result = await ls.workspace_apply_edit_async(types.ApplyWorkspaceEditParams(edit=edit, label=title))
    if not result.applied:
        return {"applied": False, "reason": result.failure_reason or "the editor did not apply the edit"}
    return {"applied": True}
