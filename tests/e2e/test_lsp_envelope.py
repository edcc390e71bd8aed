"""JSON-RPC and LSP mistakes over a real process's stdio: one answer per request id and none for anything else, the
lifecycle's exit codes, and a log of one warning line per mistake. (Each rule on its own, in process:
tests/server/test_protocol.py.)"""

from __future__ import annotations

import json
from collections import Counter

from raw_support import INIT, frame, raw_session, request

DOC = {"uri": "file:///tmp/waferline-test/e.py", "languageId": "python", "version": 1, "text": "x = 1\n"}


def test_exit_without_shutdown_is_code_1() -> None:
    with raw_session() as server:
        server.send({"jsonrpc": "2.0", "method": "exit"})
        assert server.wait() == 1


def test_the_end_of_input_without_shutdown_is_code_1() -> None:
    with raw_session() as server:
        assert server.proc.stdin is not None
        server.proc.stdin.close()
        assert server.wait() == 1


def test_a_hostile_session_gets_one_answer_per_request_and_a_quiet_log() -> None:
    """Every kind of envelope and lifecycle mistake, with good requests between them, in one burst."""
    mistakes: list[bytes] = [
        frame([request("batch-1"), request("batch-2"), {"jsonrpc": "2.0", "method": "no/such"}, 5]),
        frame([]),
        frame({**request(None), "id": 1.5}),
        frame({"id": "no-jsonrpc", "method": "waferline/stats"}),
        frame({**request("v1"), "jsonrpc": "1.0"}),
        frame({**request(None), "id": {"object": 1}}),
        frame({**request(None), "id": False}),
        frame({**request("method-5"), "method": 5}),
        frame({**INIT, "id": "init-again"}),
        frame(request("didopen-with-id", "textDocument/didOpen", {"textDocument": DOC})),
        frame(request("unsupported", "textDocument/definition", {"nonsense": True})),
        frame(request("bad-params", "textDocument/hover", {"position": {"line": "x"}})),
        frame({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": {}}}),
        frame({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {}}),
        frame({"jsonrpc": "2.0", "id": "never-sent", "result": {"x": 1}}),
        frame({"jsonrpc": "2.0", "method": "textDocument/hover", "params": {}}),
        frame({"jsonrpc": "2.0", "method": "no/such/notification"}),
        frame(request("too-short"), length=12),
        b"garbage\r\n",
    ]
    expected = {  # id: the error code, or None for a result
        "no-jsonrpc": -32600, "v1": -32600, "method-5": -32600, "init-again": -32600, "didopen-with-id": -32600,
        "unsupported": -32601, "bad-params": -32602, "too-short": None,
    }  # fmt: skip
    with raw_session() as server:
        data = b""
        for i, mistake in enumerate(mistakes):
            data += mistake + frame(request(f"good-{i}"))
            expected[f"good-{i}"] = None
        server.write(data)
        assert server.finish()[1] == 0
    arrays = [m for m in server.sent if isinstance(m, list)]
    assert [sorted(json.dumps(a["id"]) for a in array) for array in arrays] == [['"batch-1"', '"batch-2"', "null"]]
    answers = [a for m in server.sent for a in (m if isinstance(m, list) else [m]) if "method" not in a]
    expected.update({"batch-1": None, "batch-2": None})
    counts = Counter(json.dumps(a["id"]) for a in answers)
    assert counts.pop("null") == 5, "the batch's 5, the empty batch and the three unreadable ids: id null"
    assert counts.pop('"init"') == counts.pop('"bye"') == 1
    assert counts == Counter(json.dumps(k) for k in expected), "exactly one answer per request id, none for others"
    by_id = {a["id"]: a for a in answers}
    for msg_id, code in expected.items():
        assert (by_id[msg_id]["error"]["code"] if code else by_id[msg_id]["result"]) is not None, msg_id
    wire = json.dumps(server.sent)
    assert "Traceback" not in wire and 'File \\"' not in wire
    assert "Traceback" not in server.stderr and " ERROR " not in server.stderr, server.stderr[-3000:]
    popups = [m for m in server.sent if isinstance(m, dict) and m.get("method") == "window/showMessage"]
    assert not popups, "no popup for a client mistake"
