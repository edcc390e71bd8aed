"""Start `waferline serve` over stdio with pytest-lsp and talk to it as VS Code or Neovim would.

Client capabilities are those pytest-lsp recorded from the real editors, with what newer versions added: VS Code
gained `textDocument/inlineCompletion` (vscode-languageclient 9), and Neovim 0.12 gained it too while keeping its
utf-8-first `general.positionEncodings`. The Neovim 0.11 capabilities (no inline completion) exercise the
`textDocument/completion` fallback.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

SERVE = [sys.executable, "-m", "waferline.cli.serve", "-v"]
# `waferline serve` with the engine's test double (a fixed completion, one character per token) for the default model.
SERVE_FIXED = [sys.executable, str(Path(__file__).resolve().parents[1] / "support" / "serve_fixed.py"), "-v"]
SET_COMPLETION = "waferlineTest/setCompletion"  # what the double writes from now on (tests/support/serve_fixed.py)


def serve_command(fixed_text: str | None = None, token_delay_ms: float = 0.0) -> list[str]:
    """The server to start: `waferline serve`, or with `fixed_text` the one whose engine is the test double."""
    if fixed_text is None:
        return SERVE
    return [*SERVE_FIXED, f"--text={fixed_text}", f"--token-delay-ms={token_delay_ms}"]


def set_completion(client: LanguageClient, text: str, token_delay_ms: float | None = None) -> None:
    """What the test double writes from now on (the engine is rebuilt before the next request is served)."""
    params: dict[str, Any] = {"text": text}
    if token_delay_ms is not None:
        params["tokenDelayMs"] = token_delay_ms
    client.protocol.notify(SET_COMPLETION, params)


def capabilities(editor: str) -> types.ClientCapabilities:
    """'vscode' and 'neovim' (with inline completion, as today's versions), 'neovim-0.11' (without), and
    'utf32-client' (VS Code's capabilities offering only UTF-32 positions, as some editors prefer)."""
    if editor in ("vscode", "utf32-client"):
        caps = client_capabilities("visual-studio-code")
        if editor == "utf32-client":
            caps.general = types.GeneralClientCapabilities(position_encodings=[types.PositionEncodingKind.Utf32])
    elif editor in ("neovim", "neovim-0.11"):
        caps = client_capabilities("neovim@v0.11")
    else:
        raise ValueError(editor)
    if editor != "neovim-0.11":
        assert caps.text_document is not None
        caps.text_document.inline_completion = types.InlineCompletionClientCapabilities(dynamic_registration=False)
    return caps


@contextlib.asynccontextmanager
async def lsp_session(
    editor: str, options: dict[str, Any] | None = None, *, fixed_text: str | None = None, token_delay_ms: float = 0.0
) -> AsyncIterator[LanguageClient]:
    """A started and initialized server (the test double writing `fixed_text`, when given); shut down and stopped on
    exit."""
    client = await ClientServerConfig(server_command=serve_command(fixed_text, token_delay_ms)).start()
    assert isinstance(client, LanguageClient)
    try:
        result = await client.initialize_session(
            types.InitializeParams(
                capabilities=capabilities(editor),
                initialization_options={"waferline": options or {}},
                root_uri="file:///tmp/waferline-test",
            )
        )
        client.server_result = result  # type: ignore[attr-defined]
        yield client
    finally:
        # Shut down even when the test failed, or stop() waits for a server that was never told to exit.
        with contextlib.suppress(Exception):
            await asyncio.wait_for(client.shutdown_session(), 10)
        await asyncio.wait_for(client.stop(), 10)


def open_doc(client: LanguageClient, uri: str, text: str, language_id: str = "python") -> None:
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id=language_id, version=1, text=text)
        )
    )


class Typist:
    """Sends one incremental didChange per character typed, tracking the position in the client's encoding."""

    def __init__(self, client: LanguageClient, uri: str, line: int, character: int, encoding: str = "utf-16"):
        self.client, self.uri, self.line, self.character, self.encoding = client, uri, line, character, encoding
        self.version = 1

    def units(self, text: str) -> int:
        """Length of `text` in code units of the encoding."""
        if self.encoding == "utf-8":
            return len(text.encode("utf-8"))
        if self.encoding == "utf-16":
            return len(text.encode("utf-16-le")) // 2
        return len(text)

    def type(self, text: str) -> None:
        for ch in text:
            self.version += 1
            pos = types.Position(line=self.line, character=self.character)
            self.client.text_document_did_change(
                types.DidChangeTextDocumentParams(
                    text_document=types.VersionedTextDocumentIdentifier(uri=self.uri, version=self.version),
                    content_changes=[
                        types.TextDocumentContentChangePartial(range=types.Range(start=pos, end=pos), text=ch)
                    ],
                )
            )
            if ch == "\n":
                self.line, self.character = self.line + 1, 0
            else:
                self.character += self.units(ch)

    @property
    def position(self) -> types.Position:
        return types.Position(line=self.line, character=self.character)


def inline_params(uri: str, position: types.Position, *, invoked: bool = False) -> types.InlineCompletionParams:
    kind = types.InlineCompletionTriggerKind.Invoked if invoked else types.InlineCompletionTriggerKind.Automatic
    return types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        position=position,
        context=types.InlineCompletionContext(trigger_kind=kind),
    )


async def inline(
    client: LanguageClient, uri: str, position: types.Position, **kw: Any
) -> list[types.InlineCompletionItem]:
    result = await client.text_document_inline_completion_async(inline_params(uri, position, **kw))
    if result is None:
        return []
    return list(result.items if isinstance(result, types.InlineCompletionList) else result)


def as_dict(result: Any) -> dict[str, Any]:
    """pygls hands a custom request's result over as a namedtuple-like Object."""
    return dict(result._asdict()) if hasattr(result, "_asdict") else dict(result)


async def stats(client: LanguageClient) -> dict[str, Any]:
    return as_dict(await client.protocol.send_request_async("waferline/stats", {}))


async def engine_ready(client: LanguageClient, timeout_s: float = 60.0) -> None:
    """Wait until the server's engine has loaded (`waferline/stats`' engine_state), for a test whose request would
    otherwise race the load on a busy machine."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while (await stats(client)).get("engine_state") != "ready":
        assert asyncio.get_running_loop().time() < deadline, "the engine did not load in time"
        await asyncio.sleep(0.05)


async def document_state(client: LanguageClient, uri: str, include_text: bool = False) -> dict[str, Any]:
    params = {"uri": uri, "includeText": include_text}
    return as_dict(await client.protocol.send_request_async("waferline/document", params))


async def raw_request(client: LanguageClient, method: str, params: Any, msg_id: str = "raw-1") -> Any:
    """Send a request whose params are not checked against the LSP types (to send malformed ones on purpose)."""
    from concurrent.futures import Future

    from pygls.protocol.json_rpc import JsonRPCRequestMessage

    future: Future[Any] = Future()
    client.protocol._request_futures[msg_id] = future
    client.protocol._send_data(JsonRPCRequestMessage(id=msg_id, method=method, jsonrpc="2.0", params=params))
    return await asyncio.wait_for(asyncio.wrap_future(future), 10)


def raw_notify(client: LanguageClient, method: str, params: Any) -> None:
    from pygls.protocol.json_rpc import JsonRPCNotification

    client.protocol._send_data(JsonRPCNotification(method=method, jsonrpc="2.0", params=params))
