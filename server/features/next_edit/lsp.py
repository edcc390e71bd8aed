"""Next-edit suggestions over LSP: the request (Copilot's language server's shape), the notifications and the
fallbacks for clients that do not send it (docs/next-edit.md has the contract).

- `textDocument/copilotInlineEdit` and `waferline/inlineEdit` {textDocument: {uri, version}, position} ->
  {edits: [{id, text, textDocument: {uri, version}, range, kind, command}]}, an empty list for no suggestion;
- `textDocument/didShowInlineEdit` {item: {id}} and `waferline/didEndInlineEdit` {id, reason};
- the `waferline.acceptInlineEdit` command [id];
- fallbacks: an edit that starts on the cursor's line at or before the cursor is an inline completion item (for a
  client that never sent the request), any edit a code action "Apply the predicted edit" with a `WorkspaceEdit`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

from waferline.server.features.next_edit.feature import END_REASONS, Proposal
from waferline.server.features.next_edit.source import Edit
from waferline.server.params import field, position, uinteger

if TYPE_CHECKING:
    from waferline.server.app import WaferlineServer
    from waferline.server.document import Document

INLINE_EDIT_METHODS = ("textDocument/copilotInlineEdit", "waferline/inlineEdit")
DID_SHOW_METHOD = "textDocument/didShowInlineEdit"
DID_END_METHOD = "waferline/didEndInlineEdit"
ACCEPT_COMMAND = "waferline.acceptInlineEdit"
ACTION_TITLE = "Apply the predicted edit"
log = logging.getLogger(__name__)


async def inline_edit(ls: WaferlineServer, params: Any) -> dict[str, Any]:
    """The request: at most one edit, for the version the client named (an empty list when it is not current)."""
    text_document = field(params, "textDocument")
    uri, version = field(text_document, "uri"), field(text_document, "version")
    if not isinstance(uri, str):
        raise JsonRpcInvalidParams("expected {textDocument: {uri, version}, position: {line, character}}")
    pos = position(field(params, "position"), "the position")
    version = None if version is None else uinteger(version, "textDocument.version")
    doc, offset = ls.document_at(uri, pos)
    if not ls.options.next_edit:
        return {"edits": []}
    proposals = await ls.next_edits.answer(doc, version, offset, ls.options)
    return {"edits": [item(doc, p) for p in proposals]}


def item(doc: Document, p: Proposal) -> dict[str, Any]:
    """An InlineEdit of the contract. Positions come from the document at the proposal's version, which the
    request checked is the current one."""
    out: dict[str, Any] = {
        "id": p.id,
        "text": p.edit.new,
        "textDocument": {"uri": p.uri, "version": p.version},
        "range": _range(doc, p.edit.start, p.edit.end),
        "kind": p.kind,
        "command": {"title": "Accept next edit", "command": ACCEPT_COMMAND, "arguments": [p.id]},
    }
    if p.confidence is not None:
        out["confidence"] = p.confidence
    return out


def _range(doc: Document, start: int, end: int) -> dict[str, Any]:
    (l0, c0), (l1, c1) = doc.text.position_at(start), doc.text.position_at(end)
    return {"start": {"line": l0, "character": c0}, "end": {"line": l1, "character": c1}}


def did_show(ls: WaferlineServer, params: Any) -> None:
    item_id = field(field(params, "item"), "id")
    if not isinstance(item_id, str):
        raise JsonRpcInvalidParams(f"{DID_SHOW_METHOD} expects {{item: {{id: string}}}}")
    ls.next_edits.shown(item_id)


def did_end(ls: WaferlineServer, params: Any) -> None:
    item_id, reason = field(params, "id"), field(params, "reason")
    if not isinstance(item_id, str) or reason not in END_REASONS:
        raise JsonRpcInvalidParams(f"{DID_END_METHOD} expects {{id: string, reason: one of {', '.join(END_REASONS)}}}")
    if reason == "accepted":
        ls.next_edits.accept(item_id)
    else:
        ls.next_edits.end(item_id, reason)


def accept(ls: WaferlineServer, args: tuple[Any, ...]) -> None:
    if len(args) != 1 or not isinstance(args[0], str):
        raise JsonRpcInvalidParams(f"{ACCEPT_COMMAND} expects [id]")
    ls.next_edits.accept(args[0])


def inline_fallback(ls: WaferlineServer, doc: Document, offset: int) -> types.InlineCompletionItem | None:
    """For a client that never sent the next-edit request: a next edit that starts on the cursor's line at or
    before the cursor, as an inline completion item (its range reaches the cursor, as clients require)."""
    if ls.next_edits.client_requests or not ls.options.next_edit:
        return None
    proposal = _propose_quietly(ls, doc, offset, for_action=False)
    if proposal is None or proposal.others:
        return None
    e, text = proposal.edit, doc.text
    if text.line_of(e.start) != text.line_of(offset) or e.start > offset:
        return None
    end, new = max(e.end, offset), e.new + doc.text.text[e.end : offset]
    ls.next_edits.counters.add("inlineFallback")
    rng = _range(doc, e.start, end)
    return types.InlineCompletionItem(
        insert_text=new,
        range=types.Range(start=types.Position(**rng["start"]), end=types.Position(**rng["end"])),
        command=types.Command(title="Accept next edit", command=ACCEPT_COMMAND, arguments=[proposal.id]),
    )


def code_actions(ls: WaferlineServer, params: types.CodeActionParams) -> list[types.CodeAction]:
    """The predicted edit as a code action at the requested range, with every document it changes."""
    if not ls.options.next_edit:
        return []
    doc = ls.documents.get(params.text_document.uri)
    if doc is None:
        return []
    proposal = _propose_quietly(ls, doc, ls.offset_of(doc, params.range.start), for_action=True)
    if proposal is None:
        return []
    ls.next_edits.counters.add("codeActions")
    edits: dict[str, list[Edit]] = {}
    for other in (proposal.edit, *proposal.others):
        edits.setdefault(other.uri or doc.uri, []).append(other)
    # No `command` on it: a CodeAction with one reads as a Command to clients that tell the two apart by shape.
    action = types.CodeAction(title=ACTION_TITLE, kind=types.CodeActionKind.RefactorRewrite)
    action.edit = _workspace_edit(ls, edits)
    return [action]


def _propose_quietly(ls: WaferlineServer, doc: Document, offset: int, *, for_action: bool) -> Proposal | None:
    """A fallback's proposal: a bug in a candidate must not cost the inline completion or the code actions it rides
    along with (the next-edit request itself lets it through, as an internal error)."""
    try:
        return ls.next_edits.propose(doc, offset, for_action=for_action)
    except Exception:
        log.exception("next-edit candidate failed for %s (the fallback is skipped)", doc.uri)
        return None


def _workspace_edit(ls: WaferlineServer, edits: dict[str, list[Edit]]) -> types.WorkspaceEdit:
    """Versioned document edits when the client takes them (it refuses them for a document that moved on)."""
    changes: dict[str, list[types.TextEdit]] = {}
    versions: dict[str, int] = {}
    for uri, doc_edits in edits.items():
        doc = ls.documents[uri]
        versions[uri] = doc.text.version
        changes[uri] = []
        for e in sorted(doc_edits, key=lambda e: e.start):
            rng = _range(doc, e.start, e.end)
            changes[uri].append(types.TextEdit(
                range=types.Range(start=types.Position(**rng["start"]), end=types.Position(**rng["end"])),
                new_text=e.new,
            ))  # fmt: skip
    ws = ls.client_capabilities.workspace
    if ws is not None and ws.workspace_edit is not None and ws.workspace_edit.document_changes:
        return types.WorkspaceEdit(document_changes=[
            types.TextDocumentEdit(
                text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=versions[uri]),
                edits=list(text_edits),
            )
            for uri, text_edits in changes.items()
        ])  # fmt: skip
    return types.WorkspaceEdit(changes=changes)
