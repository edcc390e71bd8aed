"""llama.cpp's llama-server as an engine: fill-in-the-middle through `/infill` (or `/completion` with waferline's
FIM text, for models whose layout `/infill` does not write), streamed.

Each request goes as one streamed `/infill` (`input_prefix`, `input_suffix`, `input_extra`, `cache_prompt`, an
`id_slot` per document so that a document's next keystroke finds its own prompt in that slot's cache, `n_predict`
and `t_max_predict_ms` as the budget). The stream is followed by engine/remote/stream.py, which closes it at once
when the request is cancelled, when the server's syntax stop rule says the suggestion is complete, or when the time
budget runs out; `n_predict` bounds what the server decodes if it does not stop on the disconnect. The server's
cache figures (`timings.cache_n`, `prompt_n`) become the completion's reused and prefilled tokens, as the local
engine reports them.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any

from waferline.engine.api import ChatRequest, ChatUnsupported, Completion, EditRequest, ShouldCancel
from waferline.engine.chat import ChatTemplate, end_of_turn, render_chat_text
from waferline.engine.fim import FAMILIES
from waferline.engine.remote.http import HttpEngine, number
from waferline.engine.remote.openai import fim_text
from waferline.engine.remote.stream import Piece, RemoteError

STOP_TYPES = {"eos": "stop_token", "limit": "max_tokens", "word": "stop_string"}  # llama-server's -> waferline's

__all__ = ["LlamaServer", "RemoteError", "ServerProps", "Snippet"]


@dataclass(frozen=True)
class ServerProps:
    context_tokens: int  # n_ctx of a slot
    slots: int
    model: str
    # The chat template llama-server applies (the GGUF's `tokenizer.chat_template`, or its own chatml when the file
    # has none), with the model's BOS and EOS text: what waferline renders chat prompts with for `/completion`.
    chat_template: str = ""
    bos_token: str = ""
    eos_token: str = ""


@dataclass(frozen=True)
class Snippet:
    filename: str
    text: str


class LlamaServer(HttpEngine):
    """A llama-server at `url` (e.g. http://127.0.0.1:8012); one instance per server, shared by the tasks of one
    event loop. With `fim_template` (a family of engine/fim.py) the prompt is waferline's own FIM text sent to
    `/completion` instead of `/infill`: llama-server's `--spm-infill` lays suffix-prefix-middle out as
    [SUF] S [PRE] P [MID], which is not the layout waferline's model (or StarCoder's) was trained on."""

    props: ServerProps | None = None

    def __init__(self, url: str, *, fim_template: str | None = None, **kw: Any) -> None:
        super().__init__(url, **kw)
        if fim_template is not None and fim_template not in FAMILIES:
            raise ValueError(f"unknown FIM template {fim_template!r}; known: {', '.join(FAMILIES)}")
        self.fim_template = fim_template

    async def probe(self) -> ServerProps:
        """GET /props: the context per slot and the number of slots (a RemoteError when this is not llama-server)."""
        data = await self.get_json("/props")
        settings = data.get("default_generation_settings")
        try:
            assert isinstance(settings, dict)
            props = ServerProps(
                context_tokens=int(settings["n_ctx"]), slots=int(data["total_slots"]), model=str(data["model_path"]),
                chat_template=str(data.get("chat_template") or ""), bos_token=str(data.get("bos_token") or ""),
                eos_token=str(data.get("eos_token") or ""),
            )  # fmt: skip
        except (AssertionError, KeyError, TypeError, ValueError):
            raise RemoteError(f"{self.url}/props is not llama-server's (no n_ctx, total_slots, model_path)") from None
        self.props = props
        return props

    def slot_for(self, session_id: str) -> int:
        """The slot a document's requests go to: the same one every time, so its cached prompt is found again."""
        slots = self.props.slots if self.props is not None else 1
        return zlib.crc32(session_id.encode("utf-8", "surrogatepass")) % max(slots, 1)

    async def complete(
        self, request: EditRequest, should_cancel: ShouldCancel = lambda: False, *, extra: tuple[Snippet, ...] = ()
    ) -> Completion:
        if self.fim_template is None:
            body: dict[str, Any] = {
                "input_prefix": request.prefix, "input_suffix": request.suffix,
                "input_extra": [{"filename": s.filename, "text": s.text} for s in extra],
            }  # fmt: skip
            path = "/infill"
        else:
            body = {"prompt": fim_text(self.fim_template, request.prefix, request.suffix)}  # `extra`: /infill only
            path = "/completion"
        body |= self._generation(request, stop=list(request.stop_strings))
        return await self.stream(path, body, parse_event, request, should_cancel)

    async def chat(self, request: ChatRequest, should_cancel: ShouldCancel = lambda: False) -> Completion:
        """The assistant's reply through `/completion`, the prompt rendered here with the chat template `/props`
        reports (the model file's, or llama-server's chatml for a file without one) and stopped at its end-of-turn
        markers; the session's slot keeps the prompt cached as for completions."""
        props = self.props or await self.probe()
        if not props.chat_template:
            raise ChatUnsupported(f"{self.url}/props reports no chat template")
        template = ChatTemplate(props.chat_template, props.bos_token, props.eos_token)
        body = {"prompt": render_chat_text(template, request.messages)}
        body |= self._generation(request, stop=end_of_turn(template))
        return await self.stream("/completion", body, parse_event, request, should_cancel)

    def _generation(self, request: EditRequest | ChatRequest, *, stop: list[str]) -> dict[str, Any]:
        """What every request sends besides its prompt: the budget, streaming, the slot and its cache, sampling."""
        body: dict[str, Any] = {
            "n_predict": request.max_new_tokens, "stream": True, "cache_prompt": True,
            "id_slot": self.slot_for(request.session_id), "n_probs": 1, "stop": stop,
            "timings_per_token": True,  # the cache figures on every event: most answers are cut before the last
        }  # fmt: skip
        if request.temperature <= 0:
            body.update(temperature=0, top_k=1, samplers=["top_k"])  # greedy, as the local engine decodes
        else:
            body["temperature"] = request.temperature
        if request.time_budget_s is not None:
            body["t_max_predict_ms"] = int(request.time_budget_s * 1000)
        return body


def parse_event(event: dict[str, Any]) -> Piece:
    """One `/infill` (or `/completion`) stream event."""
    piece = Piece(text=str(event.get("content") or ""))
    for p in event.get("completion_probabilities") or []:
        if isinstance(p, dict) and isinstance(p.get("logprob"), int | float):
            piece.logprobs.append(float(p["logprob"]))
    if event.get("stop"):
        piece.stop_reason = STOP_TYPES.get(str(event.get("stop_type")), "stop_token")
    reported = event.get("timings")  # on every event (`timings_per_token`), so an answer cut here still has them
    if isinstance(reported, dict) or event.get("stop"):
        timings: dict[str, Any] = reported if isinstance(reported, dict) else {}
        cached, prompt_n = number(timings.get("cache_n")) or 0, number(timings.get("prompt_n")) or 0
        piece.cached_tokens, piece.prompt_tokens = cached, cached + prompt_n
        piece.new_tokens = number(timings.get("predicted_n"))
    return piece
