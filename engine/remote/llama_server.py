"""llama.cpp's llama-server as an engine: fill-in-the-middle through `/infill`, streamed.

Each request goes as one streamed `/infill` (`input_prefix`, `input_suffix`, `input_extra`, `cache_prompt`, an
`id_slot` per document so that a document's next keystroke finds its own prompt in that slot's cache, `n_predict`
and `t_max_predict_ms` as the budget). The stream is read event by event and closed at once when the request is
cancelled (the task is cancelled, or `should_cancel` says so), when the server's syntax stop rule says the
suggestion is complete, or when the time budget runs out; closing the connection is what tells llama-server to
stop, and `n_predict` bounds what it decodes if it does not. The server's cache figures (`timings.cache_n`,
`prompt_n`) become the completion's reused and prefilled tokens, as the local engine reports them.

An unreachable server, a timeout, an HTTP error or a malformed stream raises `RemoteError` with the URL and the
reason; the caller decides how to tell the user. Nothing is sent anywhere the user did not configure.
"""

from __future__ import annotations

import time
import zlib
from dataclasses import dataclass
from typing import Any

import httpx

from waferline.engine.api import Completion, EditRequest, ShouldCancel
from waferline.engine.remote.sse import StreamError, json_events

STOP_TYPES = {"eos": "stop_token", "limit": "max_tokens", "word": "stop_string"}  # llama-server's -> waferline's


class RemoteError(OSError):
    """The remote engine could not answer: unreachable, timed out, an HTTP error, or a stream that is not its
    dialect. The message names the URL and the reason."""


@dataclass(frozen=True)
class ServerProps:
    context_tokens: int  # n_ctx of a slot
    slots: int
    model: str


@dataclass(frozen=True)
class Snippet:
    filename: str
    text: str


class LlamaServer:
    """A llama-server at `url` (e.g. http://127.0.0.1:8012). One instance per server; safe to share between tasks
    of one event loop."""

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        connect_timeout_s: float = 2.0,
        read_timeout_s: float = 10.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        timeout = httpx.Timeout(read_timeout_s, connect=connect_timeout_s)
        self._client = httpx.AsyncClient(base_url=self.url, headers=headers, timeout=timeout, transport=transport)
        self.props: ServerProps | None = None

    async def aclose(self) -> None:
        await self._client.aclose()

    async def probe(self) -> ServerProps:
        """GET /props: the context per slot and the number of slots (a RemoteError when this is not llama-server)."""
        data = await self._get_json("/props")
        settings = data.get("default_generation_settings")
        try:
            assert isinstance(settings, dict)
            props = ServerProps(
                context_tokens=int(settings["n_ctx"]), slots=int(data["total_slots"]), model=str(data["model_path"])
            )
        except (AssertionError, KeyError, TypeError, ValueError):
            raise RemoteError(f"{self.url}/props is not llama-server's (no n_ctx, total_slots, model_path)") from None
        self.props = props
        return props

    def slot_for(self, session_id: str) -> int:
        """The slot a document's requests go to: the same one every time, so its cached prompt is found again."""
        slots = self.props.slots if self.props is not None else 1
        return zlib.crc32(session_id.encode("utf-8", "surrogatepass")) % max(slots, 1)

    async def complete(
        self,
        request: EditRequest,
        should_cancel: ShouldCancel = lambda: False,
        *,
        extra: tuple[Snippet, ...] = (),
    ) -> Completion:
        """Stream `/infill` for the request; see the module docstring for when the stream is closed early."""
        body: dict[str, Any] = {
            "input_prefix": request.prefix, "input_suffix": request.suffix,
            "input_extra": [{"filename": s.filename, "text": s.text} for s in extra],
            "n_predict": request.max_new_tokens, "stream": True, "cache_prompt": True,
            "id_slot": self.slot_for(request.session_id), "n_probs": 1,
            "stop": list(request.stop_strings), "return_tokens": True,
        }  # fmt: skip
        if request.temperature <= 0:
            body.update(temperature=0, top_k=1, samplers=["top_k"])  # greedy, as the local engine decodes
        else:
            body["temperature"] = request.temperature
        if request.time_budget_s is not None:
            body["t_max_predict_ms"] = int(request.time_budget_s * 1000)
        t0 = time.perf_counter()
        deadline = None if request.time_budget_s is None else t0 + request.time_budget_s
        text, stop_reason = "", "cancelled"
        logprobs: list[float] = []
        timings: dict[str, Any] = {}
        first_at: float | None = None
        try:
            async with self._client.stream("POST", "/infill", json=body) as response:
                await self._check(response, "/infill")
                async for event in json_events(response.aiter_lines()):
                    if first_at is None:
                        first_at = time.perf_counter()
                    text += str(event.get("content") or "")
                    for p in event.get("completion_probabilities") or []:
                        if isinstance(p, dict) and isinstance(p.get("logprob"), int | float):
                            logprobs.append(float(p["logprob"]))
                    if event.get("stop"):
                        stop_reason = STOP_TYPES.get(str(event.get("stop_type")), "stop_token")
                        reported = event.get("timings")
                        timings = reported if isinstance(reported, dict) else {}
                        break
                    if should_cancel():
                        stop_reason = "cancelled"
                        break
                    if request.should_stop is not None and request.should_stop(text):
                        stop_reason = "stop_rule"
                        break
                    if deadline is not None and time.perf_counter() > deadline:
                        stop_reason = "time_budget"
                        break
                else:
                    raise RemoteError(f"{self.url}/infill: the stream ended without its last event")
        except httpx.HTTPError as e:
            raise RemoteError(f"{self.url}/infill: {_reason(e)}") from None
        except StreamError as e:
            raise RemoteError(f"{self.url}/infill: {e}") from None
        end = time.perf_counter()
        cached, prompt_n = int(timings.get("cache_n") or 0), int(timings.get("prompt_n") or 0)
        return Completion(
            text=text,
            stop_reason=stop_reason,
            prompt_tokens=cached + prompt_n,
            reused_tokens=cached,
            prefilled_tokens=prompt_n,
            new_tokens=int(timings.get("predicted_n") or len(logprobs)),
            prefill_s=((first_at or end) - t0),
            decode_s=end - (first_at or end),
            token_logprobs=logprobs,
        )

    async def _get_json(self, path: str) -> dict[str, Any]:
        try:
            response = await self._client.get(path)
            await self._check(response, path)
            data = response.json()
        except httpx.HTTPError as e:
            raise RemoteError(f"{self.url}{path}: {_reason(e)}") from None
        except ValueError:
            raise RemoteError(f"{self.url}{path} did not answer JSON") from None
        if not isinstance(data, dict):
            raise RemoteError(f"{self.url}{path} did not answer a JSON object")
        return data

    async def _check(self, response: httpx.Response, path: str) -> None:
        if response.status_code == 200:
            return
        detail = (await response.aread()).decode("utf-8", "replace")[:300]
        raise RemoteError(f"{self.url}{path} answered HTTP {response.status_code}: {detail}")


def _reason(e: httpx.HTTPError) -> str:
    kinds = {
        httpx.ConnectError: "cannot connect (is the server running?)",
        httpx.ConnectTimeout: "timed out connecting",
        httpx.ReadTimeout: "timed out waiting for the server",
        httpx.RemoteProtocolError: "the server closed the connection mid-answer",
    }
    for kind, why in kinds.items():
        if isinstance(e, kind):
            return f"{why} ({type(e).__name__})"
    return f"{type(e).__name__}: {e}"
