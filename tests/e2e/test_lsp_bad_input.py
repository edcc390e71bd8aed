"""Bad input from an editor: each gets a clear LSP error or an empty result, the server keeps serving, and no
document's text is lost or corrupted (checked through `waferline/document`, which reports the server's copy)."""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

import pytest
from lsp_support import (
    Typist,
    document_state,
    inline,
    inline_params,
    lsp_session,
    open_doc,
    raw_notify,
    raw_request,
    stats,
)  # fmt: skip
from lsprotocol import types
from pygls.exceptions import JsonRpcException

pytestmark = pytest.mark.asyncio

URI = "file:///tmp/waferline-test/calc.py"
SOURCE = "import math\n\n\ndef area(r):\n    return \n"
FIXED = "math.pi * r * r"  # what the engine's test double writes (tests/support/serve_fixed.py)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def change(uri: str, version: int, start: tuple[int, int], end: tuple[int, int], text: str):
    rng = types.Range(
        start=types.Position(line=start[0], character=start[1]), end=types.Position(line=end[0], character=end[1])
    )
    return types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[types.TextDocumentContentChangePartial(range=rng, text=text)],
    )


async def assert_still_serving(client, uri: str = URI, position=(4, 11)) -> None:
    items = await inline(client, uri, types.Position(line=position[0], character=position[1]))
    assert [i.insert_text for i in items] == ["math.pi * r * r"]


async def test_edit_outside_document_puts_it_out_of_sync_until_the_whole_text_comes() -> None:
    async with lsp_session("vscode", fixed_text=FIXED) as client:
        open_doc(client, URI, SOURCE)
        client.text_document_did_change(change(URI, 2, (40, 0), (41, 0), "oops"))
        client.text_document_did_change(change(URI, 3, (0, 0), (0, 0), "# later\n"))  # against a text it lacks
        state = await document_state(client, URI)
        assert state["sha256"] == sha(SOURCE) and state["version"] == 3 and state["inSync"] is False
        assert "could not apply" in state["syncProblem"]
        assert any("out of sync" in m.message for m in client.messages)
        assert await inline(client, URI, types.Position(line=4, character=11)) == []  # never against a wrong text
        whole = types.TextDocumentContentChangeWholeDocument(text=SOURCE)
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=URI, version=4), content_changes=[whole]
        ))  # fmt: skip
        state = await document_state(client, URI)
        assert state["inSync"] is True and state["version"] == 4 and state["syncProblem"] is None
        await assert_still_serving(client)
        counts = await stats(client)
        assert (counts["desyncs"], counts["resyncs"], counts["changes_dropped"]) == (1, 1, 2)
        assert counts["out_of_sync_answers"] == 1


async def test_positions_past_line_end_and_inside_surrogate_pair() -> None:
    text = "s = '😀'\n"
    async with lsp_session("vscode", fixed_text=FIXED) as client:  # utf-16: 😀 is two code units at characters 5 and 6
        open_doc(client, URI, text)
        client.text_document_did_change(change(URI, 2, (0, 6), (0, 6), "x"))  # inside the pair: snaps before it
        client.text_document_did_change(change(URI, 3, (0, 99), (0, 99), "!"))  # past the end: the line's end
        state = await document_state(client, URI, include_text=True)
        assert state["text"] == "s = 'x😀'!\n"
        items = await inline(client, URI, types.Position(line=0, character=500))
        assert isinstance(items, list)  # answered (past the line end means the line end)


async def test_unknown_language_completes_as_plain_text() -> None:
    async with lsp_session("vscode", fixed_text="world") as client:
        uri = "file:///tmp/waferline-test/notes.xyz"
        open_doc(client, uri, "hello \n", language_id="klingon")
        items = await inline(client, uri, types.Position(line=0, character=6))
        assert [i.insert_text for i in items] == ["world"]
        state = await document_state(client, uri)
        assert state["plainText"] is not None


async def test_binary_document_gets_empty_result() -> None:
    async with lsp_session("vscode", fixed_text=FIXED) as client:
        uri = "file:///tmp/waferline-test/blob.bin"
        text = "\x00\x01\x02ELF\x00" * 100
        open_doc(client, uri, text, language_id="plaintext")
        assert await inline(client, uri, types.Position(line=0, character=3)) == []
        assert (await document_state(client, uri))["sha256"] == sha(text)


async def test_huge_document_kept_but_not_completed() -> None:
    big = ("x = 1\n" * (50 * 1024 * 1024 // 6 + 1))[: 50 * 1024 * 1024]  # 50 MB
    async with lsp_session("vscode", fixed_text=FIXED) as client:
        uri = "file:///tmp/waferline-test/huge.py"
        open_doc(client, uri, big)
        Typist(client, uri, 0, 0).type("y")
        assert await asyncio.wait_for(inline(client, uri, types.Position(line=0, character=1)), 60) == []
        state = await document_state(client, uri)
        assert state["length"] == len(big) + 1 and state["sha256"] == sha("y" + big)
        open_doc(client, URI, SOURCE)
        await assert_still_serving(client)


async def test_request_for_document_never_opened() -> None:
    async with lsp_session("vscode", fixed_text=FIXED) as client:
        with pytest.raises(JsonRpcException) as info:
            await inline(client, "file:///nowhere.py", types.Position(line=0, character=0))
        assert info.value.code == types.ErrorCodes.InvalidParams
        assert "not open" in info.value.message
        open_doc(client, URI, SOURCE)
        await assert_still_serving(client)


async def test_position_past_last_line_is_an_error() -> None:
    async with lsp_session("vscode", fixed_text=FIXED) as client:
        open_doc(client, URI, SOURCE)
        with pytest.raises(JsonRpcException) as info:
            await inline(client, URI, types.Position(line=99, character=0))
        assert info.value.code == types.ErrorCodes.InvalidParams
        await assert_still_serving(client)


async def test_malformed_params_are_answered_with_an_error() -> None:
    async with lsp_session("vscode", fixed_text=FIXED) as client:
        open_doc(client, URI, SOURCE)
        bad = {"textDocument": {"uri": URI}, "position": {"line": "four"}, "context": {"triggerKind": 1}}
        with pytest.raises(JsonRpcException) as info:
            await raw_request(client, types.TEXT_DOCUMENT_INLINE_COMPLETION, bad)
        assert info.value.code == types.ErrorCodes.InvalidParams
        raw_notify(client, types.TEXT_DOCUMENT_DID_CHANGE, {"textDocument": {"uri": URI}, "contentChanges": 7})
        with pytest.raises(JsonRpcException):
            await asyncio.wait_for(client.protocol.send_request_async("waferline/document", {"nope": 1}), 10)
        assert (await document_state(client, URI))["sha256"] == sha(SOURCE)
        await assert_still_serving(client)
        params = inline_params(URI, types.Position(line=4, character=11))
        assert await client.text_document_inline_completion_async(params) is not None


async def test_did_change_for_unopened_document_and_double_open() -> None:
    async with lsp_session("vscode", fixed_text=FIXED) as client:
        client.text_document_did_change(change("file:///never.py", 2, (0, 0), (0, 0), "x"))
        open_doc(client, URI, "stale\n")
        open_doc(client, URI, SOURCE)  # opened again: the new text wins
        assert (await document_state(client, URI))["sha256"] == sha(SOURCE)
        await assert_still_serving(client)


async def test_request_after_close_is_an_error_and_reopen_works() -> None:
    async with lsp_session("neovim", fixed_text=FIXED) as client:
        open_doc(client, URI, SOURCE)
        await assert_still_serving(client)
        client.text_document_did_close(
            types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=URI))
        )
        with pytest.raises(JsonRpcException) as info:
            await inline(client, URI, types.Position(line=4, character=11))
        assert info.value.code == types.ErrorCodes.InvalidParams
        open_doc(client, URI, SOURCE)
        await assert_still_serving(client)


async def test_model_that_cannot_load_is_reported_and_requests_answered() -> None:
    async with lsp_session("vscode", {"model": "/no/such/model-dir"}, fixed_text=FIXED) as client:
        open_doc(client, URI, SOURCE)
        assert await inline(client, URI, types.Position(line=4, character=11)) == []
        shown = [m.message for m in client.messages]
        assert any("could not load the model" in m and "/no/such/model-dir" in m for m in shown), shown
        state = await stats(client)
        assert state["engine"].startswith("failed to load")
        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"waferline": {"model": None}})
        )
        await assert_still_serving(client)


async def test_a_change_without_content_changes_still_moves_the_version() -> None:
    async with lsp_session("vscode", fixed_text=FIXED) as client:
        open_doc(client, URI, SOURCE)
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=URI, version=2), content_changes=[]
            )
        )
        state = await document_state(client, URI)
        assert state["version"] == 2 and state["sha256"] == sha(SOURCE)
        await assert_still_serving(client)


async def test_shown_ranges_lie_inside_the_document() -> None:
    """A cursor past a line's end, or at (line_count, 0), is answered with a range at the point the server used."""
    text = "def f(x):\n    return "
    async with lsp_session("vscode", fixed_text="x + 1") as client:
        open_doc(client, URI, text)
        for position, start in (((1, 40), (1, 11)), ((2, 0), (1, 11)), ((1, 11), (1, 11))):
            items = await inline(client, URI, types.Position(line=position[0], character=position[1]))
            assert [i.insert_text for i in items] == ["x + 1"], position
            rng = items[0].range
            assert rng is not None and (rng.start.line, rng.start.character) == start, position
            assert (rng.end.line, rng.end.character) == start, position


@pytest.mark.parametrize(
    "start", [{"line": -1, "character": 0}, {"line": 1.5, "character": 0}, {"line": 0}, {"line": True, "character": 0}]
)
async def test_a_code_action_with_a_bad_range_is_invalid_params(start: dict) -> None:
    async with lsp_session("vscode", fixed_text=FIXED) as client:
        open_doc(client, URI, SOURCE)
        action = {"title": "x", "data": {"textDocument": {"uri": URI}, "range": {"start": start, "end": start}}}
        with pytest.raises(JsonRpcException) as info:
            await raw_request(client, types.CODE_ACTION_RESOLVE, action)
        assert info.value.code == types.ErrorCodes.InvalidParams, info.value
        await assert_still_serving(client)


async def test_a_message_inside_params_is_not_answered_as_a_request() -> None:
    """Only the message itself is answered: a hover whose params hold a message-shaped object with another id gets
    its one answer, and nothing is sent for the inner id."""
    from concurrent.futures import Future

    async with lsp_session("vscode", fixed_text=FIXED) as client:
        open_doc(client, URI, SOURCE)
        inner: Future[Any] = Future()
        client.protocol._request_futures[424242] = inner
        client.protocol._request_futures["424242"] = inner
        nested = {"jsonrpc": "2.0", "id": 424242, "method": "textDocument/hover", "params": {"nonsense": 1}}
        params = {"textDocument": {"uri": URI}, "position": {"line": 0, "character": 0}, "extra": nested}
        try:
            await raw_request(client, types.TEXT_DOCUMENT_HOVER, params, msg_id="outer-1")
        except JsonRpcException as e:
            assert e.code == types.ErrorCodes.InvalidParams  # answered once, for its own id, either way
        await asyncio.sleep(0.5)
        assert not inner.done(), "a response was sent for an id the client never used for a request"
        await assert_still_serving(client)


async def test_an_internal_error_carries_no_traceback() -> None:
    async with lsp_session("vscode", fixed_text=FIXED) as client:
        with pytest.raises(JsonRpcException) as info:
            await raw_request(client, "waferlineTest/fail", {})
        assert info.value.code == types.ErrorCodes.InternalError
        assert "on purpose" in info.value.message  # what went wrong, in one line
        assert info.value.data is None, "the server's traceback (paths, code) must stay in its log"
        open_doc(client, URI, SOURCE)
        await assert_still_serving(client)


async def test_a_change_with_a_part_that_cannot_apply_leaves_the_ones_before_it_and_the_document_out_of_sync() -> None:
    """Found by the fuzzer: the changes before the refused one stayed applied, at the old version; then the whole
    notification was refused (text and version as before it), which the issue's own fuzzer read as a change lost
    (issue 29). The one rule now: in order up to the change that cannot apply, the notification's version, and the
    document out of sync (no completion) until the whole text comes."""
    async with lsp_session("vscode", fixed_text=FIXED) as client:
        open_doc(client, URI, SOURCE)
        good = types.TextDocumentContentChangePartial(
            range=types.Range(start=types.Position(line=0, character=0), end=types.Position(line=0, character=0)),
            text="# x\n",
        )
        bad = types.TextDocumentContentChangePartial(
            range=types.Range(start=types.Position(line=40, character=1), end=types.Position(line=40, character=1)),
            text="lost",
        )
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=URI, version=2), content_changes=[good, bad]
            )
        )
        state = await document_state(client, URI)
        assert state["sha256"] == sha("# x\n" + SOURCE) and state["version"] == 2 and state["inSync"] is False
        assert await inline(client, URI, types.Position(line=5, character=11)) == []
        open_doc(client, URI, SOURCE)  # reopened: in sync again
        assert (await document_state(client, URI))["inSync"] is True
        await assert_still_serving(client)


@pytest.mark.parametrize("character", [1.5, "3", True])
async def test_a_position_that_is_not_an_integer_is_invalid_params(character: Any) -> None:
    """Found by the fuzzer: 1.5 was read as 1, "3" as 3 and true as 1."""
    async with lsp_session("vscode", fixed_text=FIXED) as client:
        open_doc(client, URI, SOURCE)
        bad = {
            "textDocument": {"uri": URI},
            "position": {"line": 4, "character": character},
            "context": {"triggerKind": 1},
        }
        with pytest.raises(JsonRpcException) as info:
            await raw_request(client, types.TEXT_DOCUMENT_INLINE_COMPLETION, bad)
        assert info.value.code == types.ErrorCodes.InvalidParams
        await assert_still_serving(client)


async def test_completion_checks_its_params_before_deferring_to_inline() -> None:
    """Found by the fuzzer: a client with inline completion got an empty list for a document it never opened."""
    async with lsp_session("vscode", fixed_text=FIXED) as client:
        params = types.CompletionParams(
            text_document=types.TextDocumentIdentifier(uri="file:///nowhere.py"),
            position=types.Position(line=0, character=0),
        )
        with pytest.raises(JsonRpcException) as info:
            await client.text_document_completion_async(params)
        assert info.value.code == types.ErrorCodes.InvalidParams


@pytest.mark.parametrize(
    "method, params",
    [
        ("waferline/ask", {"question": "what?", "textDocument": {"uri": URI}, "position": {"line": -1,
                                                                                            "character": 0}}),
        (types.CODE_ACTION_RESOLVE, {"title": "t", "data": {"kind": "repair", "uri": URI, "version": 1, "start": -5,
                                                             "end": 10**12}}),
        (types.CODE_ACTION_RESOLVE, {"title": "t", "data": {"kind": "repair", "uri": URI, "version": 1, "start": 9,
                                                             "end": 2}}),
        (types.CODE_ACTION_RESOLVE, {"title": "t", "data": {"kind": "repair", "uri": URI, "version": "1", "start": 0,
                                                             "end": 0}}),
    ],
)  # fmt: skip
async def test_free_form_params_are_checked_like_typed_ones(method: str, params: dict) -> None:
    """A negative line in waferline/ask was an internal error; offsets outside the document in an action's data
    reached tree-sitter."""
    async with lsp_session("vscode", fixed_text=FIXED) as client:
        open_doc(client, URI, SOURCE)
        with pytest.raises(JsonRpcException) as info:
            await raw_request(client, method, params)
        assert info.value.code == types.ErrorCodes.InvalidParams, info.value
        await assert_still_serving(client)


async def test_no_code_action_for_a_document_out_of_sync() -> None:
    """A code action's edit is computed on the server's text and carries the client's version, which the server
    takes even when a change could not apply: offered on a text known to be wrong, the editor would apply it."""
    broken = "function f(x) {\n  return g(x;\n}\n"
    uri = "file:///tmp/waferline-test/broken.js"
    async with lsp_session("vscode", fixed_text=FIXED) as client:
        client.text_document_did_open(types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="javascript", version=1, text=broken)
        ))  # fmt: skip

        async def titles() -> list[str]:
            at = types.Position(line=1, character=4)
            params = types.CodeActionParams(text_document=types.TextDocumentIdentifier(uri=uri),
                                            range=types.Range(start=at, end=at),
                                            context=types.CodeActionContext(diagnostics=[]))  # fmt: skip
            return [a.title for a in await client.text_document_code_action_async(params) or []]

        assert any("repair" in t for t in await titles()), "offered while in sync"
        client.text_document_did_change(change(uri, 2, (9, 1), (9, 1), "lost"))
        assert (await document_state(client, uri))["inSync"] is False
        assert await titles() == []
