"""`waferline serve` over stdio, driven by pytest-lsp with VS Code's and Neovim's client capabilities.

These tests start the server with the engine's test double (tests/support/serve_fixed.py: a fixed completion, one
character per token) so that what they assert does not depend on what a model writes; test_lsp_model.py runs the
real model.
"""

from __future__ import annotations

import asyncio

import pytest
from lsp_support import (
    Typist,
    as_dict,
    document_state,
    inline,
    inline_params,
    lsp_session,
    open_doc,
    set_completion,
    stats,
)
from lsprotocol import types
from pygls.exceptions import JsonRpcException

pytestmark = pytest.mark.asyncio

URI = "file:///tmp/waferline-test/calc.py"
SOURCE = "import math\n\n\ndef area(r):\n    return \n"
EDITORS = ["vscode", "neovim"]


@pytest.mark.parametrize("editor", EDITORS)
async def test_capabilities_advertised(editor: str) -> None:
    async with lsp_session(editor, fixed_text="x") as client:
        caps = client.server_result.capabilities  # type: ignore[attr-defined]
        assert caps.inline_completion_provider is not None
        assert caps.completion_provider is not None
        assert caps.execute_command_provider is not None
        assert "waferline.accept" in caps.execute_command_provider.commands
        assert caps.text_document_sync.change == types.TextDocumentSyncKind.Incremental
        # Neovim prefers utf-8 and the server takes it; VS Code offers no choice, so utf-16.
        assert caps.position_encoding == ("utf-8" if editor == "neovim" else "utf-16")


@pytest.mark.parametrize("editor", EDITORS)
async def test_type_request_accept(editor: str) -> None:
    async with lsp_session(editor, fixed_text="math.pi * r * r") as client:
        open_doc(client, URI, SOURCE)
        typist = Typist(client, URI, 4, 11)
        items = await inline(client, URI, typist.position)
        assert [i.insert_text for i in items] == ["math.pi * r * r"]
        item = items[0]
        assert item.range is not None and item.range.start == typist.position and item.range.end == typist.position
        assert item.command is not None and item.command.command == "waferline.accept"
        await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command=item.command.command, arguments=item.command.arguments)
        )
        s = await stats(client)
        assert s["requests"] == 1 and s["answered"] == 1 and s["accepted"] == 1
        assert s["prompt_tokens_total"] > 0 and s["latency_samples"] == 1


@pytest.mark.parametrize("editor", EDITORS)
async def test_typed_through_cache(editor: str) -> None:
    async with lsp_session(editor, {"precompute": False}, fixed_text="math.pi * r * r") as client:
        open_doc(client, URI, SOURCE)
        typist = Typist(client, URI, 4, 11)
        assert [i.insert_text for i in await inline(client, URI, typist.position)] == ["math.pi * r * r"]
        typist.type("math.")
        items = await inline(client, URI, typist.position)
        assert [i.insert_text for i in items] == ["pi * r * r"]
        assert items[0].range is not None and items[0].range.start == typist.position
        s = await stats(client)
        assert s["cache_answers"] == 1 and s["generations"] == 1, "the second answer came without the model"
        assert s["keystrokes"] == 5


async def test_precomputed_next_suggestion_after_accept() -> None:
    async with lsp_session("vscode", fixed_text="1, ") as client:
        open_doc(client, URI, "v = [1, ]\n")
        typist = Typist(client, URI, 0, 8)
        items = await inline(client, URI, typist.position)
        assert len(items) == 1
        shown = items[0].insert_text
        assert isinstance(shown, str) and shown.startswith("1,")
        # The server precomputes what follows an accept while the engine is idle; wait until it has.
        for _ in range(200):
            if (await stats(client))["precomputed"] >= 1:
                break
            await asyncio.sleep(0.02)
        before = await stats(client)
        assert before["precomputed"] == 1
        typist.type(shown)  # the editor applies the accepted suggestion
        items = await inline(client, URI, typist.position)
        after = await stats(client)
        assert [i.insert_text for i in items] == [shown]
        assert after["cache_answers"] == 1 and after["generations"] == before["generations"], "no model run needed"


async def test_kept_text_of_partial_and_whole_accepts_is_counted() -> None:
    """`waferline/didAcceptCompletionText`, as the clients send it for each accept of the next word, the next line
    or the whole rest of a suggestion: the kinds and the characters kept (code points) are counted, per suggestion
    answered too; params it cannot read are counted as nothing."""
    async with lsp_session("vscode", fixed_text="math.pi * r * r") as client:
        open_doc(client, URI, SOURCE)
        nothing = {"word": 0, "line": 0, "full": 0, "chars": 0, "chars_per_answer": None}
        assert as_dict((await stats(client))["kept"]) == nothing
        await inline(client, URI, types.Position(line=4, character=11))
        doc, method = {"uri": URI}, "waferline/didAcceptCompletionText"
        for kind, text in (("word", "math"), ("word", ".pi"), ("full", " * r * r"), ("line", "é\n")):
            client.protocol.notify(method, {"textDocument": doc, "kind": kind, "text": text})
        client.protocol.notify(method, {"textDocument": doc, "kind": "all", "text": "x"})
        client.protocol.notify(method, {"textDocument": doc, "kind": "word"})
        kept = as_dict((await stats(client))["kept"])
        assert kept == {"word": 2, "line": 1, "full": 1, "chars": 4 + 3 + 8 + 2, "chars_per_answer": 17.0}


@pytest.mark.parametrize("editor", EDITORS)
async def test_focus_warms_the_prompt_of_the_first_request(editor: str) -> None:
    """`waferline/didFocus` after didOpen, as the clients send it: the server prefills the prompt of a request at that
    cursor while idle, so the first request finds all of it cached; params it cannot read are one warning, no more."""
    async with lsp_session(editor, {"precompute": False}, fixed_text="math.pi * r * r") as client:
        client.protocol.notify("waferline/didFocus", {"textDocument": {"uri": URI}, "position": {"line": "4"}})
        client.protocol.notify("waferline/didFocus", {"textDocument": {}})
        open_doc(client, URI, SOURCE)
        client.protocol.notify(
            "waferline/didFocus", {"textDocument": {"uri": URI}, "position": {"line": 4, "character": 11}}
        )
        for _ in range(200):
            if (await stats(client))["warmups"] >= 1:
                break
            await asyncio.sleep(0.02)
        warmed = await stats(client)
        assert warmed["warmups"] == 1 and warmed["warmup_tokens"] > 0 and warmed["generations"] == 0
        items = await inline(client, URI, types.Position(line=4, character=11))
        assert [i.insert_text for i in items] == ["math.pi * r * r"]
        s = await stats(client)
        assert s["prompt_tokens_total"] > 0 and s["prefilled_tokens_total"] == 0, "all of it came from the warm-up"


@pytest.mark.parametrize("editor", EDITORS)
async def test_newer_request_supersedes_older(editor: str) -> None:
    options = {"typedThroughCache": False}
    async with lsp_session(editor, options, fixed_text="math.pi * r * r", token_delay_ms=40) as client:
        open_doc(client, URI, SOURCE)
        typist = Typist(client, URI, 4, 11)
        first = asyncio.ensure_future(inline(client, URI, typist.position))
        await asyncio.sleep(0.15)  # the first is decoding, slowly
        typist.type("m")
        second = await inline(client, URI, typist.position)
        assert await first == [], "the superseded request is answered, empty"
        assert [i.insert_text for i in second] == ["math.pi * r * r"], "the double ignores what was typed"
        s = await stats(client)
        assert s["cancelled"] == 1 and s["answered"] == 1 and s["requests"] == 2


@pytest.mark.parametrize("editor", EDITORS)
async def test_cancel_request(editor: str) -> None:
    async with lsp_session(editor, fixed_text="math.pi * r * r", token_delay_ms=40) as client:
        open_doc(client, URI, SOURCE)
        params = inline_params(URI, types.Position(line=4, character=11))
        future = asyncio.ensure_future(
            client.protocol.send_request_async(types.TEXT_DOCUMENT_INLINE_COMPLETION, params, msg_id=777)
        )
        await asyncio.sleep(0.1)
        client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=777))
        with pytest.raises(JsonRpcException) as info:
            await asyncio.wait_for(future, 10)
        assert info.value.code == types.LSPErrorCodes.RequestCancelled
        s = await stats(client)
        assert s["cancelled"] == 1
        # The server keeps serving after a cancellation.
        items = await inline(client, URI, types.Position(line=4, character=11))
        assert [i.insert_text for i in items] == ["math.pi * r * r"]


async def test_configuration_change_and_bad_values() -> None:
    async with lsp_session("vscode", fixed_text="math.pi * r * r") as client:
        open_doc(client, URI, SOURCE)
        pos = types.Position(line=4, character=11)
        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"waferline": {"enable": False}})
        )
        assert await inline(client, URI, pos) == []
        bad = {"waferline": {"enable": True, "maxTokens": "many", "noSuchOption": 1}}
        for _ in range(2):  # shown once, however often the client sends it
            client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=bad))
        items = await inline(client, URI, pos)
        assert [i.insert_text for i in items] == ["math.pi * r * r"], "the bad value fell back to its default"
        shown = [m.message for m in client.messages]
        assert sum("maxTokens" in m for m in shown) == 1, shown
        assert sum("noSuchOption" in m for m in shown) == 1, shown
        set_completion(client, "2 * math.pi * r")
        items = await inline(client, URI, pos)
        assert [i.insert_text for i in items] == ["2 * math.pi * r"], "a new engine: old suggestions are forgotten"
        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"waferline": {"maxTokens": 4}})
        )
        items = await inline(client, URI, pos)
        # 4 tokens give "2 * ", which does not parse after `return`: it is cut back to what does.
        assert [i.insert_text for i in items] == ["2"], "at most 4 tokens"


async def test_configuration_pulled_when_notification_is_empty() -> None:
    async with lsp_session("vscode", fixed_text="math.pi * r * r") as client:
        open_doc(client, URI, SOURCE)
        client.set_configuration({"enable": False}, section="waferline")
        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
        await asyncio.sleep(0.2)
        assert await inline(client, URI, types.Position(line=4, character=11)) == []


async def test_completion_fallback_for_clients_without_inline() -> None:
    async with lsp_session("neovim-0.11", fixed_text="math.pi * r * r") as client:
        open_doc(client, URI, SOURCE)
        result = await client.text_document_completion_async(
            types.CompletionParams(
                text_document=types.TextDocumentIdentifier(uri=URI), position=types.Position(line=4, character=11)
            )
        )
        assert isinstance(result, types.CompletionList)
        assert len(result.items) == 1
        edit = result.items[0].text_edit
        assert isinstance(edit, types.TextEdit) and edit.new_text == "math.pi * r * r"
        assert edit.range.start == types.Position(line=4, character=11)


async def test_completion_defers_to_inline_when_client_has_it() -> None:
    async with lsp_session("vscode", fixed_text="math.pi * r * r") as client:
        open_doc(client, URI, SOURCE)
        result = await client.text_document_completion_async(
            types.CompletionParams(
                text_document=types.TextDocumentIdentifier(uri=URI), position=types.Position(line=4, character=11)
            )
        )
        assert isinstance(result, types.CompletionList) and list(result.items) == []
        assert (await stats(client))["requests"] == 0


async def test_range_covers_auto_closed_bracket() -> None:
    async with lsp_session("vscode", fixed_text="r, 2)") as client:
        open_doc(client, URI, "import math\n\n\ndef area(r):\n    return math.pow()\n")
        items = await inline(client, URI, types.Position(line=4, character=20))
        assert len(items) == 1
        item = items[0]
        assert item.insert_text == "r, 2)"
        assert item.range == types.Range(
            start=types.Position(line=4, character=20), end=types.Position(line=4, character=21)
        ), "the suggestion's own ')' replaces the one the editor auto-closed"
        state = await document_state(client, URI)
        assert state["length"] == len("import math\n\n\ndef area(r):\n    return math.pow()\n")


@pytest.mark.parametrize("editor", [*EDITORS, "utf32-client"])
async def test_positions_in_the_negotiated_encoding(editor: str) -> None:
    encoding = {"neovim": "utf-8", "utf32-client": "utf-32"}.get(editor, "utf-16")
    async with lsp_session(editor, fixed_text="name)") as client:
        prefix = 'def greet(name):\n    return "👋 héllo, " + str('
        open_doc(client, URI, prefix + ")\n")
        typist = Typist(client, URI, 0, 0, encoding)
        typist.line, typist.character = 1, typist.units(prefix.split("\n")[1])
        items = await inline(client, URI, typist.position)
        assert [i.insert_text for i in items] == ["name)"]
        rng = items[0].range
        assert rng is not None and rng.start == typist.position
        assert rng.end == types.Position(line=1, character=typist.character + 1)
        typist.type("na")  # typed through: the rest, at a position counted in the same units
        items = await inline(client, URI, typist.position)
        assert [i.insert_text for i in items] == ["me)"]
        state = await document_state(client, URI, include_text=True)
        assert state["text"] == prefix + "na)\n" and state["encoding"] == encoding
