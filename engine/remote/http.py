"""What every remote dialect shares: one asynchronous HTTP client per server (httpx), JSON GETs, one streamed POST
followed to its end or given up (engine/remote/stream.py), and HTTP failures turned into `RemoteError`s that name
the URL and the reason. An API key goes as `Authorization: Bearer` and is never logged."""

from __future__ import annotations

from typing import Any

import httpx

from waferline.engine.api import ChatRequest, Completion, EditRequest, ShouldCancel
from waferline.engine.remote.sse import Events, StreamError, json_events
from waferline.engine.remote.stream import Parse, RemoteError, follow


class HttpEngine:
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

    async def aclose(self) -> None:
        await self._client.aclose()

    async def get_json(self, path: str) -> dict[str, Any]:
        try:
            response = await self._client.get(path)
            await self._check(response, path)
            data = response.json()
        except httpx.HTTPError as e:
            raise RemoteError(f"{self.url}{path}: {reason(e)}", reached=False) from None
        except ValueError:
            raise RemoteError(f"{self.url}{path} did not answer JSON") from None
        if not isinstance(data, dict):
            raise RemoteError(f"{self.url}{path} did not answer a JSON object")
        return data

    async def stream(
        self, path: str, body: dict[str, Any], parse: Parse, request: EditRequest | ChatRequest,
        should_cancel: ShouldCancel, events: Events = json_events,
    ) -> Completion:  # fmt: skip
        """POST `body` to `path` and follow the stream (`events`: server-sent events, or `json_lines`); leaving this
        closes the connection, which is what tells the server to stop decoding."""
        where = f"{self.url}{path}"
        try:
            async with self._client.stream("POST", path, json=body) as response:
                await self._check(response, path)
                return await follow(events(response.aiter_lines()), parse, request, should_cancel, where)
        except httpx.HTTPError as e:
            raise RemoteError(f"{where}: {reason(e)}", reached=False) from None
        except (StreamError, TypeError, ValueError) as e:  # a stream that is not the dialect's
            raise RemoteError(f"{where}: {e}") from None

    async def _check(self, response: httpx.Response, path: str) -> None:
        if response.status_code == 200:
            return
        detail = (await response.aread()).decode("utf-8", "replace")[:300]
        status = response.status_code
        raise RemoteError(f"{self.url}{path} answered HTTP {status}: {detail}", status=status)


def reason(e: httpx.HTTPError) -> str:
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


def number(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
