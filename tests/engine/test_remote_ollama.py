"""The Ollama dialect (engine/remote/ollama.py) through a mock transport, in the layout Ollama's API documentation
gives for a streamed `/api/generate` (Ollama cannot run on these machines: it is a binary download)."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from waferline.engine.api import EditRequest
from waferline.engine.remote.ollama import Ollama
from waferline.engine.remote.stream import RemoteError

LINES = [
    {"model": "qwen2.5-coder:1.5b", "created_at": "2026-12-01T12:00:00Z", "response": "a", "done": False},
    {"model": "qwen2.5-coder:1.5b", "created_at": "2026-12-01T12:00:00Z", "response": " + b", "done": False},
    {"model": "qwen2.5-coder:1.5b", "created_at": "2026-12-01T12:00:00Z", "response": "", "done": True,
     "done_reason": "stop", "prompt_eval_count": 9, "eval_count": 3, "eval_duration": 1000},
]  # fmt: skip


def engine(lines: list, seen: list | None = None, tags: tuple[str, ...] = ("qwen2.5-coder:1.5b",)) -> Ollama:
    def handler(req: httpx.Request) -> httpx.Response:
        if req.url.path == "/api/tags":
            return httpx.Response(200, json={"models": [{"name": t} for t in tags]})
        if seen is not None:
            seen.append(json.loads(req.content))
        body = b"".join(json.dumps(x).encode() + b"\n" if isinstance(x, dict) else x for x in lines)
        return httpx.Response(200, content=body, headers={"content-type": "application/x-ndjson"})

    return Ollama("http://fake", model="qwen2.5-coder:1.5b", transport=httpx.MockTransport(handler))


def request(**kw: object) -> EditRequest:
    return EditRequest(session_id="s", prefix="def add(a, b):\n    return ", suffix="\n", time_budget_s=None, **kw)  # type: ignore[arg-type]


def test_raw_generate_with_waferlines_fim_prompt() -> None:
    seen: list = []

    async def run():  # type: ignore[no-untyped-def]
        e = engine(LINES, seen)
        assert "qwen2.5-coder:1.5b" in await e.probe()
        done = await e.complete(request(max_new_tokens=5))
        await e.aclose()
        return done

    done = asyncio.run(run())
    assert (done.text, done.stop_reason, done.prefilled_tokens, done.new_tokens) == ("a + b", "stop_token", 9, 3)
    (body,) = seen
    assert body["raw"] is True and body["stream"] is True and body["options"]["num_predict"] == 5
    assert body["prompt"] == "<|fim_prefix|>def add(a, b):\n    return <|fim_suffix|>\n<|fim_middle|>"


@pytest.mark.parametrize(
    ("lines", "message"),
    [([b"{broken\n"], "not JSON"), ([{"error": "model not found"}], "model not found"), (LINES[:2], "last event")],
    ids=["not-json", "error-line", "cut-short"],
)
def test_bad_streams_are_remote_errors(lines: list, message: str) -> None:
    async def run() -> None:
        e = engine(lines)
        with pytest.raises(RemoteError, match=message):
            await e.complete(request())
        await e.aclose()

    asyncio.run(run())


def test_a_model_ollama_does_not_have_is_named() -> None:
    async def run() -> None:
        e = engine(LINES, tags=("llama3:8b",))
        with pytest.raises(RemoteError, match=r"has no model 'qwen2.5-coder:1.5b' \(it has llama3:8b\)"):
            await e.probe()
        await e.aclose()

    asyncio.run(run())
