"""Server-sent events as llama-server, OpenAI-compatible servers and Ollama stream them: one JSON object per event."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any


class StreamError(ValueError):
    """An event that is not the JSON object the dialect promises."""


async def json_events(lines: AsyncIterator[str]) -> AsyncIterator[dict[str, Any]]:
    """The JSON payload of each `data:` line; comments and other fields are skipped, `[DONE]` ends the stream."""
    async for line in lines:
        if not line.startswith("data:"):
            continue  # blank separators, ": keep-alive" comments, event:/id: fields
        payload = line[5:].strip()
        if payload == "[DONE]":
            return
        try:
            event = json.loads(payload)
        except json.JSONDecodeError as e:
            raise StreamError(f"an event is not JSON ({e}): {payload[:200]!r}") from None
        if not isinstance(event, dict):
            raise StreamError(f"an event is not a JSON object: {payload[:200]!r}")
        yield event
