"""A remote dialect client as an `Engine` (engine/api.py): what the server's worker calls, like the local engine.

The dialect clients are asynchronous (httpx); the worker calls an engine on its one engine thread. `RemoteEngine`
runs the client on an event loop of its own, in a daemon thread, and `complete` waits for the answer there while
polling the worker's `should_cancel`: a superseded or cancelled request cancels the task, which closes the stream
(engine/remote/stream.py). So one request is upstream at a time, keystrokes supersede each other as with the local
model, and the server's event loop never waits on the network.

A server that cannot be reached when the engine is built fails the build (`RemoteError`, an OSError: the server
reports it as a model that could not load); one that fails later answers that request with an empty completion
(`EngineUnavailable`, which the worker counts as an error) and is logged once per distinct reason.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import threading
from collections.abc import Coroutine
from typing import Any, Literal

from waferline.engine.api import ChatRequest, ChatUnsupported, Completion, EditRequest, EngineInfo, ShouldCancel
from waferline.engine.remote.llama_server import LlamaServer
from waferline.engine.remote.ollama import Ollama
from waferline.engine.remote.openai import OpenAICompletions
from waferline.engine.remote.stream import RemoteError

log = logging.getLogger(__name__)
logging.getLogger("httpx").setLevel(logging.WARNING)  # one INFO line per request otherwise

Dialect = Literal["llama-server", "openai", "ollama"]
DIALECTS: tuple[Dialect, ...] = ("llama-server", "openai", "ollama")
API_KEY_ENV = "WAFERLINE_ENGINE_API_KEY"  # read from the environment only: never a setting a workspace could carry
DEFAULT_CONTEXT_TOKENS = 4096  # when the server does not say (OpenAI-compatible servers, Ollama)
CHARS_PER_TOKEN = 3.0  # code in the BPE vocabularies of code models: a cautious figure, the server counts exactly
POLL_S = 0.01
DEFAULT_FIM = "qwen2.5-coder"  # the FIM family assumed for OpenAI-compatible and Ollama servers unless told


class EngineUnavailable(ValueError):
    """The remote engine failed this request (unreachable, timed out, an HTTP error, a malformed stream)."""


class RemoteEngine:
    def __init__(self, dialect: Dialect, url: str, *, model: str | None = None, fim_template: str | None = None,
                 connect_timeout_s: float = 2.0, read_timeout_s: float = 10.0) -> None:  # fmt: skip
        if dialect not in DIALECTS:
            raise ValueError(f"unknown engine dialect {dialect!r}; choose {', '.join(DIALECTS)}")
        self.dialect, self.url = dialect, url
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="waferline-remote", daemon=True)
        self._thread.start()
        self._reported: set[str] = set()
        kw: dict[str, Any] = dict(
            api_key=os.environ.get(API_KEY_ENV) or None,
            connect_timeout_s=connect_timeout_s,
            read_timeout_s=read_timeout_s,
        )

        async def connect() -> tuple[Any, int, str]:
            if dialect == "llama-server":
                server = LlamaServer(url, fim_template=fim_template, **kw)
                props = await server.probe()
                return server, props.context_tokens, props.model
            if dialect == "openai":
                openai = OpenAICompletions(url, family=fim_template or DEFAULT_FIM, model=model, **kw)
                return openai, DEFAULT_CONTEXT_TOKENS, await openai.probe()
            if not model:
                raise ValueError("the ollama dialect needs the model's name (engineModel)")
            ollama = Ollama(url, model=model, family=fim_template or DEFAULT_FIM, **kw)
            await ollama.probe()
            return ollama, DEFAULT_CONTEXT_TOKENS, model

        try:
            self._client, self.context_tokens, self.model = self._run(connect())
        except BaseException:
            self.close()
            raise

    def _run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def close(self) -> None:
        """Close the client and stop the loop thread (the server drops an engine when the options change)."""
        if self._loop.is_closed():
            return
        client = getattr(self, "_client", None)
        if client is not None and self._loop.is_running():
            asyncio.run_coroutine_threadsafe(client.aclose(), self._loop).result(timeout=5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()

    def complete(self, request: EditRequest, should_cancel: ShouldCancel) -> Completion:
        future = asyncio.run_coroutine_threadsafe(self._client.complete(request, should_cancel), self._loop)
        while True:
            try:
                return future.result(timeout=POLL_S)
            except concurrent.futures.TimeoutError:
                if should_cancel():
                    future.cancel()  # cancels the task: the stream is closed as it unwinds
                    return Completion(text="", stop_reason="cancelled")
            except concurrent.futures.CancelledError:
                return Completion(text="", stop_reason="cancelled")
            except RemoteError as e:
                if str(e) not in self._reported:
                    self._reported.add(str(e))
                    log.warning("remote engine: %s", e)
                raise EngineUnavailable(str(e)) from None

    def warm(self, request: EditRequest, should_cancel: ShouldCancel) -> Completion:
        """Nothing sent: a warm-up over the network would cost the remote server a prefill per focus change for a
        cache slot it may give to another document (llama-server's `n_predict: 0` could, later). `can_warm` is
        False, so the server does not ask."""
        return Completion(text="", stop_reason="unsupported")

    def chat(self, request: ChatRequest, should_cancel: ShouldCancel) -> Completion:
        raise ChatUnsupported(f"the {self.dialect} engine serves completions only (chat is not routed remotely yet)")

    def context_chars(self, max_new_tokens: int) -> int:
        room = max(self.context_tokens - max_new_tokens - 16, 64)
        return int(room * CHARS_PER_TOKEN)

    def describe(self) -> EngineInfo:
        return EngineInfo(description=f"{self.model} via {self.dialect} at {self.url}", can_chat=False)

    def drop_session(self, session_id: str) -> None:
        """Nothing kept here: the server's cache slots are its own."""
