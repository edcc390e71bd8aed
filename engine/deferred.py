"""A chat model loaded in the background: the server starts and completes as fast as without it.

`DeferredEngine` is the engine of chat-style work (engine/routing.py) when the local chat model is another model
than the one that types (`chatModel`, or a model `waferline fetch-model` put in the cache). Building it starts a
thread that loads the model and returns at once, so the keystrokes' model is ready as soon as it is alone. Requests
that come while the chat model loads wait for it on the chat lane (`CHAT_LANE`), polling their cancellation, so that
they never hold up a keystroke; once it is loaded they run there, beside the keystrokes' model (the local keystrokes'
engine takes one call at a time from any thread, so its lane and this one never run the same model at once). When it
cannot be loaded (no such file, not a model, no chat template...), the reason is said once (`describe().warning`) and
`fallback`, the keystrokes' engine, answers chat-style work as it did before: nothing is lost.

`describe()` says `pending` while the model loads, so that the server describes the engine again until it is settled.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from waferline.engine import heap
from waferline.engine.api import ChatRequest, ChatUnsupported, Completion, EditRequest, Engine, EngineInfo, ShouldCancel

log = logging.getLogger(__name__)

CHAT_LANE = "chat-model"  # the lane (engine/jobs.py) of a local chat model beside the keystrokes' one
POLL_S = 0.05  # how often a request waiting for the load checks whether it is still wanted


class DeferredEngine:
    def __init__(self, name: str, load: Callable[[], Engine], fallback: Engine) -> None:
        self.name, self.fallback = name, fallback
        self.engine: Engine | None = None
        self.error: str | None = None
        self._ready = threading.Event()
        self._lock = threading.Lock()
        self._closed = False
        self._sessions: set[str] = set()  # the sessions the chat model was asked in
        self._thread = threading.Thread(target=self._load, args=(load,), name="waferline-chat-model", daemon=True)
        self._thread.start()

    def _load(self, load: Callable[[], Engine]) -> None:
        try:
            engine = load()
            if not engine.describe().can_chat:
                raise ChatUnsupported("it has no chat template, so it cannot follow instructions")
        except Exception as e:  # any failure leaves the keystrokes' engine answering: reported once, with the reason
            self.error = f"{type(e).__name__}: {e}" if not isinstance(e, ValueError | OSError) else str(e)
            log.warning("%s", self._failed())
        else:
            with self._lock:
                if self._closed:
                    _close(engine)
                else:
                    self.engine = engine
            if self.engine is not None:
                heap.settle()  # the chat model's objects too (engine/heap.py)
                log.info("chat model loaded: %s", engine.describe().description)
        finally:
            self._ready.set()

    def _failed(self) -> str:
        why = f"the chat model {self.name} could not be loaded ({self.error})"
        return f"{why}; the model that types answers chat-style work"

    def wait(self, timeout_s: float | None = None) -> bool:
        """Until the load has ended, either way (True), or `timeout_s` has passed (False)."""
        return self._ready.wait(timeout_s)

    def _serving(self, should_cancel: ShouldCancel) -> Engine | None:
        """The engine that answers: the chat model once loaded, the fallback when it failed; None when the request
        was given up while it waited for the load."""
        while not self._ready.wait(POLL_S):
            if should_cancel():
                return None
        return self.engine if self.engine is not None else self.fallback

    def complete(self, request: EditRequest, should_cancel: ShouldCancel) -> Completion:
        engine = self._serving(should_cancel)
        if engine is None:
            return _cancelled()
        self._sessions.add(request.session_id)
        return engine.complete(request, should_cancel)

    def chat(self, request: ChatRequest, should_cancel: ShouldCancel) -> Completion:
        engine = self._serving(should_cancel)
        if engine is None:
            return _cancelled()
        self._sessions.add(request.session_id)
        return engine.chat(request, should_cancel)

    def warm(self, request: EditRequest, should_cancel: ShouldCancel) -> Completion:
        """Warm-ups are for keystrokes (engine/routing.py never sends one here)."""
        return Completion(text="", stop_reason="unsupported")

    def lane(self, request: EditRequest | ChatRequest, key: str) -> str:
        if self._ready.is_set() and self.engine is None:
            return self.fallback.lane(request, key)
        return CHAT_LANE

    def context_chars(self, max_new_tokens: int) -> int | None:
        return self.fallback.context_chars(max_new_tokens)

    def describe(self) -> EngineInfo:
        if not self._ready.is_set():
            # Taken to follow instructions while it loads: ask and rewrite wait for it (or get the reason it failed).
            return EngineInfo(f"{self.name} (loading in the background)", can_chat=True, pending=True)
        if self.engine is not None:
            return self.engine.describe()
        info = self.fallback.describe()
        return EngineInfo(
            f"{info.description} (the chat model {self.name} failed to load)", info.can_chat, info.can_warm,
            warning=self._failed(),
        )  # fmt: skip

    def drop_session(self, session_id: str) -> None:
        """Only sessions the chat model was asked in: the server drops a closed document's sessions from the engine
        thread, which must not wait for an answer the chat model is writing on its own lane."""
        if self.engine is not None and session_id in self._sessions:
            self._sessions.discard(session_id)
            self.engine.drop_session(session_id)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            engine, self.engine = self.engine, None
        if engine is not None:
            _close(engine)


def _cancelled() -> Completion:
    return Completion(text="", stop_reason="cancelled")


def _close(engine: Any) -> None:
    if (close := getattr(engine, "close", None)) is not None:
        close()
