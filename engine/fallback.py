"""A remote engine with the local model behind it: keystrokes keep getting suggestions when the remote one is down.

`FallbackEngine` asks the primary engine first; when it is unavailable (`EngineUnavailable`: unreachable, timed out,
an HTTP error) the request is answered by the fallback, and the primary is not asked again until it answers its
probe: while it is down, a request at most every `check_s` starts a probe in the background (`RemoteEngine.check`),
which never holds up the request, and the first request after a probe has succeeded goes to the primary again. So a
server that is down costs no keystroke a failed connection (a timeout on an unreachable host would cost seconds),
and one that is back is used at once. When the primary could not be reached when the engine was built, `primary` is
None and `connect` builds it again in the background, at most every `reconnect_s`, without an options change. That
also holds without a fallback (`fallback` None: no local model behind the remote one): until the remote engine is
reached, each request fails as one to a remote engine that is down does (`EngineUnavailable`).

Chat requests go to the primary when it can chat. Each answer the fallback gives is marked in its timings
(`waferline/stats` counts `fallback_answers`) and carries why (`Completion.unavailable`), from which the server
shows the engine's state. A request goes to the lane of the engine that will answer it (engine/api.py
`Engine.lane`); should the primary fail mid-request, the fallback answers on the primary's lane, which the local
engine allows (one call at a time, from whichever thread).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from waferline.engine.api import (
    ENGINE_LANE,
    ChatRequest,
    Completion,
    EditRequest,
    Engine,
    EngineInfo,
    EngineUnavailable,
    ShouldCancel,
)

log = logging.getLogger(__name__)

CHECK_S = 1.0  # at most this often, a probe of a primary that is down
RECONNECT_S = 5.0  # at most this often, building a primary that could not be reached at start


class FallbackEngine:
    def __init__(
        self, primary: Any | None, fallback: Engine | None, *, reason: str | None = None,
        connect: Callable[[], Any] | None = None, check_s: float = CHECK_S, reconnect_s: float = RECONNECT_S,
    ) -> None:  # fmt: skip
        self.primary, self.fallback = primary, fallback
        self.down_reason = reason if primary is None else None
        self._connect, self._check_s, self._reconnect_s = connect, check_s, reconnect_s
        self._lock = threading.Lock()  # the down state is read and changed from the event loop and the lanes
        self._down = primary is None
        self._check: concurrent.futures.Future[bool] | None = None
        self._next_try = time.monotonic() + reconnect_s
        self._connecting = False
        self._closed = False

    def _primary_for(self, request: EditRequest | ChatRequest) -> Any | None:
        """The primary engine when it is to be asked for this request: up (or seen back), and able to chat for a
        chat request. While it is down this starts the background probe or reconnection that brings it back."""
        with self._lock:
            if self._down and not self._back():
                return None
            primary = self.primary
        if primary is None or (isinstance(request, ChatRequest) and not primary.describe().can_chat):
            return None
        return primary

    def _back(self) -> bool:
        """Under the lock: whether the primary that was down answers again; starts a probe when none runs."""
        if self.primary is None:
            self._reconnect()
            return False
        if self._check is not None and self._check.done():
            ok = not self._check.cancelled() and self._check.exception() is None and self._check.result()
            self._check = None
            if ok:
                self._down = False
                log.info("remote engine answers again: %s", self.primary.describe().description)
                return True
        now = time.monotonic()
        if self._check is None and now >= self._next_try:
            self._next_try = now + self._check_s
            self._check = self.primary.check()
        return False

    def _reconnect(self) -> None:
        """Under the lock: build the primary again in a thread of its own (it probes the server, which may take its
        connect timeout), at most every `reconnect_s`."""
        now = time.monotonic()
        if self._connect is None or self._connecting or now < self._next_try or self._closed:
            return
        self._connecting, self._next_try = True, now + self._reconnect_s
        connect = self._connect

        def attempt() -> None:
            try:
                primary = connect()
            except (OSError, ValueError) as e:
                with self._lock:
                    self._connecting = False
                    self.down_reason = str(e)
                return
            with self._lock:
                self._connecting = False
                if self._closed:
                    primary.close()
                    return
                self.primary, self._down = primary, False
            log.info("remote engine reached: %s", primary.describe().description)

        threading.Thread(target=attempt, name="waferline-reconnect", daemon=True).start()

    def lane(self, request: EditRequest | ChatRequest, key: str) -> str:
        primary = self._primary_for(request)
        if primary is not None:
            return str(primary.lane(request, key))
        return self.fallback.lane(request, key) if self.fallback is not None else ENGINE_LANE

    def complete(self, request: EditRequest, should_cancel: ShouldCancel) -> Completion:
        return self._serve("complete", request, should_cancel)

    def warm(self, request: EditRequest, should_cancel: ShouldCancel) -> Completion:
        """The engine that would answer `request` now warms for it: the local model while the remote one is not
        used (unreachable at start, or down), else the remote one (a no-op there); nothing without a fallback."""
        if (primary := self._primary_for(request)) is not None:
            completion: Completion = primary.warm(request, should_cancel)
            return completion
        if self.fallback is None:
            return Completion(text="", stop_reason="unsupported")
        return self.fallback.warm(request, should_cancel)

    def chat(self, request: ChatRequest, should_cancel: ShouldCancel) -> Completion:
        return self._serve("chat", request, should_cancel)

    def _serve(self, method: str, request: EditRequest | ChatRequest, should_cancel: ShouldCancel) -> Completion:
        """`complete` or `chat` by the primary while it answers, else (or when it fails now) by the fallback. A chat
        reply the primary had begun to stream when it failed is not streamed again by the fallback (what was streamed
        cannot be taken back): its reply comes whole."""
        if (primary := self._primary_for(request)) is not None:
            asked: EditRequest | ChatRequest = request
            streamed = None
            if isinstance(request, ChatRequest) and request.on_text is not None:
                streamed = _Streamed(request.on_text)
                asked = dataclasses.replace(request, on_text=streamed)
            try:
                completion: Completion = getattr(primary, method)(asked, should_cancel)
                self.down_reason = None
                return completion
            except EngineUnavailable as e:
                self._went_down(e)
            if isinstance(request, ChatRequest) and streamed is not None and streamed.any:
                request = dataclasses.replace(request, on_text=None)
        return self._fallback(getattr(self._local(), method)(request, should_cancel))

    def _local(self) -> Engine:
        """The fallback; without one (the remote engine could not be reached at start and no local model is
        configured behind it), the request fails as a remote one that is down does, while `connect` keeps trying."""
        if self.fallback is None:
            raise EngineUnavailable(self.down_reason or "the remote engine is unavailable")
        return self.fallback

    def _fallback(self, completion: Completion) -> Completion:
        completion.timings["fallback"] = 1.0  # counted as `fallback_answers` in waferline/stats
        completion.unavailable = self.down_reason or "the remote engine is unavailable"
        return completion

    def _went_down(self, e: EngineUnavailable) -> None:
        with self._lock:
            first = not self._down
            self._down, self.down_reason = True, str(e)
            self._next_try = time.monotonic() + self._check_s
        if first:
            log.warning("remote engine unavailable, the local model answers until it is back: %s", e)

    def context_chars(self, max_new_tokens: int) -> int | None:
        """The smaller of the two windows, so that a prompt planned for one fits the other."""
        sizes = [e.context_chars(max_new_tokens) for e in (self.primary, self.fallback) if e is not None]
        known = [s for s in sizes if s is not None]
        return min(known) if known else None

    def describe(self) -> EngineInfo:
        if self.fallback is None:
            primary = self.primary
            if primary is not None and not self._down:
                info: EngineInfo = primary.describe()
                return info
            why = f"the remote engine is unavailable ({self.down_reason}); tried again every {self._reconnect_s:g} s"
            return EngineInfo(f"unavailable: {why}", can_chat=False, warning=why,
                              problems={"completion": (str(self.down_reason), False)})  # fmt: skip
        local = self.fallback.describe()
        if self.primary is None:
            why = f"the remote engine is unavailable ({self.down_reason}); the local model answers"
            return EngineInfo(f"{local.description} (fallback: {why})", local.can_chat, local.can_warm, warning=why,
                              problems={"completion": (str(self.down_reason), True)})  # fmt: skip
        remote = self.primary.describe()
        down = f"; now answered locally: {self.down_reason}" if self._down else ""
        # Warm-ups while the remote engine answers would fill a local cache no request reads: the remote one's say.
        return EngineInfo(f"{remote.description}, local fallback {local.description}{down}",
                          remote.can_chat or local.can_chat, remote.can_warm)  # fmt: skip

    def drop_session(self, session_id: str) -> None:
        if self.fallback is not None:
            self.fallback.drop_session(session_id)
        if self.primary is not None:
            self.primary.drop_session(session_id)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            primary = self.primary
        if primary is not None and hasattr(primary, "close"):
            primary.close()


class _Streamed:
    """A chat request's `on_text`, noting whether any text went through it."""

    def __init__(self, on_text: Callable[[str], None]) -> None:
        self.on_text, self.any = on_text, False

    def __call__(self, piece: str) -> None:
        self.any = True
        self.on_text(piece)
