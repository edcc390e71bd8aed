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
import dataclasses
import logging
import os
import threading
from collections.abc import Coroutine
from typing import Any

from waferline.engine.api import (
    ChatRequest,
    ChatUnsupported,
    Completion,
    EditRequest,
    EngineInfo,
    EngineUnavailable,
    ShouldCancel,
)
from waferline.engine.remote.probe import DIALECTS, Connected, Dialect, connect, refused
from waferline.engine.remote.stream import RemoteError

log = logging.getLogger(__name__)
logging.getLogger("httpx").setLevel(logging.WARNING)  # one INFO line per request otherwise

API_KEY_ENV = "WAFERLINE_ENGINE_API_KEY"  # read from the environment only: never a setting a workspace could carry
CHARS_PER_TOKEN = 3.0  # code in the BPE vocabularies of code models: a cautious figure, the server counts exactly
POLL_S = 0.01
CLOSE_WAIT_S = 2.0  # at most, for a cancelled request's stream to close before its lane moves on

__all__ = ["DIALECTS", "Dialect", "EngineUnavailable", "RemoteEngine"]


class RemoteEngine:
    def __init__(self, dialect: Dialect, url: str, *, model: str | None = None, fim_template: str | None = None,
                 chat: bool = False, connect_timeout_s: float = 2.0, read_timeout_s: float = 10.0) -> None:  # fmt: skip
        """`chat`: the model follows instructions, so chat requests go to it (the server for chat-style work);
        False for a completion model, whose `chat` raises ChatUnsupported."""
        if dialect not in DIALECTS:
            raise ValueError(f"unknown engine dialect {dialect!r}; choose {', '.join(DIALECTS)}")
        self.url, self.serves_chat = url, chat
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="waferline-remote", daemon=True)
        self._thread.start()
        self._reported: set[str] = set()  # reasons logged already (from several lanes' threads)
        self._report_lock = threading.Lock()
        self._chain: list[Connected] = []  # the dialects to use, first first; a refused one is dropped for good
        self._dropped: list[Connected] = []
        kw: dict[str, Any] = dict(
            api_key=os.environ.get(API_KEY_ENV) or None,
            connect_timeout_s=connect_timeout_s,
            read_timeout_s=read_timeout_s,
        )
        try:
            self._chain = self._run(connect(dialect, url, model=model, fim_template=fim_template, **kw))
        except BaseException:
            self.close()
            raise
        self.context_tokens, self.model = self._chain[0].context_tokens, self._chain[0].model

    @property
    def dialect(self) -> str:
        """The dialect requests go to now (with `auto`: the first found that has not refused one)."""
        return self._chain[0].dialect

    def _run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def close(self) -> None:
        """Close the client and stop the loop thread (the server drops an engine when the options change)."""
        if self._loop.is_closed():
            return
        clients = [c.client for c in [*self._chain, *self._dropped]]
        if clients and self._loop.is_running():
            for client in clients:
                asyncio.run_coroutine_threadsafe(client.aclose(), self._loop).result(timeout=5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()

    def complete(self, request: EditRequest, should_cancel: ShouldCancel) -> Completion:
        return self._wait(request, should_cancel)

    def warm(self, request: EditRequest, should_cancel: ShouldCancel) -> Completion:
        """Nothing sent: a warm-up over the network would cost the remote server a prefill per focus change for a
        cache slot it may give to another document (llama-server's `n_predict: 0` could, later). `can_warm` is
        False, so the server does not ask."""
        return Completion(text="", stop_reason="unsupported")

    def chat(self, request: ChatRequest, should_cancel: ShouldCancel) -> Completion:
        if not self.serves_chat:
            raise ChatUnsupported(f"the {self.dialect} engine at {self.url} serves completions only")
        room = max(int(self.context_tokens * CHARS_PER_TOKEN) - int(request.max_new_tokens * CHARS_PER_TOKEN), 256)
        return self._wait(dataclasses.replace(request, messages=fit_messages(request.messages, room)), should_cancel)

    def check(self) -> concurrent.futures.Future[bool]:
        """Whether the server answers its probe again, without waiting here: a future of True or False (engine/
        fallback.py asks while the server is down, so that it is used again as soon as it is back)."""

        async def probe() -> bool:
            try:
                await self._chain[0].client.probe()
            except RemoteError:
                return False
            return True

        return asyncio.run_coroutine_threadsafe(probe(), self._loop)

    def lane(self, request: EditRequest | ChatRequest, key: str) -> str:
        """One lane per document (or kind of model task): documents wait on the network side by side, and each has
        at most one request upstream, since a call returns only once its stream is closed."""
        return f"{self.url} {key}"

    def _wait(self, request: EditRequest | ChatRequest, should_cancel: ShouldCancel) -> Completion:
        """Run the request on the loop and wait for it here, on the caller's lane, polling `should_cancel`. A
        cancelled request returns only once its task has unwound (its stream closed), so that the lane's next
        request never overlaps it upstream."""
        unwound = threading.Event()

        async def serve() -> Completion:
            try:
                return await self._serve(request, should_cancel)
            finally:
                unwound.set()

        future = asyncio.run_coroutine_threadsafe(serve(), self._loop)
        while True:
            try:
                return future.result(timeout=POLL_S)
            except concurrent.futures.TimeoutError:
                if should_cancel():
                    future.cancel()  # cancels the task: the stream is closed as it unwinds
                    unwound.wait(CLOSE_WAIT_S)
                    return Completion(text="", stop_reason="cancelled")
            except concurrent.futures.CancelledError:
                return Completion(text="", stop_reason="cancelled")
            except RemoteError as e:
                with self._report_lock:
                    first = str(e) not in self._reported
                    self._reported.add(str(e))
                if first:
                    log.warning("remote engine: %s", e)
                raise EngineUnavailable(str(e)) from None

    async def _serve(self, request: EditRequest | ChatRequest, should_cancel: ShouldCancel) -> Completion:
        """On the loop: ask the first dialect of the chain; one that refuses the endpoint (engine/remote/probe.py's
        `refused`) is dropped for the rest of the session and the next one is asked."""
        while True:
            current = self._chain[0]
            try:
                if isinstance(request, ChatRequest):
                    return await current.client.chat(request, should_cancel)
                return await current.client.complete(request, should_cancel)
            except RemoteError as e:
                if len(self._chain) == 1 or not refused(e):
                    raise
                if self._chain[0] is current:  # not already dropped by a concurrent request
                    self._dropped.append(self._chain.pop(0))
                    log.warning("remote engine: %s; using %s from now on", e, self._chain[0].dialect)

    def context_chars(self, max_new_tokens: int) -> int:
        room = max(self.context_tokens - max_new_tokens - 16, 64)
        return int(room * CHARS_PER_TOKEN)

    def describe(self) -> EngineInfo:
        return EngineInfo(description=f"{self.model} via {self.dialect} at {self.url}", can_chat=self.serves_chat)

    def drop_session(self, session_id: str) -> None:
        """Nothing kept here: the server's cache slots are its own."""


def fit_messages(messages: list[dict[str, str]], room_chars: int) -> list[dict[str, str]]:
    """The messages within `room_chars` characters: the last one (the question and its evidence) shortened from its
    end if needed, as the local engine shortens it by tokens; the server counts exactly and refuses what is left."""
    total = sum(len(m["content"]) for m in messages)
    if total <= room_chars or not messages:
        return messages
    last = messages[-1]
    keep = max(len(last["content"]) - (total - room_chars), 0)
    return [*messages[:-1], {**last, "content": last["content"][:keep] + "\n[...]"}]
