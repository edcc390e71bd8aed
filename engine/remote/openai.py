"""OpenAI-compatible servers (vLLM, llama-server's `/v1`, LM Studio, ...) as an engine: `/v1/completions` with the
fill-in-the-middle prompt written by waferline, and `/v1/chat/completions` for chat requests (the server applies the
model's chat template), both streamed.

vLLM refuses the `suffix` field and llama-server ignores it, so the FIM layout is laid out here as text in the
model family's own control tokens (engine/fim.py's FAMILIES; the server parses them as special tokens), and the
family's end tokens go as `stop`. The stream is followed as every dialect's is (engine/remote/stream.py);
`stream_options.include_usage` asks for the usage chunk, whose `prompt_tokens_details.cached_tokens` (vLLM with
prefix caching, llama-server) is the prompt the server did not compute again.
"""

from __future__ import annotations

from typing import Any

from waferline.engine.api import ChatRequest, Completion, EditRequest, ShouldCancel
from waferline.engine.fim import FAMILIES, Order
from waferline.engine.remote.http import HttpEngine, number
from waferline.engine.remote.stream import Piece, RemoteError

__all__ = ["OpenAICompletions", "RemoteError", "fim_text"]

FINISH = {"stop": "stop_token", "length": "max_tokens"}


def fim_text(family: str, prefix: str, suffix: str, order: Order | None = None) -> str:
    """The FIM prompt as text in `family`'s control tokens (the layouts of engine/fim.py), in the family's default
    order unless told: suffix-prefix-middle for a family trained on it (waferline's own), so that typing at the cursor
    only appends to the prompt and the server's prefix cache keeps the rest."""
    if family not in FAMILIES:
        raise ValueError(f"unknown FIM template {family!r}; known: {', '.join(FAMILIES)}")
    f = FAMILIES[family]
    order = order or f.default_order
    head = f.bos[0] if f.bos else ""
    pre, suf, mid = f.prefix[-1], f.suffix[-1], f.middle[-1]  # the spelling a server parses from text
    if order == "spm":
        return f"{head}{pre}{suf}{suffix}{mid}{prefix}"
    return f"{head}{pre}{prefix}{suf}{suffix}{mid}"


class OpenAICompletions(HttpEngine):
    """`/v1/completions` of an OpenAI-compatible server at `url` (without the /v1), for a model of FIM `family`."""

    def __init__(self, url: str, *, family: str = "qwen2.5-coder", model: str | None = None, **kw: Any) -> None:
        super().__init__(url, **kw)
        if family not in FAMILIES:
            raise ValueError(f"unknown FIM template {family!r}; known: {', '.join(FAMILIES)}")
        self.family = family
        self.model = model
        self.context_tokens: int | None = None  # as /v1/models says, when it does

    async def probe(self) -> str:
        """GET /v1/models: the model to name in requests (the configured one, which must be served, or the first),
        and its context when the server says (vLLM's `max_model_len`)."""
        data = await self.get_json("/v1/models")
        cards = {str(m["id"]): m for m in data.get("data") or [] if isinstance(m, dict) and m.get("id")}
        if not cards:
            raise RemoteError(f"{self.url}/v1/models lists no model")
        if self.model is not None and self.model not in cards:
            raise RemoteError(f"{self.url} does not serve {self.model!r} (it serves {', '.join(cards)})")
        self.model = self.model or next(iter(cards))
        self.context_tokens = number(cards[self.model].get("max_model_len"))
        return self.model

    async def complete(self, request: EditRequest, should_cancel: ShouldCancel = lambda: False) -> Completion:
        if self.model is None:
            await self.probe()
        stops = [*FAMILIES[self.family].stops, *request.stop_strings][:16]
        body: dict[str, Any] = {
            "model": self.model, "prompt": fim_text(self.family, request.prefix, request.suffix),
            "max_tokens": request.max_new_tokens, "temperature": max(request.temperature, 0.0), "stream": True,
            "stop": stops, "logprobs": 1, "stream_options": {"include_usage": True},
        }  # fmt: skip
        return await self.stream("/v1/completions", body, parse_chunk, request, should_cancel)

    async def chat(self, request: ChatRequest, should_cancel: ShouldCancel = lambda: False) -> Completion:
        """The assistant's reply through `/v1/chat/completions`: the server renders the messages with the model's
        chat template (vLLM refuses a model that has none)."""
        if self.model is None:
            await self.probe()
        body: dict[str, Any] = {
            "model": self.model, "messages": request.messages, "max_tokens": request.max_new_tokens,
            "temperature": max(request.temperature, 0.0), "stream": True, "stream_options": {"include_usage": True},
        }  # fmt: skip
        return await self.stream("/v1/chat/completions", body, parse_chat_chunk, request, should_cancel)


def parse_chunk(chunk: dict[str, Any]) -> Piece:
    """One streamed `/v1/completions` chunk: text and log-probabilities of its choice, the finish reason, usage."""
    return _parse(chunk, chat=False)


def parse_chat_chunk(chunk: dict[str, Any]) -> Piece:
    """One streamed `/v1/chat/completions` chunk: its choice's `delta.content` (the first chunk may carry only the
    role, the last only the finish reason), then the usage chunk."""
    return _parse(chunk, chat=True)


def _parse(chunk: dict[str, Any], *, chat: bool) -> Piece:
    piece = Piece()
    choices = chunk.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        choice = choices[0]
        if chat:
            delta = choice.get("delta")
            piece.text = str(delta.get("content") or "") if isinstance(delta, dict) else ""
        else:
            piece.text = str(choice.get("text") or "")
        lp = choice.get("logprobs")
        if isinstance(lp, dict):
            if isinstance(lp.get("token_logprobs"), list):  # OpenAI's legacy layout (vLLM)
                piece.logprobs = [float(x) for x in lp["token_logprobs"] if isinstance(x, int | float)]
            elif isinstance(lp.get("content"), list):  # llama-server's
                piece.logprobs = [float(c["logprob"]) for c in lp["content"] if isinstance(c, dict) and "logprob" in c]
        if choice.get("finish_reason"):
            piece.stop_reason = FINISH.get(str(choice["finish_reason"]), "stop_token")
            piece.more = True  # the usage chunk follows, or [DONE]
    usage = chunk.get("usage")
    if isinstance(usage, dict):
        details = usage.get("prompt_tokens_details")
        piece.prompt_tokens = number(usage.get("prompt_tokens"))
        piece.new_tokens = number(usage.get("completion_tokens"))
        piece.cached_tokens = number(details.get("cached_tokens")) if isinstance(details, dict) else 0
    return piece
