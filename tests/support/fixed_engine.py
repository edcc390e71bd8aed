"""TEST DOUBLE of the engine (the `Engine` interface of waferline/engine/api.py): a fixed text, one character per token.

Protocol tests use it so that what they assert does not depend on what a random model generates. It behaves like a
model in what the protocol can observe: it runs on the engine thread, honours the syntax stop rule, checks for
cancellation between tokens (sleeping `token_delay_s` per token so tests can supersede it), and counts prompt
characters as tokens with longest-common-prefix reuse per session, as a KV cache would. It is a completion-only
model: `chat` raises ChatUnsupported — unless made with `chat=True`, when it also follows instructions: its reply is
the fixed text, written one character per token (each given to the request's `on_text` as it is written, as a
streaming engine does), with the same delay and cancellation. `warm` records the prompt as a cache would (the next
request reuses it), and the last warm-ups' requests are kept in `warmed` (and the last complete()s' in `requests`),
for tests to check what the server sent.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from waferline.engine.api import (
    ENGINE_LANE,
    ChatRequest,
    ChatUnsupported,
    Completion,
    EditRequest,
    EngineInfo,
    ShouldCancel,
)

KEPT = 64


class FixedEngine:
    def __init__(self, text: str, token_delay_s: float = 0.0, *, chat: bool = False) -> None:
        self.text = text
        self.token_delay_s = token_delay_s
        self.chats = chat
        self._prompts: dict[str, str] = {}
        # the last warm-ups' and complete()s' requests, in order: only the last few, so that a long run of the double
        # (`waferline bench-load --fixed`) measures the server's memory, not this record's
        self.warmed: deque[EditRequest] = deque(maxlen=KEPT)
        self.requests: deque[EditRequest] = deque(maxlen=KEPT)

    def describe(self) -> EngineInfo:
        return EngineInfo(description=f"test double (fixed completion {self.text!r})", can_chat=self.chats,
                          can_warm=True)  # fmt: skip

    def _reuse(self, request: EditRequest) -> tuple[str, int]:
        """The prompt as characters, and how many of them the session held (longest common prefix)."""
        prompt = request.suffix + "\x00" + request.prefix  # suffix-prefix-middle: typing appends
        old = self._prompts.get(request.session_id, "")
        reused = 0
        for a, b in zip(old, prompt, strict=False):
            if a != b:
                break
            reused += 1
        self._prompts[request.session_id] = prompt
        return prompt, reused

    def warm(self, request: EditRequest, should_cancel: ShouldCancel) -> Completion:
        self.warmed.append(request)
        if should_cancel():
            return Completion(text="", stop_reason="cancelled")
        prompt, reused = self._reuse(request)
        return Completion(text="", stop_reason="prefilled", prompt_tokens=len(prompt), reused_tokens=reused,
                          prefilled_tokens=len(prompt) - reused)  # fmt: skip

    def context_chars(self, max_new_tokens: int) -> int | None:
        return None  # no context limit: the plan's default window

    def _write(
        self,
        limit: int,
        should_cancel: ShouldCancel,
        *,
        stop: Callable[[str], bool] | None = None,
        on_text: Callable[[str], None] | None = None,
    ) -> tuple[str, str | None]:
        """The fixed text up to `limit` characters, one a step (`token_delay_s` each), each passed to `on_text`;
        with why it ended early ("cancelled", "stop_rule" when `stop` says so), or None when it did not."""
        out = ""
        for ch in self.text[:limit]:
            if should_cancel():
                return out, "cancelled"
            if self.token_delay_s:
                time.sleep(self.token_delay_s)
            out += ch
            if on_text is not None:
                on_text(ch)
            if stop is not None and stop(out):
                return out, "stop_rule"
        return out, None

    def chat(self, request: ChatRequest, should_cancel: ShouldCancel) -> Completion:
        if not self.chats:
            raise ChatUnsupported("the test double has no chat template")
        t0 = time.perf_counter()
        out, ended = self._write(request.max_new_tokens, should_cancel, on_text=request.on_text)
        reason = ended or ("max_tokens" if len(self.text) > request.max_new_tokens else "stop_token")
        return Completion(text=out, stop_reason=reason, new_tokens=len(out), decode_s=time.perf_counter() - t0)

    def complete(self, request: EditRequest, should_cancel: ShouldCancel) -> Completion:
        t0 = time.perf_counter()
        self.requests.append(request)
        prompt, reused = self._reuse(request)
        t1 = time.perf_counter()
        out, ended = self._write(request.max_new_tokens, should_cancel, stop=request.should_stop)
        reason = ended or ("max_tokens" if len(self.text) > request.max_new_tokens else "stop_token")
        return Completion(
            text=out,
            stop_reason=reason,
            prompt_tokens=len(prompt),
            reused_tokens=reused,
            prefilled_tokens=len(prompt) - reused,
            new_tokens=len(out),
            prefill_s=t1 - t0,
            decode_s=time.perf_counter() - t1,
        )

    def drop_session(self, session_id: str) -> None:
        self._prompts.pop(session_id, None)

    def lane(self, request: EditRequest | ChatRequest, key: str) -> str:
        return ENGINE_LANE  # the engine thread, as the local model
