"""A remote engine with the local model behind it: keystrokes keep getting suggestions when the remote one is down.

`FallbackEngine` asks the primary engine first; when it is unavailable (`EngineUnavailable`: unreachable, timed out,
an HTTP error) the request is answered by the fallback, and the primary is left alone for `retry_s` before it is
asked again, so that a server that is down costs one failed connection per `retry_s`, not one per keystroke. When
the primary could not be reached at all when the engine was built, `primary` is None and every request goes to the
fallback (the server reports why; changing the engine options tries again). Chat requests go to whichever engine
can chat. The reason the primary is not used is kept in `describe()`; each answer the fallback gives is marked in its
timings, which `waferline/stats` counts as `fallback_answers`.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from waferline.engine.api import ChatRequest, ChatUnsupported, Completion, EditRequest, Engine, EngineInfo, ShouldCancel
from waferline.engine.remote.engine import EngineUnavailable

log = logging.getLogger(__name__)

RETRY_S = 30.0


class FallbackEngine:
    def __init__(
        self, primary: Any | None, fallback: Engine, *, reason: str | None = None, retry_s: float = RETRY_S
    ) -> None:
        self.primary, self.fallback, self.retry_s = primary, fallback, retry_s
        self.down_reason = reason if primary is None else None
        self._down_until = 0.0

    def complete(self, request: EditRequest, should_cancel: ShouldCancel) -> Completion:
        if self.primary is not None and time.monotonic() >= self._down_until:
            try:
                completion: Completion = self.primary.complete(request, should_cancel)
                self.down_reason = None
                return completion
            except EngineUnavailable as e:
                self._down_until = time.monotonic() + self.retry_s
                if self.down_reason != str(e):
                    log.warning("remote engine unavailable, the local model answers for %.0f s: %s", self.retry_s, e)
                self.down_reason = str(e)
        completion = self.fallback.complete(request, should_cancel)
        completion.timings["fallback"] = 1.0  # counted as `fallback_answers` in waferline/stats
        return completion

    def warm(self, request: EditRequest, should_cancel: ShouldCancel) -> Completion:
        """The engine that would answer `request` now warms for it: the local model while the remote one is not
        used (unreachable at start, or down within `retry_s`), else the remote one (a no-op there)."""
        if self.primary is not None and time.monotonic() >= self._down_until:
            completion: Completion = self.primary.warm(request, should_cancel)
            return completion
        return self.fallback.warm(request, should_cancel)

    def chat(self, request: ChatRequest, should_cancel: ShouldCancel) -> Completion:
        if self.primary is not None and self.primary.describe().can_chat:
            try:
                completion: Completion = self.primary.chat(request, should_cancel)
                return completion
            except (EngineUnavailable, ChatUnsupported):
                pass
        return self.fallback.chat(request, should_cancel)

    def context_chars(self, max_new_tokens: int) -> int | None:
        """The smaller of the two windows, so that a prompt planned for one fits the other."""
        sizes = [e.context_chars(max_new_tokens) for e in (self.primary, self.fallback) if e is not None]
        known = [s for s in sizes if s is not None]
        return min(known) if known else None

    def describe(self) -> EngineInfo:
        local = self.fallback.describe()
        if self.primary is None:
            why = f"the remote engine is unavailable ({self.down_reason}); the local model answers"
            return EngineInfo(f"{local.description} (fallback: {why})", local.can_chat, local.can_warm, warning=why)
        remote = self.primary.describe()
        down = f"; now answered locally: {self.down_reason}" if self.down_reason else ""
        # Warm-ups while the remote engine answers would fill a local cache no request reads: the remote one's say.
        return EngineInfo(f"{remote.description}, local fallback {local.description}{down}",
                          remote.can_chat or local.can_chat, remote.can_warm)  # fmt: skip

    def drop_session(self, session_id: str) -> None:
        self.fallback.drop_session(session_id)
        if self.primary is not None:
            self.primary.drop_session(session_id)

    def close(self) -> None:
        if self.primary is not None and hasattr(self.primary, "close"):
            self.primary.close()
