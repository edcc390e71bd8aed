"""The llama-server engine (engine/remote/llama_server.py) against the real llama-server (built by `make test`)
serving the shipped model exported as GGUF: streamed answers equal the server's own, the cache figures are read, the
stream is closed when the stop rule, a cancellation or the budget says so, and a dead server is a clear error from
which the engine recovers when the server is back."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from llama_cpp_support import llama_server, post, shipped_model_gguf  # tests/support (on sys.path: tests/conftest.py)

from waferline.engine.api import EditRequest
from waferline.engine.remote.llama_server import LlamaServer, RemoteError

PREFIX = 'def scale(values, factor):\n    """Multiply each value by factor."""\n    return '
SUFFIX = "\n\n\ndef mean(values):\n    return sum(values) / len(values)\n"


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return shipped_model_gguf(tmp_path_factory.mktemp("remote"))


@pytest.fixture(scope="module")
def server(model: Path) -> Iterator[str]:
    with llama_server(model, "-np", "2") as url:
        yield url


def request(prefix: str = PREFIX, **kw: object) -> EditRequest:
    return EditRequest(session_id="file:///a.py", prefix=prefix, suffix=SUFFIX, **kw)  # type: ignore[arg-type]


async def complete(url: str, req: EditRequest, **kw: object):  # type: ignore[no-untyped-def]
    engine = LlamaServer(url)
    try:
        await engine.probe()
        return await engine.complete(req, **kw)  # type: ignore[arg-type]
    finally:
        await engine.aclose()


def test_probe_reads_the_slots_and_context(server: str) -> None:
    async def run() -> None:
        engine = LlamaServer(server)
        props = await engine.probe()
        await engine.aclose()
        assert props.slots == 2 and props.context_tokens > 0 and props.model.endswith(".gguf")
        assert {engine.slot_for(f"file:///{i}.py") for i in range(20)} == {0, 1}
        assert engine.slot_for("file:///a.py") == engine.slot_for("file:///a.py")

    asyncio.run(run())


def test_streamed_answer_equals_the_servers_own_and_the_cache_is_reported(server: str) -> None:
    greedy = {"temperature": 0, "top_k": 1, "samplers": ["top_k"], "n_predict": 16, "cache_prompt": False}
    want = post(server + "/infill", {"input_prefix": PREFIX, "input_suffix": SUFFIX, **greedy})["content"]
    first = asyncio.run(complete(server, request(max_new_tokens=16, time_budget_s=None)))
    assert first.text == want and first.stop_reason in ("max_tokens", "stop_token")
    assert first.new_tokens == len(first.token_logprobs) > 0 and all(p <= 0 for p in first.token_logprobs)
    typed = asyncio.run(complete(server, request(PREFIX + "[", max_new_tokens=8, time_budget_s=None)))
    assert typed.reused_tokens > 0 and typed.prompt_tokens == typed.reused_tokens + typed.prefilled_tokens
    assert typed.prefilled_tokens < typed.prompt_tokens / 2, "one keystroke later, most of the prompt is cached"


def test_the_stop_rule_and_cancellation_close_the_stream(server: str) -> None:
    stopped = asyncio.run(complete(server, request(max_new_tokens=64, time_budget_s=None, should_stop=bool)))
    assert stopped.stop_reason == "stop_rule" and stopped.text  # the first piece made the rule true
    # cut before the server's last event, the answer still has the cache figures (sent with every event)
    assert stopped.prompt_tokens > 0 and stopped.prompt_tokens == stopped.reused_tokens + stopped.prefilled_tokens
    calls = iter(range(100))
    cancelled = asyncio.run(
        complete(server, request(max_new_tokens=200, time_budget_s=None), should_cancel=lambda: next(calls) >= 2)
    )
    assert cancelled.stop_reason == "cancelled" and not cancelled.complete
    assert len(cancelled.token_logprobs) <= 3
    # The server stops decoding for a closed stream: its slots go idle instead of running to n_predict.
    slots = _wait_idle(server)
    assert not any(s.get("is_processing") for s in slots), slots


def test_a_cancelled_task_closes_its_stream_and_the_next_request_is_served(server: str) -> None:
    async def run() -> None:
        engine = LlamaServer(server)
        await engine.probe()
        task = asyncio.ensure_future(engine.complete(request(max_new_tokens=400, time_budget_s=None)))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        done = await engine.complete(request(max_new_tokens=4, time_budget_s=None))
        await engine.aclose()
        assert done.text and done.complete

    asyncio.run(run())


def test_unreachable_and_dying_servers_are_clear_errors_and_recovery_follows(model: Path) -> None:
    with pytest.raises(RemoteError, match=r"cannot connect \(is the server running\?\)"):
        asyncio.run(complete("http://127.0.0.1:9", request()))  # port 9: discard, nothing listens
    with llama_server(model) as url:
        port = int(url.rsplit(":", 1)[1])
        pid = _server_pid(port)

        async def run() -> None:
            engine = LlamaServer(url, read_timeout_s=5)
            await engine.probe()
            task = asyncio.ensure_future(engine.complete(request(max_new_tokens=2000, time_budget_s=None)))
            await asyncio.sleep(0.3)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            with pytest.raises(RemoteError, match=r"/infill: "):
                await task
            await engine.aclose()

        asyncio.run(run())
    with llama_server(model) as url:  # back: a new engine on the new server answers
        assert asyncio.run(complete(url, request(max_new_tokens=4))).text


def test_an_http_error_names_the_status_and_the_servers_message() -> None:
    def handler(req: httpx.Request) -> httpx.Response:
        if req.url.path == "/props":
            return httpx.Response(200, json={"default_generation_settings": {"n_ctx": 512}, "total_slots": 1,
                                             "model_path": "m.gguf"})  # fmt: skip
        return httpx.Response(400, json={"error": {"message": "infill is not supported by this model"}})

    async def run() -> None:
        engine = LlamaServer("http://fake", transport=httpx.MockTransport(handler))
        await engine.probe()
        with pytest.raises(RemoteError, match=r"HTTP 400: .*infill is not supported"):
            await engine.complete(request())
        await engine.aclose()

    asyncio.run(run())


@pytest.mark.parametrize(
    "stream",
    [b"data: {not json\n\n", b"data: [1, 2]\n\n", b'data: {"content": "x", "stop": false}\n\n'],
    ids=["not-json", "not-an-object", "no-last-event"],
)
def test_a_stream_that_is_not_the_dialect_is_a_clear_error(stream: bytes) -> None:
    def handler(req: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=stream, headers={"content-type": "text/event-stream"})

    async def run() -> None:
        engine = LlamaServer("http://fake", transport=httpx.MockTransport(handler))
        with pytest.raises(RemoteError, match=r"http://fake/infill: "):
            await engine.complete(request())
        await engine.aclose()

    asyncio.run(run())


# -- helpers -----------------------------------------------------------------------------------------------------------
def _wait_idle(url: str) -> list[dict]:
    """The server's slots once none is processing (or after 5 s, as they are then)."""
    for _ in range(50):
        with urllib.request.urlopen(url + "/slots", timeout=5) as r:
            slots = json.loads(r.read())
        if not any(s.get("is_processing") for s in slots):
            return slots
        time.sleep(0.1)
    return slots


def _server_pid(port: int) -> int:
    out = subprocess.run(["pgrep", "-f", f"llama-server.*--port {port}"], capture_output=True, text=True).stdout
    return int(out.split()[0])
