"""The repository features over LSP on a copy of the polyglot fixture: indexing with $/progress, file watchers,
hover (cross-file definition, usages, call sites, the generated summary marked as such) and waferline/ask.

The engine is the test double (tests/support/serve_fixed.py), whose fixed text is what "the model" writes, except in
the one test that loads a tiny random-weight checkpoint with a chat template to take the instruction-following path.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
from lsp_support import as_dict, document_state
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient
from repo_support import copy_fixture, open_file, position_of, repo_session, wait_indexed

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))  # the chat checkpoint builder lives there
from chat_model import save_chat_model

pytestmark = pytest.mark.asyncio


async def hover(client: LanguageClient, uri: str, position: types.Position) -> str | None:
    params = types.HoverParams(text_document=types.TextDocumentIdentifier(uri=uri), position=position)
    result = await client.text_document_hover_async(params)
    if result is None:
        return None
    assert isinstance(result.contents, types.MarkupContent) and result.contents.kind == types.MarkupKind.Markdown
    return result.contents.value


async def ask(client: LanguageClient, params: dict[str, Any]) -> dict[str, Any]:
    result = as_dict(await client.protocol.send_request_async("waferline/ask", params))
    result["evidence"] = [_plain(e) for e in result["evidence"]]
    return result


def _plain(obj: Any) -> Any:
    if hasattr(obj, "_asdict"):
        return {k: _plain(v) for k, v in obj._asdict().items()}
    return obj


async def test_indexing_reports_progress_and_registers_file_watchers(tmp_path: Path) -> None:
    root = copy_fixture(tmp_path)
    async with repo_session(root, tmp_path / "cache", fixed_text="x") as client:
        values = await wait_indexed(client)
        assert values[0].kind == "begin" and values[0].title == "waferline"
        assert any(v.kind == "report" and v.message == "indexing 13 files" for v in values)
        assert values[-1].message.startswith("indexed 13 files")
        (reg,) = [r for r in client.registrations if r.method == types.WORKSPACE_DID_CHANGE_WATCHED_FILES]
        globs = [w["globPattern"] for w in reg.register_options["watchers"]]
        assert any(".py" in g or ",py," in g for g in globs) and "**/.gitignore" in globs
    # A restart on the unchanged folder reuses the cache: nothing to parse, same file count.
    async with repo_session(root, tmp_path / "cache", fixed_text="x") as client:
        assert (await wait_indexed(client))[-1].message.startswith("indexed 13 files")


@pytest.mark.parametrize("editor", ["vscode", "neovim"])
async def test_hover_shows_the_cross_file_definition_usages_and_call_sites(tmp_path: Path, editor: str) -> None:
    root = copy_fixture(tmp_path)
    async with repo_session(root, tmp_path / "cache", {"hoverSummary": False}, editor, fixed_text="x") as c:
        await wait_indexed(c)
        path = root / "shop" / "checkout.py"
        uri = open_file(c, path)
        text = path.read_text()
        value = await hover(c, uri, position_of(text, "apply_tax(amount)", 3))
        assert value is not None
        assert value.startswith("```python\ndef apply_tax(amount: float) -> float\n```")
        assert "Add value-added tax to an amount." in value
        pricing = (root / "shop" / "pricing.py").as_uri()
        assert f"defined at [shop/pricing.py:20]({pricing}#L20)" in value
        assert "Used 5 times in 3 files, for example:" in value
        assert f"[tests/check_pricing.py:5]({(root / 'tests' / 'check_pricing.py').as_uri()}#L5)" in value
        assert "`assert apply_tax(10.0) == 12.0`" in value
        assert "Generated" not in value, "it has a docstring"
        pricing_path = root / "shop" / "pricing.py"
        pricing_uri = open_file(c, pricing_path)
        in_docstring = position_of(pricing_path.read_text(), "baskets and tax", 2)
        assert await hover(c, pricing_uri, in_docstring) is None, "inside a docstring: no hover"


async def test_no_hover_and_no_word_for_ask_on_a_document_out_of_sync(tmp_path: Path) -> None:
    root = copy_fixture(tmp_path)
    async with repo_session(root, tmp_path / "cache", {"hoverSummary": False}, fixed_text="x") as c:
        await wait_indexed(c)
        path = root / "shop" / "checkout.py"
        uri = open_file(c, path)
        at = position_of(path.read_text(), "apply_tax(amount)", 3)
        assert await hover(c, uri, at) is not None, "in sync: the hover answers"
        params = {"question": "what does this do?", "textDocument": {"uri": uri},
                  "position": {"line": at.line, "character": at.character}}  # fmt: skip
        assert any("apply_tax" in e["title"] for e in (await ask(c, params))["evidence"]), "the word at the cursor"
        far = types.Position(line=999, character=0)  # a change that cannot apply: the text is now known to be wrong
        c.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[types.TextDocumentContentChangePartial(range=types.Range(start=far, end=far), text="x")],
        ))  # fmt: skip
        assert (await document_state(c, uri))["inSync"] is False
        assert await hover(c, uri, at) is None
        asked = await ask(c, params)  # answered, with the question alone: no word read from the wrong text
        assert asked["question"] == "what does this do?"
        assert not any("apply_tax" in e["title"] for e in asked["evidence"])


async def test_generated_summary_is_marked_and_cached(tmp_path: Path) -> None:
    root = copy_fixture(tmp_path)
    async with repo_session(root, tmp_path / "cache", fixed_text="Check out a basket of items.\nmore") as client:
        await wait_indexed(client)
        path = root / "shop" / "checkout.py"
        uri = open_file(client, path)
        at = position_of(path.read_text(), "def checkout", 4)
        first = await hover(client, uri, at)
        assert first is not None and "function `checkout`" in first, "the hover answers before the summary exists"
        value = first
        for _ in range(100):
            if "Generated summary" in value:
                break
            await asyncio.sleep(0.05)
            value = await hover(client, uri, at) or ""
        assert "*Generated summary (not from the source):* Check out a basket of items." in value
        assert "more" not in value, "one line only"


async def test_index_follows_unsaved_edits_and_watched_files(tmp_path: Path) -> None:
    root = copy_fixture(tmp_path)
    async with repo_session(root, tmp_path / "cache", {"hoverSummary": False}, fixed_text="x") as client:
        await wait_indexed(client)
        path = root / "shop" / "checkout.py"
        uri = open_file(client, path)
        text = path.read_text()
        edited = text + "\n\ndef refund(amount):\n    return -amount\n"
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=edited)],
            )
        )
        value = None
        for _ in range(100):  # the index re-reads the document once typing pauses
            value = await hover(client, uri, position_of(edited, "refund", 2))
            if value is not None:
                break
            await asyncio.sleep(0.05)
        line = edited[: edited.index("def refund")].count("\n") + 1
        assert value is not None and "def refund(amount)" in value and f"shop/checkout.py:{line}" in value

        shipping = root / "shop" / "shipping.py"
        shipping.write_text("def ship_cost(weight):\n    return weight * 2\n")
        client.workspace_did_change_watched_files(
            types.DidChangeWatchedFilesParams(
                changes=[types.FileEvent(uri=shipping.as_uri(), type=types.FileChangeType.Created)]
            )
        )
        user = root / "shop" / "user.py"
        user.write_text("from shop.shipping import ship_cost\n\nship_cost(3)\n")
        user_uri = open_file(client, user)
        for _ in range(100):
            value = await hover(client, user_uri, position_of(user.read_text(), "ship_cost(3)"))
            if value is not None and "shop/shipping.py:1" in value:
                break
            await asyncio.sleep(0.05)
        assert value is not None and "def ship_cost(weight)" in value

        shipping.unlink()
        client.workspace_did_change_watched_files(
            types.DidChangeWatchedFilesParams(
                changes=[types.FileEvent(uri=shipping.as_uri(), type=types.FileChangeType.Deleted)]
            )
        )
        for _ in range(100):
            value = await hover(client, user_uri, position_of(user.read_text(), "ship_cost(3)"))
            if value is not None and "shipping.py" not in value:
                break
            await asyncio.sleep(0.05)
        assert value is not None and "def ship_cost" not in value, "the deleted definition is gone"


async def test_ask_with_a_completion_only_model_answers_with_indexed_evidence(tmp_path: Path) -> None:
    root = copy_fixture(tmp_path)
    async with repo_session(root, tmp_path / "cache", fixed_text="x") as client:
        await wait_indexed(client)
        result = await ask(client, {"question": "What does `apply_tax` do and who calls it?"})
        assert result["model"] == "completion-only" and result["generated"] is False and result["answer"] is None
        assert "completion-only model" in result["markdown"]
        first = result["evidence"][0]
        assert first["kind"] == "definition" and first["title"] == "function apply_tax"
        assert first["uri"] == (root / "shop" / "pricing.py").as_uri() and first["range"]["start"]["line"] == 19
        assert f"[shop/pricing.py:20]({first['uri']}#L20)" in result["markdown"]
        for e in result["evidence"]:  # every location is a real line of a real file in the workspace
            path = Path(e["uri"].removeprefix("file://"))
            assert path.is_relative_to(root) and path.is_file()
            lines = path.read_text().split("\n")
            assert e["range"]["start"]["line"] < len(lines)
            if e["kind"] in ("definition", "usage"):
                assert "apply_tax" in lines[e["range"]["start"]["line"]]


async def test_ask_command_uses_the_name_under_the_cursor_and_bad_params_are_refused(tmp_path: Path) -> None:
    root = copy_fixture(tmp_path)
    async with repo_session(root, tmp_path / "cache", fixed_text="x") as client:
        await wait_indexed(client)
        path = root / "shop" / "checkout.py"
        uri = open_file(client, path)
        argument = {
            "question": "what is this?",
            "textDocument": {"uri": uri},
            "position": {"line": 4, "character": 14},  # `Basket()` in checkout
        }
        result = _plain(
            await client.workspace_execute_command_async(
                types.ExecuteCommandParams(command="waferline.ask", arguments=[argument])
            )
        )
        assert result["evidence"][0]["title"] == "class Basket"
        with pytest.raises(JsonRpcException) as info:
            await client.protocol.send_request_async("waferline/ask", {"question": 3})
        assert info.value.code == types.ErrorCodes.InvalidParams


async def test_ask_with_an_instruction_following_model_marks_and_grounds_the_answer(tmp_path: Path) -> None:
    model = save_chat_model(tmp_path / "chat-tiny")
    root = copy_fixture(tmp_path)
    options = {"model": str(model), "askMaxTokens": 8}
    async with repo_session(root, tmp_path / "cache", options) as client:
        await wait_indexed(client)
        result = await ask(client, {"question": "What does `round_cents` do?"})
        assert result["model"] == "instruction"
        assert result["generated"] is True, result["markdown"]
        assert result["markdown"].startswith("*Generated answer (written by the model from the evidence below")
        first = result["evidence"][0]
        assert first["title"] == "function round_cents"
        line = first["range"]["start"]["line"]
        assert (root / "shop" / "pricing.py").read_text().split("\n")[line].startswith("def round_cents")
        assert "**Evidence**" in result["markdown"] and f"[shop/pricing.py:{line + 1}](" in result["markdown"]
