"""What a JSON value from the client is, by JSON-RPC 2.0's and LSP's rules, decided before pygls structures it.

A JSON array is a batch (JSON-RPC 2.0, section 6): each of its values is handled as a message of its own, and the
answers to its requests go back together as one array once the last is ready (`Batch` collects them); an empty
array is one InvalidRequest, and a batch of notifications only gets nothing. `check` refuses what is not a JSON-RPC
2.0 message at all; `method_refusal` refuses a well-formed message that LSP
does not allow (a notification method sent with an id, a request method without one, a method the server does not
serve, a malformed `$/cancelRequest`). Each refusal carries the error the specs give it and whether it may be
answered: a request is answered (with id null when its id cannot be read, as JSON-RPC asks), a notification or a
response never is. WaferlineProtocol.receive (server/protocol.py) applies both, and LSP's lifecycle, in that order.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import attrs
from lsprotocol import types

INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32600, -32601, -32602


@dataclass(frozen=True)
class Refusal:
    """A message the rules refuse: the error `code` and `message`; answered (to `id`, or null) when `answer`, else
    only logged."""

    code: int
    message: str
    id: int | str | None = None
    answer: bool = True


def valid_id(value: Any) -> bool:
    """JSON-RPC ids are numbers or strings; LSP's are integers or strings (a JSON `true` is not an integer)."""
    return isinstance(value, (int, str)) and not isinstance(value, bool)


def is_response(message: dict[str, Any]) -> bool:
    return "method" not in message and ("id" in message or "result" in message or "error" in message)


def check(value: Any) -> Refusal | None:
    """The refusal JSON-RPC 2.0 prescribes for a value (not a batch) that is not a request, notification or response;
    else None."""
    if isinstance(value, list):  # a batch inside a batch: its values are not messages
        return Refusal(INVALID_REQUEST, "a batch holds messages (JSON objects), not another batch")
    if not isinstance(value, dict):
        return Refusal(INVALID_REQUEST, f"a message is a JSON object, not {type(value).__name__}")
    response = is_response(value)
    msg_id = value.get("id")
    reply_to = msg_id if valid_id(msg_id) else None
    if value.get("jsonrpc") != "2.0":
        return Refusal(INVALID_REQUEST, '"jsonrpc" must be "2.0"', reply_to, answer=not response)
    if "id" in value and not valid_id(msg_id):
        return Refusal(INVALID_REQUEST, f"an id is an integer or a string, not {msg_id!r:.40}", answer=not response)
    if response:
        if "id" not in value:
            return Refusal(INVALID_REQUEST, "a response without an id", answer=False)
        return None
    if "method" not in value:
        return Refusal(INVALID_REQUEST, "a message has a method, or it is a response with an id", reply_to)
    if not isinstance(value["method"], str):
        return Refusal(INVALID_REQUEST, f'"method" is a string, not {value["method"]!r:.40}', reply_to)
    return None


@functools.lru_cache(maxsize=512)  # a method name per message; the cache stays small whatever names arrive
def lsp_kind(method: str) -> str | None:
    """'request' or 'notification' for a method LSP defines, None for one it does not (waferline's own)."""
    message_type = types.METHOD_TO_TYPES.get(method, (None,))[0]
    if message_type is None:
        return None
    return "request" if "id" in attrs.fields_dict(message_type) else "notification"


def method_refusal(message: dict[str, Any], *, served: bool) -> Refusal | None:
    """LSP's refusal for a JSON-RPC request or notification (`check` passed) whose method is `served` or not."""
    method, msg_id = message["method"], message.get("id")
    if "id" in message:
        if not served:
            return Refusal(METHOD_NOT_FOUND, f"{method} is not a method this server serves", msg_id)
        if lsp_kind(method) == "notification":
            return Refusal(INVALID_REQUEST, f"{method} is a notification: it is sent without an id", msg_id)
        return None
    if method == types.CANCEL_REQUEST:
        params = message.get("params")
        if not isinstance(params, dict) or not valid_id(params.get("id")):
            return Refusal(INVALID_PARAMS, "$/cancelRequest needs the id (integer or string) of a request", None, False)
        return None
    if lsp_kind(method) == "request":
        return Refusal(INVALID_REQUEST, f"{method} is a request: without an id it cannot be answered", None, False)
    if not served:
        return Refusal(METHOD_NOT_FOUND, f"{method} is not a notification this server takes", answer=False)
    return None


class Batch:
    """The answers to one batch, sent as one array when every request in it is answered.

    While the batch is read (`reading`), every answer the server makes is one of its own (refusals with id null
    among them); after that, the answers to the ids it expects. Nothing is sent for a batch of notifications only.
    """

    def __init__(self) -> None:
        self.answers: list[Any] = []
        self.expected: dict[Any, int] = {}  # request id -> answers still owed (a client may repeat an id)
        self.reading = True

    def expect(self, value: Any) -> Any:
        """Note a value of the batch; its id when it is a request whose answer the batch waits for, else None."""
        if isinstance(value, dict) and "method" in value and valid_id(value.get("id")):
            self.expected[value["id"]] = self.expected.get(value["id"], 0) + 1
            return value["id"]
        return None

    def owes(self, msg_id: Any) -> bool:
        return self.reading or msg_id in self.expected

    def add(self, msg_id: Any, answer: Any) -> None:
        self.answers.append(answer)
        if (left := self.expected.get(msg_id)) is not None:
            if left > 1:
                self.expected[msg_id] = left - 1
            else:
                del self.expected[msg_id]

    def complete(self) -> bool:
        return not self.reading and not self.expected
