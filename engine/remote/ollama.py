"""Ollama as an engine: `/api/generate` with `raw: true` and the fill-in-the-middle prompt written by waferline, and
`/api/chat` for chat requests (Ollama applies the model's own template, its Modelfile's TEMPLATE).

`raw` turns off Ollama's own prompt template, so the FIM layout of the model's family (engine/remote/openai.py's
`fim_text`) reaches the model as written; `keep_alive` keeps the model loaded between keystrokes. Ollama streams one
JSON object per line (not server-sent events): `response` pieces, then `done: true` with `done_reason`,
`prompt_eval_count` (the prompt tokens it computed: Ollama reuses a cached prefix without counting it) and
`eval_count`. `GET /api/tags` lists the models it has.
"""

from __future__ import annotations

from typing import Any

from waferline.engine.api import ChatRequest, Completion, EditRequest, ShouldCancel
from waferline.engine.fim import FAMILIES
from waferline.engine.remote.http import HttpEngine, number
from waferline.engine.remote.openai import fim_text
from waferline.engine.remote.sse import json_lines
from waferline.engine.remote.stream import Piece, RemoteError

DONE = {"stop": "stop_token", "length": "max_tokens"}


class Ollama(HttpEngine):
    """An Ollama server at `url` (e.g. http://127.0.0.1:11434) running `model` (None: the first it lists), of FIM
    `family`."""

    def __init__(self, url: str, *, model: str | None, family: str = "qwen2.5-coder", **kw: Any) -> None:
        super().__init__(url, **kw)
        if family not in FAMILIES:
            raise ValueError(f"unknown FIM template {family!r}; known: {', '.join(FAMILIES)}")
        self.model, self.family = model, family

    async def probe(self) -> list[str]:
        """GET /api/tags: the models Ollama has; a RemoteError naming them when the configured one is not there."""
        data = await self.get_json("/api/tags")
        models = data.get("models")
        if not isinstance(models, list):
            raise RemoteError(f"{self.url}/api/tags is not Ollama's (no models list)")
        names = [str(m.get("name")) for m in models if isinstance(m, dict) and m.get("name")]
        if self.model is None and names:
            self.model = names[0]
        if self.model not in names and f"{self.model}:latest" not in names:
            raise RemoteError(f"{self.url} has no model {self.model!r} (it has {', '.join(names) or 'none'})")
        return names

    async def complete(self, request: EditRequest, should_cancel: ShouldCancel = lambda: False) -> Completion:
        body = {
            "model": self.model, "prompt": fim_text(self.family, request.prefix, request.suffix), "raw": True,
            "stream": True, "keep_alive": "30m",
            "options": {"num_predict": request.max_new_tokens, "temperature": max(request.temperature, 0.0),
                        "stop": [*FAMILIES[self.family].stops, *request.stop_strings]},
        }  # fmt: skip
        return await self.stream("/api/generate", body, parse_line, request, should_cancel, events=json_lines)

    async def chat(self, request: ChatRequest, should_cancel: ShouldCancel = lambda: False) -> Completion:
        body = {
            "model": self.model, "messages": request.messages, "stream": True, "keep_alive": "30m",
            "options": {"num_predict": request.max_new_tokens, "temperature": max(request.temperature, 0.0)},
        }  # fmt: skip
        return await self.stream("/api/chat", body, parse_line, request, should_cancel, events=json_lines)


def parse_line(obj: dict[str, Any]) -> Piece:
    """One line of `/api/generate` (its `response` piece) or `/api/chat` (its `message.content`)."""
    message = obj.get("message")
    text = message.get("content") if isinstance(message, dict) else obj.get("response")
    piece = Piece(text=str(text or ""))
    if obj.get("done"):
        piece.stop_reason = DONE.get(str(obj.get("done_reason")), "stop_token")
        computed = number(obj.get("prompt_eval_count"))
        piece.prompt_tokens, piece.cached_tokens = computed, 0  # Ollama counts only the prompt it computed
        piece.new_tokens = number(obj.get("eval_count"))
    return piece
