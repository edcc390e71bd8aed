"""The vLLM and Ollama dialects against their recorded responses (tests/engine/fixtures/remote/: each shape written
from the project's own source, which the fixture names): the parsers chunk by chunk, and the whole RemoteEngine —
probing, completions, chat, cache figures, error bodies — against a local fake HTTP server replaying them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_http import fake_server, recorded  # tests/support (on sys.path: tests/conftest.py)

from waferline.engine.api import ChatRequest, EditRequest
from waferline.engine.remote.engine import EngineUnavailable, RemoteEngine
from waferline.engine.remote.ollama import parse_line
from waferline.engine.remote.openai import parse_chat_chunk, parse_chunk
from waferline.engine.remote.sse import StreamError, json_events
from waferline.engine.remote.stream import RemoteError

FIXTURES = Path(__file__).parent / "fixtures" / "remote"
VLLM, OLLAMA = FIXTURES / "vllm.json", FIXTURES / "ollama.json"
MESSAGES = [{"role": "system", "content": "Answer from the evidence."}, {"role": "user", "content": "What does it do?"}]


def exchange(fixture: Path, name: str) -> dict:
    return json.loads(fixture.read_text(encoding="utf-8"))["exchanges"][name]


def events(fixture: Path, name: str) -> list[dict]:
    """The JSON objects of a recorded stream, as the dialect's reader yields them."""
    import asyncio

    async def lines():  # type: ignore[no-untyped-def]
        for chunk in exchange(fixture, name)["chunks"]:
            for line in chunk.splitlines():
                yield line

    async def collect() -> list[dict]:
        if fixture == OLLAMA:
            return [json.loads(line) async for line in lines() if line.strip()]
        return [e async for e in json_events(lines())]

    return asyncio.run(collect())


def edit() -> EditRequest:
    return EditRequest(session_id="file:///a.py", prefix="def add(a, b):\n    return ", suffix="\n", time_budget_s=None)


def test_every_exchange_names_its_source() -> None:
    for fixture in (VLLM, OLLAMA):
        data = json.loads(fixture.read_text(encoding="utf-8"))
        assert data["about"] and data["server"]
        for name, x in data["exchanges"].items():
            assert " @ " in x["source"] and ("/" in x["source"]), f"{fixture.name} {name}: say where the shape is from"


def test_vllm_completion_chunks() -> None:
    pieces = [parse_chunk(e) for e in events(VLLM, "completions_stream")]
    assert "".join(p.text for p in pieces) == "a + b"
    assert [lp for p in pieces for lp in p.logprobs] == [-0.0312, -0.2041, -0.0105, -0.0891]
    assert pieces[3].stop_reason == "stop_token" and pieces[3].more, "the usage chunk follows the finish"
    assert (pieces[4].prompt_tokens, pieces[4].cached_tokens, pieces[4].new_tokens) == (31, 16, 4)
    assert all(p.prompt_tokens is None for p in pieces[:4]), "`usage: null` in the text chunks is no usage"
    last = [parse_chunk(e) for e in events(VLLM, "completions_stream_length")]
    assert last[1].stop_reason == "max_tokens" and last[2].cached_tokens == 0, "no prompt_tokens_details: none cached"


def test_vllm_chat_chunks() -> None:
    pieces = [parse_chat_chunk(e) for e in events(VLLM, "chat_stream")]
    assert [p.text for p in pieces] == ["", "It adds", " tax [1].", "", ""]
    assert pieces[3].stop_reason == "stop_token" and (pieces[4].prompt_tokens, pieces[4].cached_tokens) == (210, 192)


def test_a_vllm_error_written_into_the_stream_is_the_servers_error() -> None:
    with pytest.raises(StreamError, match="the server: Internal server error"):
        events(VLLM, "error_mid_stream")


def test_ollama_lines() -> None:
    pieces = [parse_line(o) for o in events(OLLAMA, "generate_raw_stream")]
    assert "".join(p.text for p in pieces) == "a + b" and pieces[-1].stop_reason == "stop_token"
    assert (pieces[-1].prompt_tokens, pieces[-1].cached_tokens, pieces[-1].new_tokens) == (9, 0, 4)
    chat = [parse_line(o) for o in events(OLLAMA, "chat_stream")]
    assert "".join(p.text for p in chat) == "It adds tax [1]." and chat[-1].new_tokens == 6


# -- the whole engine against a fake server replaying them -------------------------------------------------------------
def test_vllm_through_the_remote_engine() -> None:
    with fake_server(recorded(VLLM, "models", "completions_stream", "chat_stream")) as fake:
        engine = RemoteEngine("auto", fake.url, chat=True)
        try:
            assert (engine.dialect, engine.model, engine.context_tokens) == ("openai", "Qwen/Qwen2.5-Coder-1.5B", 32768)
            done = engine.complete(edit(), lambda: False)
            answer = engine.chat(ChatRequest(session_id="waferline/ask", messages=MESSAGES), lambda: False)
        finally:
            engine.close()
    assert (done.text, done.stop_reason, done.prompt_tokens, done.reused_tokens, done.prefilled_tokens) == (
        "a + b", "stop_token", 31, 16, 15,
    )  # fmt: skip
    assert done.new_tokens == 4 and len(done.token_logprobs) == 4
    assert (answer.text, answer.reused_tokens, answer.new_tokens) == ("It adds tax [1].", 192, 6)
    assert fake.paths() == ["/props", "/api/tags", "/v1/models", "/v1/completions", "/v1/chat/completions"]
    completion_body, chat_body = (s.body for s in fake.seen[-2:])
    assert completion_body is not None and "suffix" not in completion_body and completion_body["logprobs"] == 1
    assert chat_body is not None and chat_body["messages"] == MESSAGES


@pytest.mark.parametrize(
    ("name", "message"),
    [("model_not_found", r"HTTP 404: .*The model `Qwen/Qwen2.5-Coder-7B` does not exist"),
     ("context_too_long", r"HTTP 400: .*maximum context length is 32768 tokens"),
     ("error_mid_stream", r"/v1/completions: the server: Internal server error")],
)  # fmt: skip
def test_vllm_errors_are_named(name: str, message: str) -> None:
    with fake_server(recorded(VLLM, "models", name)) as fake:
        engine = RemoteEngine("openai", fake.url)
        try:
            with pytest.raises(EngineUnavailable, match=message):
                engine.complete(edit(), lambda: False)
        finally:
            engine.close()


def test_ollama_through_the_remote_engine() -> None:
    with fake_server(recorded(OLLAMA, "tags", "generate_raw_stream", "chat_stream")) as fake:
        engine = RemoteEngine("auto", fake.url, chat=True)
        try:
            assert (engine.dialect, engine.model) == ("ollama", "qwen2.5-coder:1.5b-base"), "the first model listed"
            done = engine.complete(edit(), lambda: False)
            answer = engine.chat(ChatRequest(session_id="waferline/ask", messages=MESSAGES), lambda: False)
        finally:
            engine.close()
    assert (done.text, done.prefilled_tokens, done.reused_tokens, done.new_tokens) == ("a + b", 9, 0, 4)
    assert answer.text == "It adds tax [1]."
    generate = next(s.body for s in fake.seen if s.path == "/api/generate")
    assert generate is not None and generate["raw"] is True and generate["prompt"].startswith("<|fim_prefix|>")


@pytest.mark.parametrize(
    ("name", "message"),
    [("model_not_found", r"HTTP 404: .*model 'qwen2.5-coder:7b' not found"),
     ("error_mid_stream", r"the server: an error was encountered while running the model")],
)  # fmt: skip
def test_ollama_errors_are_named(name: str, message: str) -> None:
    with fake_server(recorded(OLLAMA, "tags", name)) as fake:
        engine = RemoteEngine("ollama", fake.url, model="qwen2.5-coder:1.5b-base")
        try:
            with pytest.raises(EngineUnavailable, match=message):
                engine.complete(edit(), lambda: False)
        finally:
            engine.close()


def test_a_model_ollama_does_not_have_is_named_at_start() -> None:
    with (
        fake_server(recorded(OLLAMA, "tags")) as fake,
        pytest.raises(
            RemoteError, match=r"has no model 'llama3:8b' \(it has qwen2.5-coder:1.5b-base, qwen2.5-coder:7b"
        ),
    ):
        RemoteEngine("ollama", fake.url, model="llama3:8b")
