"""`waferline/ask` streamed over LSP (server/features/ask_stream.py), message by message through a real server.

The server is `waferline serve` with the engine's test double in its chatting form (tests/support/serve_fixed.py
`--chat`: its reply is the fixed text, one character per token, a delay each), on a copy of the polyglot fixture; the
raw client (tests/support/raw_lsp.py) sees every frame in order: the `$/progress` deltas, then the one response.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lsp_support import serve_command
from raw_lsp import RawClient
from repo_support import copy_fixture

ANSWER = "It applies the tax rate to an amount [1] and rounds it to cents; checkout calls it [2]. "
QUESTION = {"question": "What does `apply_tax` do and who calls it?"}


def start(root: Path, cache: Path, text: str, token_delay_ms: float) -> RawClient:
    client = RawClient.start([*serve_command(text, token_delay_ms), "--chat"])
    client.request("initialize", {
        "processId": None, "rootUri": root.as_uri(), "capabilities": {"window": {"workDoneProgress": True}},
        "workspaceFolders": [{"uri": root.as_uri(), "name": root.name}],
        "initializationOptions": {"waferline": {"indexCacheDir": str(cache), "askMaxTokens": 4096}},
    }, "init", timeout=120)  # fmt: skip
    client.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    deadline = time.monotonic() + 60
    while not any(is_progress(m, lambda t: str(t).startswith("waferline-index"), "end") for m in list(client.received)):
        assert time.monotonic() < deadline, "the workspace was not indexed"
        time.sleep(0.05)
    return client


def is_progress(message: Any, token: Any, kind: str | None = None) -> bool:
    if not isinstance(message, dict) or message.get("method") != "$/progress":
        return False
    params = message.get("params") or {}
    ok = token(params.get("token")) if callable(token) else params.get("token") == token
    return ok and (kind is None or (params.get("value") or {}).get("kind") == kind)


def ask(client: RawClient, msg_id: Any, token: Any = None, timeout: float = 60) -> tuple[dict, list[str], list]:
    """The response, the deltas streamed on `token` before it, and every message from the request on."""
    start = len(client.received)
    params = {**QUESTION, **({"partialResultToken": token} if token is not None else {})}
    response = client.request("waferline/ask", params, msg_id, timeout=timeout)
    after = list(client.received[start:])
    upto = after.index(response)
    deltas = [m["params"]["value"]["delta"] for m in after[:upto] if is_progress(m, token)]
    return response, deltas, after


@pytest.fixture
def served(tmp_path: Path) -> Iterator[RawClient]:
    client = start(copy_fixture(tmp_path), tmp_path / "cache", ANSWER, token_delay_ms=2)
    yield client
    client.stop()


def test_with_a_token_the_answer_is_streamed_then_answered_whole(served: RawClient) -> None:
    response, deltas, _ = ask(served, 1, "ask-1")
    result = response["result"]
    assert result["generated"] and result["answer"].startswith("It applies the tax rate"), result["markdown"]
    assert len(deltas) >= 2, deltas
    assert "".join(deltas) == result["answer"], "the deltas joined are the final answer"
    assert "[[1]](file://" in "".join(deltas), "streamed as the response has it: citations linked to the evidence"
    assert [m for m in served.responses(0) if m.get("id") == 1] == [response], "one response"
    served.request("waferline/stats", {}, "after")  # anything late would have come before this answer
    assert not [m for m in served.received if is_progress(m, "ask-1")][len(deltas) :], "nothing after the response"
    response, deltas, _ = ask(served, 2, 7)  # an integer token
    assert "".join(deltas) == response["result"]["answer"] and len(deltas) >= 2


def test_without_a_token_nothing_is_streamed(served: RawClient) -> None:
    response, _, after = ask(served, 1)
    assert response["result"]["answer"].startswith("It applies the tax rate")
    streamed = [m for m in after if is_progress(m, lambda t: not str(t).startswith("waferline-index"))]
    assert streamed == [], "no $/progress but the indexing's"


def test_a_bad_token_is_refused(served: RawClient) -> None:
    response = served.request("waferline/ask", {**QUESTION, "partialResultToken": {"id": 1}}, 1)
    assert response["error"]["code"] == -32602


def test_cancelled_mid_stream_the_model_stops_and_the_request_gets_one_error(tmp_path: Path) -> None:
    root = copy_fixture(tmp_path)
    client = start(root, tmp_path / "cache", ANSWER * 40, token_delay_ms=10)  # ~36 s if it ran to the end
    try:
        start_at = len(client.received)
        client.send({"jsonrpc": "2.0", "id": 1, "method": "waferline/ask",
                     "params": {**QUESTION, "partialResultToken": "ask"}})  # fmt: skip
        deadline = time.monotonic() + 60
        while not any(is_progress(m, "ask") for m in list(client.received[start_at:])):
            assert time.monotonic() < deadline, "no delta came"
            time.sleep(0.01)
        client.send({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 1}})
        assert client.wait_for_ids([1], start=start_at, timeout=10)
        answers = [m for m in client.responses(start_at) if m.get("id") == 1]
        assert len(answers) == 1 and answers[0]["error"]["code"] == -32800, answers  # RequestCancelled
        # The engine's one lane is free again: a completion waits behind the answer only if the model still writes.
        path = root / "shop" / "pricing.py"
        uri, text = path.as_uri(), path.read_text()
        client.send({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
            "uri": uri, "languageId": "python", "version": 1, "text": text}}})  # fmt: skip
        line = text.split("\n").index("def apply_tax(amount: float) -> float:") + 1
        position = {"line": line, "character": 4}
        done = client.request("textDocument/inlineCompletion", {"textDocument": {"uri": uri}, "position": position,
                              "context": {"triggerKind": 1}}, 2, timeout=15)  # fmt: skip
        assert "result" in done, done
        streamed = [m for m in client.received[start_at:] if is_progress(m, "ask")]
        response_at = client.received.index(answers[0])
        assert all(client.received.index(m) < response_at for m in streamed), "no delta after the error"
    finally:
        client.stop()
