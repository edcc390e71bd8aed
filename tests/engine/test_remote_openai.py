"""The OpenAI-compatible dialect (engine/remote/openai.py): the FIM prompt written as text, against llama-server's
real `/v1/completions`, and the chunk layout OpenAI documents (the one vLLM streams: legacy `token_logprobs`, the
usage in a chunk of its own after the finish reason) through a mock transport."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import httpx
import pytest
from llama_cpp_support import llama_server, post, shipped_model_gguf  # tests/support (on sys.path: tests/conftest.py)

from waferline.engine.api import EditRequest
from waferline.engine.checkpoint import DEFAULT_MODEL_DIR, load_model
from waferline.engine.remote.openai import OpenAICompletions, RemoteError, fim_text

PREFIX = "def add(a, b):\n    return "
SUFFIX = "\n\n\nprint(add(1, 2))\n"


def request(**kw: object) -> EditRequest:
    return EditRequest(session_id="file:///a.py", prefix=PREFIX, suffix=SUFFIX, time_budget_s=None, **kw)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    model = shipped_model_gguf(tmp_path_factory.mktemp("openai"))
    with llama_server(model) as url:
        yield url


def test_the_fim_text_tokenizes_as_the_engines_own_prompt() -> None:
    lm = load_model(DEFAULT_MODEL_DIR)
    for order in ("psm", "spm"):
        text = fim_text("waferline", PREFIX, SUFFIX, order)  # type: ignore[arg-type]
        assert lm.tokenizer.backend_tokenizer.encode(text, add_special_tokens=False).ids == lm.fim.build(
            PREFIX,
            SUFFIX,
            order,  # type: ignore[arg-type, union-attr]
        )
    assert fim_text("deepseek-coder", "P", "S").startswith("<｜begin▁of▁sentence｜><｜fim▁begin｜>P")
    with pytest.raises(ValueError, match="unknown FIM template"):
        fim_text("gpt-9", "P", "S")


def test_against_llama_servers_v1_completions(server: str) -> None:
    async def run() -> tuple:
        engine = OpenAICompletions(server, family="waferline")
        model = await engine.probe()
        first = await engine.complete(request(max_new_tokens=12))
        second = await engine.complete(request(max_new_tokens=12))
        await engine.aclose()
        return model, first, second

    model, first, second = asyncio.run(run())
    assert model.endswith(".gguf")
    body = {"model": model, "prompt": fim_text("waferline", PREFIX, SUFFIX), "max_tokens": 12, "temperature": 0}
    assert first.text == post(server + "/v1/completions", body)["choices"][0]["text"]
    assert first.new_tokens == len(first.token_logprobs) > 0
    assert second.reused_tokens > 0 and second.prompt_tokens >= second.reused_tokens, "the repeated prompt is cached"


def chunks(*objects: dict) -> bytes:
    return b"".join(b"data: " + json.dumps(o).encode() + b"\n\n" for o in objects) + b"data: [DONE]\n\n"


OPENAI_STREAM = chunks(
    {"id": "c1", "object": "text_completion", "choices": [
        {"index": 0, "text": "a", "logprobs": {"tokens": ["a"], "token_logprobs": [-0.5]}, "finish_reason": None}]},
    {"id": "c1", "object": "text_completion", "choices": [
        {"index": 0, "text": " + b", "logprobs": {"tokens": [" +", " b"], "token_logprobs": [-0.25, -0.125]},
         "finish_reason": "stop"}]},
    {"id": "c1", "object": "text_completion", "choices": [],
     "usage": {"prompt_tokens": 20, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 16}}},
)  # fmt: skip


def mock(stream: bytes, seen: list[dict] | None = None, models: tuple[str, ...] = ("qwen-coder",)) -> OpenAICompletions:
    def handler(req: httpx.Request) -> httpx.Response:
        if req.url.path == "/v1/models":
            return httpx.Response(200, json={"object": "list", "data": [{"id": m} for m in models]})
        if seen is not None:
            seen.append(json.loads(req.content))
        return httpx.Response(200, content=stream, headers={"content-type": "text/event-stream"})

    return OpenAICompletions("http://fake", transport=httpx.MockTransport(handler))


def test_the_documented_chunk_layout_with_usage_after_the_finish() -> None:
    seen: list[dict] = []

    async def run():  # type: ignore[no-untyped-def]
        engine = mock(OPENAI_STREAM, seen)
        done = await engine.complete(request(max_new_tokens=8, stop_strings=("\n\n",)))
        await engine.aclose()
        return done

    done = asyncio.run(run())
    assert (done.text, done.stop_reason, done.token_logprobs) == ("a + b", "stop_token", [-0.5, -0.25, -0.125])
    assert (done.prompt_tokens, done.reused_tokens, done.prefilled_tokens, done.new_tokens) == (20, 16, 4, 3)
    (body,) = seen
    assert body["model"] == "qwen-coder" and "suffix" not in body and body["stream"] is True
    assert body["prompt"] == f"<|fim_prefix|>{PREFIX}<|fim_suffix|>{SUFFIX}<|fim_middle|>"
    assert "<|endoftext|>" in body["stop"] and "\n\n" in body["stop"]


def test_the_stop_rule_gives_up_the_stream_and_a_missing_model_is_named() -> None:
    async def run() -> None:
        engine = mock(OPENAI_STREAM)
        done = await engine.complete(request(should_stop=lambda text: text == "a"))
        assert (done.text, done.stop_reason) == ("a", "stop_rule")
        await engine.aclose()
        wrong = OpenAICompletions("http://fake", model="other", transport=mock(OPENAI_STREAM)._client._transport)
        with pytest.raises(RemoteError, match="does not serve 'other'"):
            await wrong.probe()
        await wrong.aclose()

    asyncio.run(run())
