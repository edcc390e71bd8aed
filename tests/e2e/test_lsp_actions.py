"""Code actions over LSP, each end to end: offered without an edit, resolved into one versioned edit of one syntax
node with $/progress, or refused with a reason (a new syntax error, stale version, same code, no instruction-
following model); cancellation; and the command fallback for clients that cannot resolve code actions.

The test double (tests/support/serve_fixed.py) is "the model": its fixed text is what every action gets to work with.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
from lsp_support import capabilities, raw_request, set_completion
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient
from repo_support import copy_fixture, position_of, repo_session, wait_indexed

pytestmark = pytest.mark.asyncio


def open_text(client: LanguageClient, uri: str, text: str, language_id: str = "python") -> None:
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id=language_id, version=1, text=text)
        )
    )


async def actions_at(client: LanguageClient, uri: str, start: types.Position, end: types.Position | None = None):  # type: ignore[no-untyped-def]
    params = types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        range=types.Range(start=start, end=end or start),
        context=types.CodeActionContext(diagnostics=[]),
    )
    result = await client.text_document_code_action_async(params)
    return {a.title.split(" for ")[0]: a for a in result or [] if isinstance(a, types.CodeAction)}


def only_edit(action: types.CodeAction, uri: str, version: int | None = 1) -> types.TextEdit:
    """The one TextEdit of a resolved action (a versioned document change when the client takes those)."""
    assert action.edit is not None, action.disabled
    if action.edit.document_changes is not None:
        (change,) = action.edit.document_changes
        assert isinstance(change, types.TextDocumentEdit)
        assert change.text_document.uri == uri and change.text_document.version == version
        (edit,) = change.edits
    else:
        assert action.edit.changes is not None
        (edit,) = action.edit.changes[uri]
    assert isinstance(edit, types.TextEdit)
    return edit


async def raw_json(client: LanguageClient, method: str, params: dict[str, Any]) -> Any:
    """A request's result as the JSON the server sent (dicts and lists)."""
    result = await raw_request(client, method, params, msg_id=f"raw-{method}")

    def plain(obj: Any) -> Any:  # pygls hands JSON objects over as namedtuple-like Objects
        if hasattr(obj, "_asdict"):
            return {k: plain(v) for k, v in obj._asdict().items()}
        if isinstance(obj, list | tuple):
            return [plain(v) for v in obj]
        return obj

    return plain(result)


def apply(text: str, edit: types.TextEdit) -> str:
    lines = text.split("\n")

    def offset(p: types.Position) -> int:
        return sum(len(line) + 1 for line in lines[: p.line]) + p.character

    return text[: offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end) :]


def action_progress(client: LanguageClient) -> list[Any]:
    return [v for token, vs in client.progress_reports.items() if str(token).startswith("waferline-action") for v in vs]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return copy_fixture(tmp_path)


async def test_complete_body_docstring_and_regenerate(root: Path, tmp_path: Path) -> None:
    uri = (root / "shop" / "tools.py").as_uri()
    text = "def add(a, b):\n    pass\n\n\ndef double(x):\n    y = x * 2\n    return y\n"
    async with repo_session(root, tmp_path / "cache", fixed_text="return a + b") as client:
        open_text(client, uri, text)
        offered = await actions_at(client, uri, position_of(text, "pass"))
        body = offered["waferline: complete this function body"]
        assert body.edit is None and body.command is None and body.data is not None, "offered, not computed"
        assert body.kind == types.CodeActionKind.RefactorRewrite
        resolved = await client.code_action_resolve_async(body)
        edit = only_edit(resolved, uri)
        assert (edit.range.start.line, edit.range.start.character, edit.range.end.character) == (1, 4, 8)
        assert edit.new_text == "return a + b"
        assert apply(text, edit).startswith("def add(a, b):\n    return a + b\n")
        progress = action_progress(client)
        assert progress[0].kind == "begin" and progress[0].cancellable and progress[-1].kind == "end"

        set_completion(client, "Add two numbers.")
        doc_action = (await actions_at(client, uri, position_of(text, "add(a")))["waferline: write a docstring"]
        edit = only_edit(await client.code_action_resolve_async(doc_action), uri)
        assert (edit.range.start.line, edit.range.start.character) == (1, 0) and edit.range.start == edit.range.end
        assert edit.new_text == '    """Add two numbers."""\n'

        set_completion(client, "y = x + x")
        offered = await actions_at(client, uri, position_of(text, "y = x"))
        regen = offered["waferline: regenerate this statement"]
        edit = only_edit(await client.code_action_resolve_async(regen), uri)
        assert edit.new_text == "y = x + x" and (edit.range.start.line, edit.range.start.character) == (5, 4)
        assert edit.range.end.character == len("    y = x * 2")

        set_completion(client, "y = x * 2")
        refused = await client.code_action_resolve_async(regen)
        assert refused.edit is None and refused.disabled is not None
        assert "same code again" in refused.disabled.reason
        assert any("same code again" in m.message for m in client.messages), "the reason is shown too"


async def test_refusals_new_syntax_error_and_stale_version(root: Path, tmp_path: Path) -> None:
    uri = (root / "shop" / "greet.py").as_uri()
    text = "def greet():\n    return 1\n\n\ndef todo(a):\n    pass\n"
    async with repo_session(root, tmp_path / "cache", fixed_text='Say "hi"') as client:
        open_text(client, uri, text)
        doc_action = (await actions_at(client, uri, position_of(text, "return 1")))["waferline: write a docstring"]
        refused = await client.code_action_resolve_async(doc_action)
        assert refused.edit is None and refused.disabled is not None
        assert "would leave a syntax error at line 2" in refused.disabled.reason, "the quote closes the docstring"

        set_completion(client, ")))")
        body = (await actions_at(client, uri, position_of(text, "pass")))["waferline: complete this function body"]
        refused = await client.code_action_resolve_async(body)
        assert refused.edit is None and refused.disabled is not None and "syntax error" in refused.disabled.reason

        set_completion(client, "return a")
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=text + "\n")],
            )
        )
        stale = await client.code_action_resolve_async(body)
        assert stale.edit is None and stale.disabled is not None and "document changed" in stale.disabled.reason


async def test_repair_with_missing_tokens_and_with_the_model(root: Path, tmp_path: Path) -> None:
    js_uri = (root / "web" / "broken.js").as_uri()
    js = "function f(x) {\n  return g(x;\n}\n"
    py_uri = (root / "shop" / "broken.py").as_uri()
    py = "def f(x):\n    return x\n\n\nz = = 2\nw = 3\n"
    async with repo_session(root, tmp_path / "cache", fixed_text="z = 2") as client:
        open_text(client, js_uri, js, "javascript")
        repair = (await actions_at(client, js_uri, position_of(js, "return")))[
            "waferline: repair the syntax error here"
        ]
        assert repair.kind == types.CodeActionKind.QuickFix and repair.is_preferred
        edit = only_edit(await client.code_action_resolve_async(repair), js_uri)
        assert apply(js, edit) == "function f(x) {\n  return g(x);\n}\n", "the missing `)`, without the model"

        open_text(client, py_uri, py)
        offered = await actions_at(client, py_uri, position_of(py, "z = ="))
        assert "waferline: regenerate this statement" not in offered, "a broken statement is repaired instead"
        edit = only_edit(
            await client.code_action_resolve_async(offered["waferline: repair the syntax error here"]), py_uri
        )
        assert edit.new_text == "z = 2" and apply(py, edit) == "def f(x):\n    return x\n\n\nz = 2\nw = 3\n"
        assert "waferline: repair the syntax error here" not in await actions_at(
            client, py_uri, position_of(py, "w = 3")
        )


async def test_cancel_a_running_action(root: Path, tmp_path: Path) -> None:
    uri = (root / "shop" / "slow.py").as_uri()
    text = "def add(a, b):\n    pass\n"
    slow = "return " + "a + " * 200 + "b"
    async with repo_session(root, tmp_path / "cache", fixed_text=slow, token_delay_ms=30) as client:
        open_text(client, uri, text)
        body = (await actions_at(client, uri, position_of(text, "pass")))["waferline: complete this function body"]
        future = asyncio.ensure_future(
            client.protocol.send_request_async(types.CODE_ACTION_RESOLVE, body, msg_id="resolve-1")
        )
        await asyncio.sleep(0.5)
        client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id="resolve-1"))
        with pytest.raises(JsonRpcException) as info:
            await asyncio.wait_for(future, 10)
        assert info.value.code == types.LSPErrorCodes.RequestCancelled
        set_completion(client, "return a + b", token_delay_ms=0)
        edit = only_edit(await client.code_action_resolve_async(body), uri)
        assert edit.new_text == "return a + b", "the server keeps serving after a cancellation"


async def test_clients_without_resolve_get_commands_and_rewrite_needs_an_instruction_model(
    root: Path, tmp_path: Path
) -> None:
    caps = capabilities("neovim")
    assert caps.text_document is not None and caps.text_document.code_action is not None
    caps.text_document.code_action.resolve_support = None
    uri = (root / "shop" / "tools.py").as_uri()
    text = "def add(a, b):\n    pass\n"
    async with repo_session(root, tmp_path / "cache", fixed_text="return a + b", caps=caps) as client:
        open_text(client, uri, text)
        # Raw JSON: the test client's converter would read a CodeAction that carries a command as a Command.
        params = {"textDocument": {"uri": uri}, "range": {"start": {"line": 0, "character": 0},
                  "end": {"line": 1, "character": 8}}, "context": {"diagnostics": []}}  # fmt: skip
        offered = {
            a["title"].split(" for ")[0]: a for a in await raw_json(client, types.TEXT_DOCUMENT_CODE_ACTION, params)
        }
        assert "waferline: rewrite the selection as instructed…" not in offered, "a completion-only model"
        body = offered["waferline: complete this function body"]
        assert body["kind"] == "refactor.rewrite" and "data" not in body and "edit" not in body
        assert body["command"]["command"] == "waferline.applyAction"
        result = await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command=body["command"]["command"], arguments=body["command"]["arguments"])
        )
        assert result == {"applied": True}
        (edit_sent,) = client.applied_edits  # type: ignore[attr-defined]
        assert edit_sent.changes[uri][0].new_text == "return a + b"

        argument = {"textDocument": {"uri": uri}, "range": {"start": {"line": 0, "character": 0},
                                                           "end": {"line": 1, "character": 8}}}  # fmt: skip
        with pytest.raises(JsonRpcException) as info:
            await client.workspace_execute_command_async(
                types.ExecuteCommandParams(command="waferline.rewrite", arguments=[argument])
            )
        assert info.value.code == types.ErrorCodes.InvalidParams and "instruction" in info.value.message
        result = await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="waferline.rewrite", arguments=[{**argument, "instruction": "shorter"}])
        )
        assert result["applied"] is False and "instruction-following model" in result["reason"]


async def test_rewrite_with_an_instruction_following_model(root: Path, tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))
    from chat_model import save_chat_model

    model = save_chat_model(tmp_path / "chat-tiny")
    uri = (root / "shop" / "tools.py").as_uri()
    text = "def add(a, b):\n    total = a + b\n    return total\n"
    async with repo_session(root, tmp_path / "cache", {"model": str(model), "actionMaxTokens": 12}) as client:
        open_text(client, uri, text)
        await wait_indexed(client)  # the engine loads meanwhile; ask answers once it has
        assert (await raw_json(client, "waferline/ask", {"question": "what does add do?"}))["model"] == "instruction"
        start, end = position_of(text, "total ="), position_of(text, "total\n", 5)
        params = {"textDocument": {"uri": uri}, "range": {"start": {"line": 1, "character": 4},
                  "end": {"line": 2, "character": 16}}, "context": {"diagnostics": []}}  # fmt: skip
        offered = {a["title"]: a for a in await raw_json(client, types.TEXT_DOCUMENT_CODE_ACTION, params)}
        rewrite = offered["waferline: rewrite the selection as instructed…"]
        assert rewrite["command"]["command"] == "waferline.rewrite" and "edit" not in rewrite
        (argument,) = rewrite["command"]["arguments"]
        result = await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="waferline.rewrite", arguments=[{**argument, "instruction": "inline"}])
        )
        # The random weights write noise: either it parses where it goes, or the edit is refused and says why.
        if result["applied"]:
            (edit,) = client.applied_edits[0].document_changes[0].edits  # type: ignore[attr-defined]
            assert edit.range.start == start and edit.range.end == end
        else:
            assert "syntax error" in result["reason"] or "no code" in result["reason"], result
