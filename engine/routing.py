"""A model for each feature: keystrokes' inline completions from one engine, chat-style work from another.

"The small model types, a larger model plans and explains": `RoutedEngine` is one `Engine` (engine/api.py) made of
two, chosen by each request's `route` — "completion" for a keystroke's inline completion, "chat" for hover summaries,
`waferline/ask` and code actions (their fill-in-the-middle requests and their chat requests alike). Either may be
the local model or a remote server (with the local model behind it: engine/fallback.py); they may share one local
engine. Each request runs on the lane its engine names, so a remote chat engine writing an answer never holds up
a keystroke's local completion.
"""

from __future__ import annotations

from typing import Any

from waferline.engine.api import ChatRequest, Completion, EditRequest, Engine, EngineInfo, ShouldCancel


class RoutedEngine:
    def __init__(self, completion: Engine, chat: Engine) -> None:
        self.completion, self.chat_engine = completion, chat

    def _for(self, request: EditRequest | ChatRequest) -> Engine:
        return self.chat_engine if isinstance(request, ChatRequest) or request.route == "chat" else self.completion

    def complete(self, request: EditRequest, should_cancel: ShouldCancel) -> Completion:
        return self._for(request).complete(request, should_cancel)

    def chat(self, request: ChatRequest, should_cancel: ShouldCancel) -> Completion:
        return self.chat_engine.chat(request, should_cancel)

    def warm(self, request: EditRequest, should_cancel: ShouldCancel) -> Completion:
        """Warm-ups are for keystrokes: the completion engine's."""
        return self.completion.warm(request, should_cancel)

    def lane(self, request: EditRequest | ChatRequest, key: str) -> str:
        return self._for(request).lane(request, key)

    def context_chars(self, max_new_tokens: int) -> int | None:
        """The completion engine's: the server plans keystrokes' prompt windows with it."""
        return self.completion.context_chars(max_new_tokens)

    def describe(self) -> EngineInfo:
        completion, chat = self.completion.describe(), self.chat_engine.describe()
        warnings = [w for w in (completion.warning, chat.warning and f"chat-style work: {chat.warning}") if w]
        problems = {part: p for part, p in (("completion", completion.problems.get("completion")),
                                              ("chat", chat.problems.get("completion"))) if p is not None}  # fmt: skip
        return EngineInfo(
            completion.description,
            chat.can_chat,
            completion.can_warm,
            warning="; ".join(warnings) or None,
            chat=chat.description,
            problems=problems,
            pending=completion.pending or chat.pending,
        )

    def drop_session(self, session_id: str) -> None:
        self.completion.drop_session(session_id)
        if self.chat_engine is not self.completion:
            self.chat_engine.drop_session(session_id)

    def close(self) -> None:
        for engine in {id(e): e for e in (self.completion, self.chat_engine)}.values():
            close: Any = getattr(engine, "close", None)
            if close is not None:
                close()
