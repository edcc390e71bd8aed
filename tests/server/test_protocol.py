"""WaferlineProtocol.receive in process: JSON-RPC's and LSP's rules for what a message is, the lifecycle, what is
answered (exactly once per request, never for anything else), and that notifications leave nothing behind. The
server is the real one (create_server) with the engine's test double; its writer is captured instead of stdout."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from fixed_engine import FixedEngine

from waferline.server.app import WaferlineServer
from waferline.server.handlers import create_server

URI = "file:///tmp/waferline-test/p.py"
INIT = {"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {"capabilities": {}}}
INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, NOT_INITIALIZED = -32600, -32601, -32602, -32002


class Capture:
    """Stands in for stdout: what the server writes, read back as messages."""

    def __init__(self) -> None:
        self.data = bytearray()

    def write(self, data: bytes) -> None:
        self.data += data

    def close(self) -> None:
        pass

    def take(self) -> list[dict[str, Any]]:
        """The messages written since the last call."""
        out, data = [], bytes(self.data)
        while data:
            head, _, rest = data.partition(b"\r\n\r\n")
            n = int(head.split(b"\r\n")[0].split(b": ")[1])
            out.append(json.loads(rest[:n]))
            data = rest[n:]
        self.data.clear()
        return out


class Session:
    def __init__(self) -> None:
        self.server: WaferlineServer = create_server(engine_factory=lambda options: FixedEngine("x"))
        self.out = Capture()
        self.server.protocol.set_writer(self.out)

    def send(self, msg: Any) -> list[dict[str, Any]]:
        """Receive one message; the responses it made at once (server notifications left out)."""
        self.server.protocol.receive(msg)
        return [m for m in self.out.take() if "method" not in m]

    def request(self, msg_id: Any, method: str, params: Any = None) -> list[dict[str, Any]]:
        return self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})

    def notify(self, method: str, params: Any = None) -> list[dict[str, Any]]:
        return self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def open(self, text: str = "x = 1\n") -> None:
        item = {"uri": URI, "languageId": "python", "version": 1, "text": text}
        assert self.notify("textDocument/didOpen", {"textDocument": item}) == []


@pytest.fixture
def session() -> Iterator[Session]:
    s = Session()
    yield s
    s.server.shutdown_engine()


@pytest.fixture
def ready(session: Session) -> Session:
    assert "result" in session.send(INIT)[0]
    return session


def error(answers: list[dict[str, Any]]) -> tuple[Any, int]:
    """The one answer's id and error code."""
    assert len(answers) == 1, answers
    return answers[0]["id"], answers[0]["error"]["code"]


STATS = {"jsonrpc": "2.0", "id": 3, "method": "waferline/stats", "params": {}}


@pytest.mark.parametrize(
    ("msg", "expected"),
    [
        ([], (None, INVALID_REQUEST)),  # an empty batch: one error, not an array
        ({**STATS, "id": 1.5}, (None, INVALID_REQUEST)),  # LSP's ids are integers or strings: a float is not one
        ({**STATS, "id": 3.0}, (None, INVALID_REQUEST)),
        ("a string", (None, INVALID_REQUEST)),
        ({k: v for k, v in STATS.items() if k != "jsonrpc"}, (3, INVALID_REQUEST)),  # no jsonrpc: with its id
        ({**STATS, "jsonrpc": "1.0"}, (3, INVALID_REQUEST)),
        ({**STATS, "id": {"a": 1}}, (None, INVALID_REQUEST)),  # an object, array, boolean or null id: id null
        ({**STATS, "id": [3]}, (None, INVALID_REQUEST)),
        ({**STATS, "id": True}, (None, INVALID_REQUEST)),
        ({**STATS, "id": None}, (None, INVALID_REQUEST)),
        ({**STATS, "method": 5}, (3, INVALID_REQUEST)),
        ({"jsonrpc": "2.0", "id": 3}, None),  # a response to an id never sent: ignored
        ({"jsonrpc": "2.0", "id": 3, "result": {"x": 1}}, None),
        ({"jsonrpc": "2.0", "id": 3, "error": {"code": 1, "message": "no"}}, None),
        ({"jsonrpc": "2.0", "params": {}}, (None, INVALID_REQUEST)),  # neither a request nor a response
        # an unsupported method is MethodNotFound, whatever its params
        ({"jsonrpc": "2.0", "id": 4, "method": "textDocument/definition", "params": {"x": 1}}, (4, METHOD_NOT_FOUND)),
        ({"jsonrpc": "2.0", "id": 4, "method": "no/such", "params": 7}, (4, METHOD_NOT_FOUND)),
        ({"jsonrpc": "2.0", "method": "no/such"}, None),  # an unknown notification: ignored
        ({"jsonrpc": "2.0", "method": "textDocument/hover", "params": {}}, None),  # a request without id: dropped
        ({"jsonrpc": "2.0", "id": 5, "method": "textDocument/hover", "params": {"x": 1}}, (5, INVALID_PARAMS)),
        ({"jsonrpc": "2.0", "id": 6, "method": "initialize", "params": {"capabilities": {}}}, (6, INVALID_REQUEST)),
    ],
)
def test_what_is_not_a_good_message_gets_the_specs_error_or_nothing(ready: Session, msg: Any, expected: Any) -> None:
    answers = ready.send(msg)
    assert (error(answers) if expected else answers) == (expected or [])
    assert "result" in ready.send(STATS)[0], "still serving"


def test_a_batch_is_answered_with_an_array_of_its_answers(ready: Session) -> None:
    """JSON-RPC 2.0, section 6 and its examples: one answer per request, in an array; an invalid value is an
    InvalidRequest with id null in the array; notifications get nothing, a batch of only notifications no array."""
    item = {"uri": URI, "languageId": "python", "version": 1, "text": "x = 1\n"}
    batch = [
        {**STATS, "id": "a"},
        {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": item}},
        1,
        {"foo": "boo"},
        {**STATS, "id": 1.5},
        {"jsonrpc": "2.0", "id": "b", "method": "waferline/document", "params": {"uri": URI}},
        {"jsonrpc": "2.0", "id": "c", "method": "no/such"},
        [STATS],
    ]
    (answers,) = ready.send(batch)
    assert isinstance(answers, list), answers
    by_id: dict[Any, list[Any]] = {}
    for answer in answers:
        by_id.setdefault(answer["id"], []).append(answer.get("error", {}).get("code", "result"))
    assert by_id == {
        "a": ["result"],
        "b": ["result"],  # the didOpen before it in the batch was applied first
        "c": [METHOD_NOT_FOUND],
        None: [INVALID_REQUEST] * 4,  # 1, {"foo": "boo"}, the float id, the nested array
    }
    assert ready.send([{"jsonrpc": "2.0", "method": "no/such"}, {"jsonrpc": "2.0", "method": "$/x"}]) == []


@pytest.mark.asyncio
async def test_a_batch_waits_for_its_slowest_request() -> None:
    """The answers go back together, once the asynchronous one (a hover, answered after awaits) is ready too."""
    s = Session()
    try:
        assert "result" in s.send(INIT)[0]
        s.open("def f():\n    return f\n")
        hover = {"jsonrpc": "2.0", "id": "slow", "method": "textDocument/hover",
                 "params": {"textDocument": {"uri": URI}, "position": {"line": 1, "character": 11}}}  # fmt: skip
        assert s.send([hover, {**STATS, "id": "fast"}]) == []  # nothing yet: the hover is running
        written: list[Any] = []
        for _ in range(500):
            await asyncio.sleep(0.01)
            if written := [m for m in s.out.take() if "method" not in m]:
                break
        (answers,) = written
        assert sorted(a["id"] for a in answers) == ["fast", "slow"] and all("result" in a for a in answers)
        assert error(s.request("after", "textDocument/hover", {"x": 1})) == ("after", INVALID_PARAMS), "not batched"
        assert s.server.protocol._batches == {}
    finally:
        s.server.shutdown_engine()


def test_a_notification_sent_with_an_id_is_refused_once_and_not_applied(ready: Session) -> None:
    item = {"uri": URI, "languageId": "python", "version": 1, "text": "x = 1\n"}
    assert error(ready.request(7, "textDocument/didOpen", {"textDocument": item})) == (7, INVALID_REQUEST)
    assert error(ready.request(8, "waferline/document", {"uri": URI})) == (8, INVALID_PARAMS), "not opened"
    assert error(ready.request(9, "exit")) == (9, INVALID_REQUEST), "exit with an id does not exit"


def test_before_initialize_requests_are_refused_and_notifications_dropped(session: Session) -> None:
    assert error(session.request(1, "waferline/stats", {})) == (1, NOT_INITIALIZED)
    assert error(session.request(2, "textDocument/hover", {"bad": 1})) == (2, NOT_INITIALIZED)
    session.open()
    assert "result" in session.send(INIT)[0]
    assert error(session.request(3, "waferline/document", {"uri": URI})) == (3, INVALID_PARAMS), "didOpen dropped"


def test_after_shutdown_requests_are_invalid_and_exit_ends_with_0(ready: Session) -> None:
    assert ready.request("down", "shutdown") == [{"jsonrpc": "2.0", "id": "down", "result": None}]
    assert error(ready.request(2, "waferline/stats", {})) == (2, INVALID_REQUEST)
    assert ready.notify("textDocument/didOpen", {}) == []
    with pytest.raises(SystemExit) as info:
        ready.notify("exit")
    assert info.value.code == 0


def test_exit_without_shutdown_ends_with_1(ready: Session) -> None:
    with pytest.raises(SystemExit) as info:
        ready.notify("exit")
    assert info.value.code == 1


@pytest.mark.parametrize("params", [{"id": {}}, {}, {"id": True}, {"id": [1]}, None, 5])
def test_a_malformed_cancel_is_one_warning_and_no_answer(
    ready: Session, params: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO):
        assert ready.notify("$/cancelRequest", params) == []
    assert ready.out.take() == [], "no popup (window/showMessage) either"
    assert [(r.levelname, r.exc_info) for r in caplog.records] == [("WARNING", None)]


def test_client_mistakes_are_one_warning_line_each(ready: Session, caplog: pytest.LogCaptureFixture) -> None:
    ready.open()
    mistakes = [
        {"jsonrpc": "2.0", "id": 1, "method": "textDocument/hover", "params": {"x": 1}},  # malformed params
        {"jsonrpc": "2.0", "id": 2, "method": "no/such"},  # unknown method
        {"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {"capabilities": {}}},  # lifecycle
        {"jsonrpc": "2.0", "id": 4, "method": "waferline/document", "params": {"uri": "file:///never"}},  # not open
        {"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {"contentChanges": 7}},
        {"jsonrpc": "2.0", "id": "x", "result": 1},  # a response to nothing
    ]
    for msg in mistakes:
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="waferline"):
            ready.send(msg)
        lines = [(r.levelname, r.exc_info) for r in caplog.records if r.levelno >= logging.WARNING]
        assert lines == [("WARNING", None)], (msg, caplog.text)


def test_an_internal_error_keeps_its_traceback_in_the_log_only(
    ready: Session, caplog: pytest.LogCaptureFixture
) -> None:
    @ready.server.feature("test/fail")
    def fail(ls: WaferlineServer, params: Any) -> None:
        raise RuntimeError("on purpose")

    with caplog.at_level(logging.ERROR):
        answers = ready.request(1, "test/fail", {})
    assert answers == [{"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "RuntimeError: on purpose"}}]
    assert [r.exc_info is not None for r in caplog.records] == [True]


@pytest.mark.asyncio
async def test_notifications_leave_no_future_behind() -> None:
    """pygls keeps a future per notification handled by a generator or a coroutine (did_change goes through the
    first, didChangeConfiguration the second); the table must not grow with the number of notifications."""
    s = Session()
    try:
        assert "result" in s.send(INIT)[0]
        s.open()
        table = s.server.protocol._request_futures

        async def burst(n: int) -> int:
            for version in range(n):
                change = {
                    "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
                    "text": "",
                }
                s.notify(
                    "textDocument/didChange",
                    {"textDocument": {"uri": URI, "version": version + 2}, "contentChanges": [change]},
                )
                s.notify("workspace/didChangeConfiguration", {"settings": {"waferline": {}}})
            for _ in range(5):
                await asyncio.sleep(0)  # the coroutines finish, and their entries are removed on the loop
            return len(table)

        small, large = await burst(200), await burst(2000)
        assert small == large <= 2, (small, large)
    finally:
        s.server.shutdown_engine()


@pytest.mark.asyncio
async def test_a_cancelled_command_gets_one_answer_and_leaves_nothing_unread(caplog: pytest.LogCaptureFixture) -> None:
    """workspace/executeCommand runs its command as a step of a generator: cancelling the request cancels the step
    too, and what a step ends with is read, so asyncio has no "exception was never retrieved" to report (a fuzz
    seed found the command for a document that is not open, cancelled before it ran)."""
    import gc

    s = Session()
    try:
        assert "result" in s.send(INIT)[0]
        args = [{"kind": "repair", "uri": URI, "version": 0, "start": 0, "end": 0}]  # URI is not open
        assert s.request(7, "workspace/executeCommand", {"command": "waferline.applyAction", "arguments": args}) == []
        with caplog.at_level(logging.DEBUG):
            assert error(s.notify("$/cancelRequest", {"id": 7})) == (7, -32800)  # RequestCancelled, once
            for _ in range(5):
                await asyncio.sleep(0)
            gc.collect()
            await asyncio.sleep(0)
        assert [m for m in s.out.take() if m.get("id") == 7] == []
        assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]
        assert s.server.protocol._request_futures == {}
    finally:
        s.server.shutdown_engine()
