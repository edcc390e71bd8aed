"""The JSON-RPC side of the server: pygls' LSP protocol with waferline's changes (server/app.py holds the state)."""

from __future__ import annotations

import logging
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import attrs
from lsprotocol import types
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInternalError,
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
    JsonRpcServerNotInitialized,
)
from pygls.protocol import LanguageServerProtocol, lsp_method

log = logging.getLogger(__name__)


class WaferlineProtocol(LanguageServerProtocol):
    """pygls' protocol with two changes: our documents are the only copy of the text, and a request whose params
    cannot be read is answered with an InvalidParams error (pygls would log it and leave the request hanging)."""

    _initialize_seen = False  # an `initialize` request has arrived: before it, other requests are refused

    @lsp_method(types.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(self, params: types.DidOpenTextDocumentParams) -> Generator[Any, Any, None]:
        if (handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_OPEN)) is not None:
            yield handler, (params,), None

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: types.DidChangeTextDocumentParams) -> Generator[Any, Any, None]:
        if (handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_CHANGE)) is not None:
            yield handler, (params,), None

    @lsp_method(types.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: types.DidCloseTextDocumentParams) -> Generator[Any, Any, None]:
        if (handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_CLOSE)) is not None:
            yield handler, (params,), None

    def structure_message(self, data: dict[str, Any]) -> Any:
        # json.loads calls this for every object in a message, innermost first, so an object inside `params` that
        # looks like a message passes through here too: a failure is only marked, and answered (below) when the
        # marked object turns out to be the whole message, never for an id the client did not send as a request.
        try:
            return super().structure_message(data)
        except JsonRpcException:
            return Unreadable(data.get("id"), data.get("method"))

    def _send_response(self, msg_id: Any, result: Any = None, error: Any = None) -> None:
        # pygls puts the Python traceback of an internal error in `error.data`: file paths and code are the server's
        # business, not the client's. The traceback goes to the server's log; the client gets the message alone.
        if error is not None and getattr(error, "data", None) is not None and error.code == JsonRpcInternalError.CODE:
            log.error("internal error answering %r: %s\n%s", msg_id, error.message, "".join(_traceback_of(error)))
            error = attrs.evolve(error, data=None)
        super()._send_response(msg_id, result=result, error=error)

    def handle_message(self, message: Any) -> None:
        if not isinstance(message, Unreadable):
            if (refusal := self._lifecycle_refusal(message)) is not None:
                self._send_response(message.id, error=refusal.to_response_error())
                return
            super().handle_message(message)
        elif message.id is not None and message.method is not None:
            error = JsonRpcInvalidParams(f"malformed params for {message.method}: they do not match the LSP types")
            self._send_response(message.id, error=error.to_response_error())
        else:
            log.warning("dropped a malformed %s notification", message.method)

    def _lifecycle_refusal(self, message: Any) -> JsonRpcException | None:
        """The error LSP's lifecycle prescribes for a request at the wrong time, or None to handle it: before
        `initialize` a request is ServerNotInitialized (-32002), after `shutdown` InvalidRequest (-32600)."""
        method, msg_id = getattr(message, "method", None), getattr(message, "id", None)
        if method == types.INITIALIZE:
            self._initialize_seen = True
        if msg_id is None or method is None or method in (types.INITIALIZE, types.EXIT):
            return None  # notifications and responses go their usual way (pygls drops them when shutting down)
        if self._shutdown:
            return JsonRpcInvalidRequest(f"{method} after shutdown: the server takes no more requests")
        if not self._initialize_seen:
            return JsonRpcServerNotInitialized(f"{method} before initialize")
        return None


def _traceback_of(error: Any) -> list[str]:
    data = error.data
    lines = data.get("traceback") if isinstance(data, dict) else None
    return [str(x) for x in lines] if isinstance(lines, list) else [repr(data)]


@dataclass(frozen=True)
class Unreadable:
    """A message (or an object inside one) whose params do not match the LSP types."""

    id: Any
    method: Any
