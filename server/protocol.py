"""The JSON-RPC side of the server: pygls' LSP protocol with waferline's changes (server/app.py holds the state).

Every message the transport reads (server/transport.py) enters through `WaferlineProtocol.receive`, which checks it
against JSON-RPC 2.0 and LSP (server/envelope.py) and LSP's lifecycle before pygls structures and dispatches it, so
that each request gets exactly one answer with the error the specs give its mistake, and nothing else is answered
(a batch's values each in turn, their answers sent back together as one array: `_receive_batch`).
The rest changes pygls where it would leak or mislead: no future is kept per notification, only responses to
requests the server sent are taken, client mistakes are logged as one warning line (never a traceback), and an
internal error reaches the client as its message alone, its traceback going to the server's log.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import re
from collections.abc import Generator
from concurrent.futures import Future
from dataclasses import dataclass
from functools import partial
from typing import Any

import attrs
import cattrs
from lsprotocol import types
from pygls.exceptions import (
    FeatureNotificationError,
    JsonRpcException,
    JsonRpcInternalError,
    JsonRpcInvalidParams,
    JsonRpcRequestCancelled,
)
from pygls.protocol import (
    JsonRPCNotification,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
    LanguageServerProtocol,
    lsp_method,
)

from waferline.server import envelope
from waferline.server.envelope import INVALID_REQUEST, Batch, Refusal

log = logging.getLogger(__name__)

SERVER_NOT_INITIALIZED = -32002
_SNAKE = re.compile(r"_([a-z])")


class WaferlineProtocol(LanguageServerProtocol):
    """pygls' protocol with our documents as the only copy of the text, and every message checked on the way in."""

    _initialize_seen = False  # an `initialize` request has been taken: before it, other messages are refused

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._batches: dict[Any, Batch] = {}  # request id -> the batch its answer goes back in
        self._reading: Batch | None = None  # the batch whose values are being handled now

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

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams) -> Generator[Any, Any, types.InitializeResult]:
        # pygls' own, with the server's `experimental` capabilities (the next-edit request) added to its result.
        result = yield from super().lsp_initialize(params)
        experimental = getattr(self._server, "experimental_capabilities", None)
        if experimental:
            result.capabilities.experimental = dict(experimental)
        return result

    @lsp_method(types.SHUTDOWN)
    def lsp_shutdown(self, *args: Any) -> Generator[Any, Any, None]:
        # pygls' own, but cancelling over a copy: a cancelled future's callbacks may remove it from the table.
        if (handler := self.fm.features.get(types.SHUTDOWN)) is not None:
            yield handler, args, None
        current = self.msg_id
        for msg_id, future in list(self._request_futures.items()):
            if msg_id != current and not future.done():
                future.cancel()
        self._shutdown = True

    # -- in: every message from the transport ---------------------------------------------------------------------
    def receive(self, value: Any) -> None:
        """Handle one message, or a batch of them (a JSON array), as JSON decoded it (server/framing.py)."""
        if isinstance(value, list):
            self._receive_batch(value)
        else:
            self._receive_message(value)

    def _receive_batch(self, values: list[Any]) -> None:
        """JSON-RPC 2.0's batch: each value handled as a message, the answers to its requests sent as one array when
        the last is ready (nothing when it holds only notifications); an empty batch is one InvalidRequest."""
        if not values:
            self._refuse(Refusal(INVALID_REQUEST, "an empty batch: a batch holds at least one message"), values)
            return
        batch = Batch()
        self._reading = batch
        try:
            for value in values:
                if (msg_id := batch.expect(value)) is not None:
                    self._batches[msg_id] = batch
                self._receive_message(value)
        finally:
            self._reading = None
            batch.reading = False
        self._send_batch_if_complete(batch)

    def _send_batch_if_complete(self, batch: Batch) -> None:
        if batch.complete() and batch.answers:
            self._send_data(batch.answers)

    def _receive_message(self, value: Any) -> None:
        refusal = envelope.check(value)
        if refusal is None and envelope.is_response(value):
            self._receive_response(value)
            return
        if refusal is None:
            refusal = self._lifecycle_refusal(value)
        if refusal is None:
            refusal = envelope.method_refusal(value, served=self._serves(value["method"]))
        if refusal is not None:
            self._refuse(refusal, value)
            return
        message = self.structure_message(value)
        if value["method"] == types.INITIALIZE and not isinstance(message, Unreadable):
            self._initialize_seen = True
        if isinstance(message, Unreadable):
            self.handle_message(message)
            return
        # pygls' handle_message, for a request or notification whose kind the envelope settled: it would find the
        # kind by isinstance against typing Protocols: ~20 µs each, two for a notification (timeit, 2026-12-02)
        ctx = contextvars.copy_context()
        if "id" in value:
            ctx.run(self._handle_request, message.id, message.method, message.params)
        else:
            ctx.run(self._handle_notification, message.method, message.params)

    def refuse(self, code: int, message: str) -> None:
        """Answer what the transport could not read as a message: an error with id null (JSON-RPC's rule)."""
        self._send_response(None, error=types.ResponseError(code=code, message=message))

    def _serves(self, method: str) -> bool:
        return method in self.fm.features or method in self.fm.builtin_features or method == types.CANCEL_REQUEST

    def _lifecycle_refusal(self, message: dict[str, Any]) -> Refusal | None:
        """LSP's lifecycle: before `initialize` a request is ServerNotInitialized (-32002) and a notification
        dropped, `initialize` is taken once, and after `shutdown` a request is InvalidRequest (-32600); `exit` is
        always taken."""
        method, msg_id, is_request = message["method"], message.get("id"), "id" in message
        if method == types.EXIT:
            return None
        if self._shutdown:
            return Refusal(INVALID_REQUEST, f"{method} after shutdown: the server takes no more", msg_id, is_request)
        if method == types.INITIALIZE and self._initialize_seen:
            return Refusal(INVALID_REQUEST, "initialize was sent already", msg_id, is_request)
        if method != types.INITIALIZE and not self._initialize_seen:
            return Refusal(SERVER_NOT_INITIALIZED, f"{method} before initialize", msg_id, is_request)
        return None

    def _refuse(self, refusal: Refusal, value: Any) -> None:
        method = value.get("method") if isinstance(value, dict) else None
        if not refusal.answer:
            # LSP lets a server ignore notifications it does not know when they start with "$/"
            quiet = isinstance(method, str) and method.startswith("$/") and refusal.code == envelope.METHOD_NOT_FOUND
            log.log(logging.INFO if quiet else logging.WARNING, "ignored: %s", refusal.message)
            return
        log.warning("answered %d to %r: %s", refusal.code, refusal.id, refusal.message)
        self._send_response(refusal.id, error=types.ResponseError(code=refusal.code, message=refusal.message))

    def _receive_response(self, value: dict[str, Any]) -> None:
        msg_id = value["id"]
        if msg_id not in self._result_types:  # the ids of requests the server sent and that are not answered yet
            log.warning("ignored a response to %r: the server sent no request with that id", msg_id)
            return
        message = self.structure_message(value)
        if isinstance(message, Unreadable):
            log.warning("a malformed response to %r: %s", msg_id, message.reason)
            future = self._request_futures.pop(msg_id, None)
            if future is not None and not future.done():
                future.set_exception(JsonRpcException(f"malformed response: {message.reason}"))
            return
        self.handle_message(message)

    def structure_message(self, data: dict[str, Any]) -> Any:
        """The lsprotocol message a JSON-RPC object is (pygls' rules), or an `Unreadable` that says why not. Called by
        `receive` on the whole message only, never on an object inside its params that looks like a message."""
        try:
            if "id" in data and "method" not in data:
                if "error" in data:
                    return self._converter.structure(data, types.ResponseErrorMessage)
                result_type = self._result_types.pop(data["id"], None) or JsonRPCResponseMessage
                return self._converter.structure(data, result_type)
            default = JsonRPCRequestMessage if "id" in data else JsonRPCNotification
            return self._converter.structure(data, self.get_message_type(data["method"]) or default)
        except Exception as e:  # cattrs' validation errors, and anything a structure hook raises on odd input
            return Unreadable(data.get("id"), data.get("method"), _reason(e))

    def handle_message(self, message: Any) -> None:
        if not isinstance(message, Unreadable):
            super().handle_message(message)
        elif message.id is not None:
            error = JsonRpcInvalidParams(f"malformed params for {message.method}: {message.reason}")
            log.warning("answered %d to %r: %s", error.code, message.id, error.message)
            self._send_response(message.id, error=error.to_response_error())
        else:
            log.warning("dropped a %s notification with malformed params: %s", message.method, message.reason)

    def _handle_cancel_notification(self, msg_id: Any) -> None:
        if msg_id in self._result_types:
            log.warning("ignored $/cancelRequest for %r: that is a request the server sent", msg_id)
            return
        future = self._request_futures.pop(msg_id, None)
        if future is None:  # answered already, usually: editors cancel what they no longer need
            log.debug("$/cancelRequest for %r, which is not running", msg_id)
        elif future.cancel():
            log.debug("cancelled request %r", msg_id)

    # -- handlers' futures and results ----------------------------------------------------------------------------
    def _execute_handler(self, msg_id: Any, handler: Any, callback: Any, args: Any = None, kwargs: Any = None) -> None:
        # pygls keeps the future of every asynchronous, threaded or generator handler in `_request_futures` under the
        # message's id, a fresh uuid for a notification or a generator's step, and only a request's answer removes
        # it: left alone, the table grows by one entry per notification. Each entry is removed when it completes.
        super()._execute_handler(msg_id, handler, callback, args, kwargs)
        future = self._request_futures.get(msg_id)
        if future is None:
            return
        if future.done():
            self._forget(msg_id, future)
            return
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        future.add_done_callback(partial(self._forget_soon, loop, msg_id))
        # A step of a generator handler (workspace/executeCommand runs the command so): when the request it serves is
        # cancelled, the step is cancelled too, rather than left running with nobody to read what it ends with.
        outer = callback.keywords.get("result_future") if isinstance(callback, partial) else None
        if isinstance(outer, Future) and outer is not future:
            outer.add_done_callback(lambda f: future.cancel() if f.cancelled() else None)

    def _run_generator(self, future: Any, *, gen: Generator[Any, Any, Any], result_future: Future[Any]) -> None:
        # pygls returns at once when the request was cancelled, leaving the step's exception unread (asyncio then
        # reports "exception was never retrieved" on stderr) and the generator open: read it, close it.
        if result_future.cancelled():
            if future is not None and future.done() and not future.cancelled() and future.exception() is not None:
                log.debug("a cancelled request's step ended with %r", future.exception())
            gen.close()
            return
        super()._run_generator(future, gen=gen, result_future=result_future)

    def _forget_soon(self, loop: asyncio.AbstractEventLoop | None, msg_id: Any, future: Any) -> None:
        # A done callback can run on a handler's thread, or inside `cancel()` while shutdown walks the table: the
        # entry is removed on the event loop, after that.
        if loop is None:
            self._forget(msg_id, future)
            return
        with contextlib.suppress(RuntimeError):  # a closed loop: nothing will read the table again
            loop.call_soon_threadsafe(self._forget, msg_id, future)

    def _forget(self, msg_id: Any, future: Any) -> None:
        if self._request_futures.get(msg_id) is future:
            del self._request_futures[msg_id]

    def _send_handler_result(self, future: Future[Any], *, msg_id: Any) -> None:
        self._request_futures.pop(msg_id, None)
        if future.cancelled():
            error: JsonRpcException = JsonRpcRequestCancelled(f"request {msg_id!r} was cancelled")
            self._send_response(msg_id, error=error.to_response_error())
        elif (exc := future.exception()) is None:
            self._send_response(msg_id, result=future.result())
        else:
            self._send_response(msg_id, error=self._answer_for(exc, msg_id).to_response_error())

    def _answer_for(self, exc: BaseException, msg_id: Any) -> JsonRpcException:
        """The error a request's handler raised, as the client gets it: a client mistake (a JSON-RPC error other
        than InternalError) as it is, logged in one line; anything else as an InternalError with its message
        alone, logged with its traceback."""
        if isinstance(exc, JsonRpcException) and exc.code != JsonRpcInternalError.CODE:
            log.warning("answered %d to %r: %s", exc.code, msg_id, exc.message)
            return exc
        message = exc.message if isinstance(exc, JsonRpcException) else f"{type(exc).__name__}: {exc}"
        log.error("internal error answering %r: %s", msg_id, message, exc_info=exc)
        return JsonRpcInternalError(message)

    def _check_handler_result(self, future: Future[Any]) -> None:
        if future.cancelled() or (exc := future.exception()) is None:
            return
        if isinstance(exc, JsonRpcException) and exc.code != JsonRpcInternalError.CODE:
            log.warning("a notification refused: %s", exc.message)  # a client mistake, nothing to answer
            return
        error = exc if isinstance(exc, Exception) else RuntimeError(repr(exc))
        self._server._report_server_error(error, FeatureNotificationError)  # logged with its traceback, and shown

    def _send_response(self, msg_id: Any, result: Any = None, error: Any = None) -> None:
        # No traceback reaches the client, whichever path an internal error took: it goes to the server's log.
        if error is not None and getattr(error, "data", None) is not None and error.code == JsonRpcInternalError.CODE:
            log.error("internal error answering %r: %s\n%s", msg_id, error.message, "".join(_traceback_of(error)))
            error = attrs.evolve(error, data=None)
        batch = self._reading or self._batches.get(msg_id)
        if batch is not None and batch.owes(msg_id):  # an answer that goes back in its batch's array
            if self._batches.get(msg_id) is batch and batch.expected.get(msg_id) == 1:
                del self._batches[msg_id]
            batch.add(msg_id, self._response(msg_id, result, error))
            self._send_batch_if_complete(batch)
            return
        if msg_id is None and error is not None:  # lsprotocol drops a None id; JSON-RPC wants "id": null
            self._send_data(self._response(msg_id, result, error))
            return
        super()._send_response(msg_id, result=result, error=error)

    def _response(self, msg_id: Any, result: Any, error: Any) -> Any:
        if error is not None:
            return {"jsonrpc": "2.0", "id": msg_id, "error": self._converter.unstructure(error)}
        return JsonRPCResponseMessage(id=msg_id, result=result, jsonrpc="2.0")


def _traceback_of(error: Any) -> list[str]:
    data = error.data
    lines = data.get("traceback") if isinstance(data, dict) else None
    return [str(x) for x in lines] if isinstance(lines, list) else [repr(data)]


def _reason(e: Exception) -> str:
    """Why a message does not fit its LSP type, in one line (cattrs names each field: `... @ $.params.position`)."""
    if isinstance(e, cattrs.BaseValidationError):  # the path in the client's names: $.params.textDocument
        reason = "; ".join(_SNAKE.sub(lambda m: m[1].upper(), line) for line in cattrs.transform_error(e))
    else:
        reason = f"{type(e).__name__}: {e}"
    return reason if len(reason) <= 300 else reason[:297] + "..."


@dataclass(frozen=True)
class Unreadable:
    """A message whose params (or result) do not match the LSP types, and why."""

    id: Any
    method: Any
    reason: str = "they do not match the LSP types"
