"""Next-edit suggestions through the real server over LSP (docs/next-edit.md): the contract the editor clients are
built against (nes-protocol), a rename followed occurrence by occurrence to the end, stale versions, the
notifications' counters, the fallbacks, and edits raced against requests.

The engine is the test double (tests/support/serve_fixed.py): the structural candidates use no model.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import pytest
from lsp_support import as_dict, engine_ready, inline, lsp_session, open_doc, stats
from lsprotocol import types
from pytest_lsp import LanguageClient
from repo_support import repo_session, wait_indexed

pytestmark = pytest.mark.asyncio

URI = "file:///tmp/waferline-test/shapes.py"
SOURCE = '''def area(value, scale=2):
    """The area of a square."""
    total = value * value
    return total * scale + value


def other(value):
    return value
'''
RENAMED = SOURCE.replace("value", "amount", 4)  # the four in area(); other()'s own parameter is not the same name


class Client:
    """One client's copy of the document: edits it sends, and the edits the server proposes applied to it."""

    def __init__(self, client: LanguageClient, uri: str, text: str) -> None:
        self.client, self.uri, self.text, self.version = client, uri, text, 1
        open_doc(client, uri, text)

    def offset(self, line: int, character: int) -> int:
        starts = [0] + [i + 1 for i, ch in enumerate(self.text) if ch == "\n"]
        return starts[line] + character

    def position(self, offset: int) -> types.Position:
        line = self.text.count("\n", 0, offset)
        return types.Position(line=line, character=offset - (self.text.rfind("\n", 0, offset) + 1))

    def replace(self, start: int, end: int, new: str) -> None:
        rng = types.Range(start=self.position(start), end=self.position(end))
        self.text = self.text[:start] + new + self.text[end:]
        self.version += 1
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=self.uri, version=self.version),
            content_changes=[types.TextDocumentContentChangePartial(range=rng, text=new)],
        ))  # fmt: skip

    def request(self, position: types.Position, method: str = "textDocument/copilotInlineEdit",
                version: int | None = None) -> Any:  # fmt: skip
        params = {"textDocument": {"uri": self.uri, "version": self.version if version is None else version},
                  "position": {"line": position.line, "character": position.character}}  # fmt: skip
        return self.client.protocol.send_request_async(method, params)

    async def next_edit(self, position: types.Position, **kw: Any) -> list[dict[str, Any]]:
        return [_plain(e) for e in as_dict(await self.request(position, **kw))["edits"]]

    def apply(self, edit: dict[str, Any]) -> None:
        rng = edit["range"]
        start = self.offset(rng["start"]["line"], rng["start"]["character"])
        end = self.offset(rng["end"]["line"], rng["end"]["character"])
        self.replace(start, end, edit["text"])

    async def accept(self, edit: dict[str, Any]) -> None:
        self.apply(edit)
        command = edit["command"]
        await self.client.workspace_execute_command_async(
            types.ExecuteCommandParams(command=command["command"], arguments=command["arguments"])
        )


def _plain(value: Any) -> Any:
    if hasattr(value, "_asdict"):
        return {k: _plain(v) for k, v in value._asdict().items()}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


async def rename_param(doc: Client) -> types.Position:
    """The user renames area()'s parameter: `value` selected, `amount` typed over it."""
    at = doc.text.index("value")
    doc.replace(at, at + len("value"), "a")
    for i, ch in enumerate("mount"):
        doc.replace(at + 1 + i, at + 1 + i, ch)
    return doc.position(at + len("amount"))


async def test_capability_advertised() -> None:
    async with lsp_session("vscode", fixed_text="x") as client:
        caps = client.server_result.capabilities  # type: ignore[attr-defined]
        assert caps.experimental == {"inlineEditProvider": True}
        assert "waferline.acceptInlineEdit" in caps.execute_command_provider.commands


@pytest.mark.parametrize("method", ["textDocument/copilotInlineEdit", "waferline/inlineEdit"])
async def test_rename_chain_to_the_end(method: str) -> None:
    async with lsp_session("vscode", fixed_text="x") as client:
        doc = Client(client, URI, SOURCE)
        cursor = await rename_param(doc)
        lines = []
        for _ in range(10):
            edits = await doc.next_edit(cursor, method=method)
            if not edits:
                break
            (edit,) = edits
            assert edit["kind"] == "structural" and edit["textDocument"] == {"uri": URI, "version": doc.version}
            assert edit["command"]["command"] == "waferline.acceptInlineEdit"
            assert edit["command"]["arguments"] == [edit["id"]]
            lines.append(edit["range"]["start"]["line"])
            await doc.accept(edit)
            cursor = types.Position(**edit["range"]["end"])
        assert doc.text == RENAMED
        assert lines == [2, 2, 3], "each next use in order, one edit per request"
        s = as_dict((await stats(client))["inlineEdit"])
        assert s["requests"] == 4 and s["structural"] == 3 and s["accepted"] == 3 and s["empty"] == 1
        state = as_dict(await client.protocol.send_request_async("waferline/document", {"uri": URI}))
        assert state["version"] == doc.version


async def test_stale_version_gets_no_edit() -> None:
    async with lsp_session("vscode", fixed_text="x") as client:
        doc = Client(client, URI, SOURCE)
        cursor = await rename_param(doc)
        assert await doc.next_edit(cursor, version=doc.version - 1) == []
        assert len(await doc.next_edit(cursor)) == 1
        s = as_dict((await stats(client))["inlineEdit"])
        assert s["stale"] == 1 and s["empty"] == 1 and s["structural"] == 1


async def test_notifications_counted_and_rejected_edit_not_offered_again() -> None:
    async with lsp_session("vscode", fixed_text="x") as client:
        doc = Client(client, URI, SOURCE)
        cursor = await rename_param(doc)
        (first,) = await doc.next_edit(cursor)
        client.protocol.notify("textDocument/didShowInlineEdit", {"item": {"id": first["id"]}})
        client.protocol.notify("waferline/didEndInlineEdit", {"id": first["id"], "reason": "rejected"})
        (second,) = await doc.next_edit(cursor)
        assert second["range"] != first["range"], "the rejected edit is skipped at this version"
        client.protocol.notify("waferline/didEndInlineEdit", {"id": second["id"], "reason": "ignored"})
        client.protocol.notify("waferline/didEndInlineEdit", {"id": second["id"], "reason": "typedThrough"})
        s = as_dict((await stats(client))["inlineEdit"])
        assert s["shown"] == 1 and s["rejected"] == 1 and s["ignored"] == 1
        assert s["typedThrough"] == 0, "an item ends once"


async def test_bad_params_are_invalid_params() -> None:
    from pygls.exceptions import JsonRpcException

    async with lsp_session("vscode", fixed_text="x") as client:
        open_doc(client, URI, SOURCE)
        for params in ({"textDocument": {"uri": URI}, "position": {"line": "1", "character": 0}},
                       {"position": {"line": 0, "character": 0}},
                       {"textDocument": {"uri": "file:///nope.py", "version": 1},
                        "position": {"line": 0, "character": 0}}):  # fmt: skip
            with pytest.raises(JsonRpcException) as info:
                await client.protocol.send_request_async("waferline/inlineEdit", params)
            assert info.value.code == -32602


async def test_inline_completion_fallback_on_the_cursor_line() -> None:
    async with lsp_session("vscode", fixed_text="") as client:
        doc = Client(client, URI, "squares = [n * n for n in range(3)]\n")
        at = doc.text.index("n in")
        doc.replace(at, at + 1, "k")
        cursor = doc.position(at + 1)
        items = await inline(client, URI, cursor)
        assert [i.insert_text for i in items] == ["k * n for k"]
        assert items[0].range is not None and items[0].range.end == cursor
        assert items[0].range.start == types.Position(line=0, character=11)
        assert as_dict((await stats(client))["inlineEdit"])["inlineFallback"] == 1


async def test_code_action_fallback_with_a_workspace_edit() -> None:
    async with lsp_session("vscode", fixed_text="x") as client:
        doc = Client(client, URI, SOURCE)
        cursor = await rename_param(doc)
        actions = await client.text_document_code_action_async(types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=URI), range=types.Range(start=cursor, end=cursor),
            context=types.CodeActionContext(diagnostics=[]),
        ))  # fmt: skip
        predicted = [a for a in actions or [] if getattr(a, "title", None) == "Apply the predicted edit"]
        assert len(predicted) == 1, actions
        assert isinstance(predicted[0], types.CodeAction) and predicted[0].edit is not None, predicted
        (change,) = predicted[0].edit.document_changes or []
        assert isinstance(change, types.TextDocumentEdit) and change.text_document.version == doc.version
        assert [(e.range.start.line, e.new_text) for e in change.edits] == [(2, "amount")]


async def test_edits_raced_against_requests_never_name_a_stale_version() -> None:
    """Edits and requests interleaved without waiting (as a typist with a client that never waits): every edit
    the server returns names the version the request named, and its range holds the old name in that version."""
    rng = random.Random(7)
    async with lsp_session("vscode", fixed_text="x") as client:
        doc = Client(client, URI, SOURCE * 3)
        await rename_param(doc)
        pending: list[tuple[int, str, asyncio.Future[Any]]] = []
        for step in range(60):
            if rng.random() < 0.5:  # a keystroke far from the names: a comment at the end grows
                doc.replace(len(doc.text), len(doc.text), "#" if step % 7 else "\n")
            claimed = doc.version - (1 if rng.random() < 0.3 else 0)
            pos = doc.position(doc.text.index("amount"))
            pending.append((claimed, doc.text if claimed == doc.version else "", asyncio.ensure_future(
                doc.request(pos, version=claimed))))  # fmt: skip
        answered = 0
        for claimed, text, future in pending:
            edits = [_plain(e) for e in as_dict(await future)["edits"]]
            if claimed != doc.version and not text:
                assert edits == [] or all(e["textDocument"]["version"] == claimed for e in edits)
            for e in edits:
                answered += 1
                assert e["textDocument"]["version"] == claimed
                assert text, "an edit for a version that was not current when asked"
                r = e["range"]
                lines = text.split("\n")
                assert lines[r["start"]["line"]][r["start"]["character"] : r["end"]["character"]] == "value"
        s = as_dict((await stats(client))["inlineEdit"])
        assert answered > 0 and s["stale"] > 0


MODEL_OPTIONS = {"nextEditModel": True, "nextEditMinConfidence": 0.0}
WINDOW = "a = 1\nb = 2\nc = 3\n"


async def test_model_rewrite_of_the_window_is_the_edit() -> None:
    async with lsp_session("vscode", MODEL_OPTIONS, fixed_text="a = 1\nb = 20\nc = 3\n") as client:
        await engine_ready(client)  # the model path runs only once the engine is there
        doc = Client(client, URI, WINDOW)
        (edit,) = await doc.next_edit(types.Position(line=1, character=0))
        assert edit["kind"] == "model" and edit["text"] == "0"
        assert edit["range"] == {"start": {"line": 1, "character": 5}, "end": {"line": 1, "character": 5}}
        s = as_dict((await stats(client))["inlineEdit"])
        assert s["model"] == 1 and s["modelRuns"] == 1 and s["modelNewTokens"] > 0


async def test_model_path_off_by_default_and_a_rewrite_that_breaks_the_parse_is_not_shown() -> None:
    async with lsp_session("vscode", fixed_text="a = 1\nb = 20\nc = 3\n") as client:
        doc = Client(client, URI, WINDOW)
        assert await doc.next_edit(types.Position(line=1, character=0)) == []
        assert as_dict((await stats(client))["inlineEdit"])["modelRuns"] == 0
    async with lsp_session("vscode", MODEL_OPTIONS, fixed_text="a = 1\nb = (2\nc = 3\n") as client:
        await engine_ready(client)  # the model path runs only once the engine is there
        doc = Client(client, URI, WINDOW)
        assert await doc.next_edit(types.Position(line=1, character=0)) == []
        assert as_dict((await stats(client))["inlineEdit"])["modelRuns"] == 1


async def test_model_answer_for_a_version_that_moved_on_is_not_returned() -> None:
    """The race the model path has: the document changes while the model writes; the answer must be empty, and a
    newer request for the document cancels the older one."""
    async with lsp_session("vscode", MODEL_OPTIONS, fixed_text="a = 1\nb = 20\nc = 3\n", token_delay_ms=30) as client:
        await engine_ready(client)  # the model path runs only once the engine is there
        doc = Client(client, URI, WINDOW)
        first = asyncio.ensure_future(doc.request(types.Position(line=1, character=0)))  # sent now
        await asyncio.sleep(0.2)  # the model is writing
        doc.replace(len(doc.text), len(doc.text), "d = 4\n")
        assert as_dict(await first)["edits"] == []
        older = asyncio.ensure_future(doc.request(types.Position(line=1, character=0)))
        await asyncio.sleep(0.2)
        newer = asyncio.ensure_future(doc.request(types.Position(line=1, character=0)))
        assert as_dict(await older)["edits"] == []
        (edit,) = [_plain(e) for e in as_dict(await newer)["edits"]]
        assert edit["textDocument"]["version"] == doc.version
        s = as_dict((await stats(client))["inlineEdit"])
        assert s["stale"] >= 1 and s["cancelled"] >= 1


async def code_actions(client: LanguageClient, uri: str, cursor: types.Position) -> dict[str, types.CodeAction]:
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=types.Range(start=cursor, end=cursor),
        context=types.CodeActionContext(diagnostics=[]),
    ))  # fmt: skip
    return {
        a.title: a for a in actions or [] if isinstance(a, types.CodeAction) and not a.title.startswith("waferline:")
    }


def document_changes(action: types.CodeAction) -> dict[str, types.TextDocumentEdit]:
    assert action.edit is not None
    return {c.text_document.uri: c for c in action.edit.document_changes or []}  # type: ignore[union-attr]


async def test_signature_change_fixes_other_open_documents_in_one_code_action() -> None:
    main_uri = "file:///tmp/waferline-test/main.py"
    async with lsp_session("vscode", fixed_text="x") as client:
        doc = Client(client, URI, "def area(w, h):\n    return w * h\n\n\nprint(area(1, 2))\n")
        other = Client(client, main_uri, "from pkg.shapes import area\n\nx = area(3, 4)\n")
        at = doc.text.index(", h)")
        doc.replace(at + 2, at + 3, "")  # area(w, h) -> area(w, ) -> area(w)
        doc.replace(at, at + 2, "")
        (edit,) = await doc.next_edit(doc.position(at))
        assert edit["text"] == "" and edit["range"]["start"]["line"] == 4  # the call in this file: "1, 2" -> "1"
        actions = await code_actions(client, URI, doc.position(at))
        assert set(actions) == {"Apply the predicted edit", "Update 1 call site in other files"}
        assert set(document_changes(actions["Apply the predicted edit"])) == {URI}
        changes = document_changes(actions["Update 1 call site in other files"])
        assert set(changes) == {main_uri}
        assert changes[main_uri].text_document.version == other.version
        (fix,) = changes[main_uri].edits
        assert (fix.range.start.line, fix.range.start.character, fix.range.end.character, fix.new_text) == (
            2,
            10,
            13,
            "",
        )


async def test_signature_change_fixes_indexed_files_that_are_not_open(tmp_path: Path) -> None:
    """A temporary workspace, indexed: the call sites of a file the editor never opened are in the action's edit
    (its version null: the client edits the file on disk), computed from the disk's text."""
    root = (tmp_path / "ws").resolve()
    (root / "pkg").mkdir(parents=True)
    shapes = "def area(w, h):\n    return w * h\n"
    use = "from pkg.shapes import area\n\n\ndef f(w):\n    return area(w, 2) + area(w, h=w)\n"
    (root / "pkg" / "shapes.py").write_text(shapes)
    (root / "pkg" / "use.py").write_text(use)
    async with repo_session(root, tmp_path / "cache", fixed_text="x") as client:
        await wait_indexed(client)
        uri, use_uri = (root / "pkg" / "shapes.py").as_uri(), (root / "pkg" / "use.py").as_uri()
        doc = Client(client, uri, shapes)
        at = doc.text.index("w, h") + 1
        doc.replace(at, at + 3, "")  # area(w, h) -> area(w)
        actions = await code_actions(client, uri, doc.position(at))
        assert set(actions) == {"Update 2 call sites in other files"}, "no call in this file: only the other one"
        changes = document_changes(actions["Update 2 call sites in other files"])
        assert set(changes) == {use_uri} and changes[use_uri].text_document.version is None
        text = use
        for e in sorted(changes[use_uri].edits, key=lambda e: -e.range.start.character):
            line = text.splitlines(keepends=True)
            start = sum(len(x) for x in line[: e.range.start.line])
            text = text[: start + e.range.start.character] + e.new_text + text[start + e.range.end.character :]
        assert text == use.replace("area(w, 2) + area(w, h=w)", "area(w) + area(w)")


async def test_full_text_change_is_diffed_into_the_history() -> None:
    """A client that sends whole texts (TextDocumentContentChangeWholeDocument): the rename is still seen."""
    async with lsp_session("vscode", fixed_text="x") as client:
        doc = Client(client, URI, SOURCE)
        doc.text, doc.version = SOURCE.replace("area(value", "area(amount"), doc.version + 1
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=URI, version=doc.version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=doc.text)],
        ))  # fmt: skip
        (edit,) = await doc.next_edit(doc.position(doc.text.index("amount") + 6))
        assert edit["text"] == "amount" and edit["range"]["start"]["line"] == 2
