"""The two ways remote engines stream JSON: server-sent events (llama-server, OpenAI-compatible servers: one object
per `data:` line) and newline-delimited JSON (Ollama: one object per line)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

Events = Callable[[AsyncIterator[str]], AsyncIterator[dict[str, Any]]]


class StreamError(ValueError):
    """An event that is not the JSON object the dialect promises."""


def _object(text: str, what: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise StreamError(f"{what} is not JSON ({e}): {text[:200]!r}") from None
    if not isinstance(value, dict):
        raise StreamError(f"{what} is not a JSON object: {text[:200]!r}")
    return value


async def json_events(lines: AsyncIterator[str]) -> AsyncIterator[dict[str, Any]]:
    """The JSON payload of each `data:` line; comments and other fields are skipped, `[DONE]` ends the stream. An
    event that is an error (vLLM writes `{"error": {"message": ...}}` into a stream that fails mid-answer) is the
    server's error."""
    async for line in lines:
        if not line.startswith("data:"):
            continue  # blank separators, ": keep-alive" comments, event:/id: fields
        payload = line[5:].strip()
        if payload == "[DONE]":
            return
        event = _object(payload, "an event")
        if "error" in event:
            error = event["error"]
            message = error.get("message", error) if isinstance(error, dict) else error
            raise StreamError(f"the server: {message}")
        yield event


async def json_lines(lines: AsyncIterator[str]) -> AsyncIterator[dict[str, Any]]:
    """One JSON object per non-blank line; an object with an `error` is the server's error (Ollama's way)."""
    async for line in lines:
        if not line.strip():
            continue
        obj = _object(line, "a line")
        if "error" in obj:
            raise StreamError(f"the server: {obj['error']}")
        yield obj
