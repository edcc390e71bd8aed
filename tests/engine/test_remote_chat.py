"""Chat requests to remote engines: OpenAI's streamed `/v1/chat/completions`, Ollama's `/api/chat`, and
llama-server's `/completion` with the chat template applied by waferline; against a local fake HTTP server and the
real llama-server (whose own rendering of its template, `/apply-template`, the one waferline writes must equal)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from fake_http import Reply, fake_server, json_reply, ndjson, sse  # tests/support (on sys.path: tests/conftest.py)
from llama_cpp_support import llama_server, post, shipped_model_gguf

from waferline.engine.api import ChatRequest, ChatUnsupported
from waferline.engine.chat import ChatTemplate, end_of_turn, render_chat_text
from waferline.engine.remote.engine import RemoteEngine, fit_messages
from waferline.engine.remote.llama_server import LlamaServer

MESSAGES = [{"role": "system", "content": "You answer in one line."}, {"role": "user", "content": "What is 2 + 2?"}]
CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + "
    "'\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
PROPS = {"default_generation_settings": {"n_ctx": 1024}, "total_slots": 1, "model_path": "/m/instruct.gguf",
         "chat_template": CHATML, "bos_token": "<s>", "eos_token": "</s>"}  # fmt: skip


def chat_request(**kw: object) -> ChatRequest:
    return ChatRequest(session_id="waferline/ask", messages=MESSAGES, time_budget_s=None, **kw)  # type: ignore[arg-type]


def test_openai_chat_streams_the_deltas_and_reads_the_usage() -> None:
    stream = sse(
        {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                                         "finish_reason": None}]},
        {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": "4"},
                                                         "finish_reason": None}]},
        {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {"object": "chat.completion.chunk", "choices": [], "usage": {"prompt_tokens": 21, "completion_tokens": 1}},
    )  # fmt: skip
    routes = {("GET", "/v1/models"): json_reply({"data": [{"id": "instruct"}]}),
              ("POST", "/v1/chat/completions"): Reply(chunks=stream, content_type="text/event-stream")}  # fmt: skip
    with fake_server(routes) as fake:  # type: ignore[arg-type]
        engine = RemoteEngine("openai", fake.url, chat=True)
        try:
            done = engine.chat(chat_request(max_new_tokens=8), lambda: False)
        finally:
            engine.close()
    assert (done.text, done.stop_reason, done.prompt_tokens, done.new_tokens) == ("4", "stop_token", 21, 1)
    body = fake.seen[-1].body
    assert body is not None and body["messages"] == MESSAGES and body["stream"] is True and body["max_tokens"] == 8
    assert body["model"] == "instruct" and "prompt" not in body


def test_ollama_chat_reads_the_message_pieces() -> None:
    lines = ndjson(
        {"model": "m", "message": {"role": "assistant", "content": "fo"}, "done": False},
        {"model": "m", "message": {"role": "assistant", "content": "ur"}, "done": False},
        {"model": "m", "message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "stop",
         "prompt_eval_count": 30, "eval_count": 2},
    )  # fmt: skip
    routes = {("GET", "/api/tags"): json_reply({"models": [{"name": "m:latest"}]}),
              ("POST", "/api/chat"): Reply(chunks=lines, content_type="application/x-ndjson")}  # fmt: skip
    with fake_server(routes) as fake:  # type: ignore[arg-type]
        engine = RemoteEngine("ollama", fake.url, model="m", chat=True)
        pieces: list[str] = []
        try:
            done = engine.chat(chat_request(on_text=pieces.append), lambda: False)
        finally:
            engine.close()
    assert (done.text, done.prefilled_tokens, done.new_tokens) == ("four", 30, 2)
    assert pieces == ["fo", "ur"], "each piece passed on as it came (a streamed ask)"
    body = fake.seen[-1].body
    assert body is not None and body["messages"] == MESSAGES and "raw" not in body  # Ollama applies its template


def test_llama_server_chat_applies_the_template_props_reports() -> None:
    events = sse({"content": "4", "stop": False}, {"content": "", "stop": True, "stop_type": "word",
                                                   "timings": {"cache_n": 0, "prompt_n": 20, "predicted_n": 1}},
                 done=False)  # fmt: skip
    routes = {("GET", "/props"): json_reply(PROPS),
              ("POST", "/completion"): Reply(chunks=events, content_type="text/event-stream")}  # fmt: skip
    with fake_server(routes) as fake:  # type: ignore[arg-type]
        engine = RemoteEngine("llama-server", fake.url, chat=True)
        try:
            done = engine.chat(chat_request(), lambda: False)
            assert engine.describe().can_chat
        finally:
            engine.close()
    assert (done.text, done.stop_reason) == ("4", "stop_string")
    body = fake.seen[-1].body
    assert body is not None and body["prompt"] == (
        "<|im_start|>system\nYou answer in one line.<|im_end|>\n<|im_start|>user\nWhat is 2 + 2?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert body["stop"] == ["<|im_end|>", "</s>"] and body["cache_prompt"] is True and "id_slot" in body


def test_a_completion_engine_does_not_chat_and_long_messages_are_fitted() -> None:
    with fake_server({("GET", "/props"): json_reply(PROPS)}) as fake:
        engine = RemoteEngine("llama-server", fake.url)
        try:
            assert not engine.describe().can_chat
            with pytest.raises(ChatUnsupported, match="serves completions only"):
                engine.chat(chat_request(), lambda: False)
        finally:
            engine.close()
    long = [MESSAGES[0], {"role": "user", "content": "x" * 1000}]
    fitted = fit_messages(long, 500)
    assert fitted[0] == MESSAGES[0] and sum(len(m["content"]) for m in fitted) <= 500 + len("\n[...]")
    assert fitted[1]["content"].endswith("\n[...]") and fit_messages(MESSAGES, 500) == MESSAGES


def test_a_template_without_a_system_role_gets_it_in_the_first_user_message() -> None:
    strict = ("{% for m in messages %}{% if m['role'] == 'system' %}{{ raise_exception('no system role') }}{% endif %}"
              "[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}[assistant] ")  # fmt: skip
    template = ChatTemplate(strict, "<s>", "<eos>")
    assert render_chat_text(template, MESSAGES) == "[user] You answer in one line.\n\nWhat is 2 + 2?\n[assistant] "
    assert end_of_turn(template) == ["<eos>"]


# -- against the real llama-server ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    model = shipped_model_gguf(tmp_path_factory.mktemp("chat"))
    with llama_server(model) as url:
        yield url


def test_the_template_waferline_renders_is_the_one_llama_server_applies(server: str) -> None:
    async def run() -> str:
        client = LlamaServer(server)
        props = await client.probe()
        await client.aclose()
        return render_chat_text(ChatTemplate(props.chat_template, props.bos_token, props.eos_token), MESSAGES)

    assert asyncio.run(run()) == post(server + "/apply-template", {"messages": MESSAGES})["prompt"]


@pytest.mark.parametrize("dialect", ["openai", "llama-server"])
def test_a_streamed_chat_equals_the_servers_own_answer(server: str, dialect: str) -> None:
    body = {"messages": MESSAGES, "max_tokens": 12, "temperature": 0, "top_k": 1, "samplers": ["top_k"]}
    want = post(server + "/v1/chat/completions", body)["choices"][0]["message"]["content"]
    engine = RemoteEngine(dialect, server, chat=True)  # type: ignore[arg-type]
    try:
        done = engine.chat(chat_request(max_new_tokens=12), lambda: False)
    finally:
        engine.close()
    assert done.text == want and done.new_tokens > 0
