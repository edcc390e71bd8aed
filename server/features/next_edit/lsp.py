"""Next-edit suggestions over LSP: the request (Copilot's language server's shape), the notifications and the
fallbacks for clients that do not send it (docs/next-edit.md has the contract).

- `textDocument/copilotInlineEdit` and `waferline/inlineEdit` {textDocument: {uri, version}, position} ->
  {edits: [{id, text, textDocument: {uri, version}, range, kind, command}]}, an empty list for no suggestion;
- `textDocument/didShowInlineEdit` {item: {id}} and `waferline/didEndInlineEdit` {id, reason};
- the `waferline.acceptInlineEdit` command [id];
- fallbacks: an edit that starts on the cursor's line at or before the cursor is an inline completion item (for a
  client that never sent the request), any edit a code action "Apply the predicted edit" with a `WorkspaceEdit`,
  a changed signature's call sites in other files (open or not) the code action "Update N call sites in other
  files", one multi-file `WorkspaceEdit`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

from waferline.server.features.next_edit.elsewhere import reread
from waferline.server.features.next_edit.feature import END_REASONS, Proposal
from waferline.server.features.next_edit.source import Edit
from waferline.server.params import field, position, uinteger
from waferline.syntax.text import DocumentText

if TYPE_CHECKING:
    from waferline.server.app import WaferlineServer
    from waferline.server.document import Document

INLINE_EDIT_METHODS = ("textDocument/copilotInlineEdit", "waferline/inlineEdit")
DID_SHOW_METHOD = "textDocument/didShowInlineEdit"
DID_END_METHOD = "waferline/didEndInlineEdit"
ACCEPT_COMMAND = "waferline.acceptInlineEdit"
ACTION_TITLE = "Apply the predicted edit"
OTHER_FILES_TITLE = "Update {n} call site{s} in other files"
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
    """The predicted edit as a code action at the requested range ("Apply the predicted edit", this document's
    edit), and a changed signature's call sites in other files as another ("Update N call sites in other files",
    one multi-file edit); each only while every text it edits is the one it was computed on."""
    if not ls.options.next_edit:
        return []
    doc = ls.documents.get(params.text_document.uri)
    if doc is None:
        return []
    proposal = _propose_quietly(ls, doc, ls.offset_of(doc, params.range.start), for_action=True)
    if proposal is None:
        return []
    here = [e for e in (proposal.edit, *proposal.others) if e.uri is None]
    elsewhere = [e for e in (proposal.edit, *proposal.others) if e.uri is not None]
    found: list[tuple[str, dict[str, list[Edit]]]] = []
    if here:
        found.append((ACTION_TITLE, {doc.uri: [Edit(e.start, e.end, e.new, doc.uri, doc.text.version) for e in here]}))
    if elsewhere:
        by_file: dict[str, list[Edit]] = {}
        for e in elsewhere:
            by_file.setdefault(e.uri or doc.uri, []).append(e)
        n = len(elsewhere)
        found.append((OTHER_FILES_TITLE.format(n=n, s="" if n == 1 else "s"), by_file))
    out = []
    for title, edits in found:
        workspace_edit = _workspace_edit(ls, edits)
        if workspace_edit is None:
            ls.next_edits.counters.add("stale")
            continue
        # No `command` on it: a CodeAction with one reads as a Command to clients that tell the two apart by shape.
        action = types.CodeAction(title=title, kind=types.CodeActionKind.RefactorRewrite)
        action.edit = workspace_edit
        out.append(action)
    ls.next_edits.counters.add("codeActions", len(out))
    return out


def _propose_quietly(ls: WaferlineServer, doc: Document, offset: int, *, for_action: bool) -> Proposal | None:
    """A fallback's proposal: a bug in a candidate must not cost the inline completion or the code actions it rides
    along with (the next-edit request itself lets it through, as an internal error)."""
    try:
        return ls.next_edits.propose(doc, offset, for_action=for_action)
    except Exception:
        log.exception("next-edit candidate failed for %s (the fallback is skipped)", doc.uri)
        return None


def _workspace_edit(ls: WaferlineServer, edits: dict[str, list[Edit]]) -> types.WorkspaceEdit | None:
    """Versioned document edits when the client takes them (it refuses them for a document that moved on); None
    when a text is no longer the one the edits were computed on (an open document's version, an unopened file's
    bytes, read again here)."""
    changes: dict[str, list[types.TextEdit]] = {}
    versions: dict[str, int | None] = {}
    for uri, doc_edits in edits.items():
        text = _current_text(ls, uri, doc_edits)
        if text is None:
            return None
        versions[uri] = text.version if uri in ls.documents else None
        changes[uri] = []
        for e in sorted(doc_edits, key=lambda e: e.start):
            (l0, c0), (l1, c1) = text.position_at(e.start), text.position_at(e.end)
            start, end = types.Position(line=l0, character=c0), types.Position(line=l1, character=c1)
            changes[uri].append(types.TextEdit(range=types.Range(start=start, end=end), new_text=e.new))
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


def _current_text(ls: WaferlineServer, uri: str, edits: list[Edit]) -> DocumentText | None:
    """The text `edits` apply to, when it is still the one they were computed on, else None."""
    doc = ls.documents.get(uri)
    if doc is not None:
        if any(e.digest is not None for e in edits) or any(e.version != doc.text.version for e in edits):
            return None  # opened since (its editor text may differ from the disk's), or changed since
        return doc.text
    if any(e.digest is None for e in edits):
        return None  # an open document's edit, and the document has closed
    disk = reread(uri, edits)
    return None if disk is None else DocumentText(disk, encoding=ls.encoding)
