"""Dialect probing (engine/remote/probe.py) and the fallback to the next dialect (engine/remote/engine.py) against a
local fake HTTP server (tests/support/fake_http.py), and `auto` against the real llama-server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fake_http import FakeServer, Reply, fake_server, json_reply, sse  # tests/support (on sys.path: tests/conftest.py)
from llama_cpp_support import llama_server, shipped_model_gguf

from waferline.engine.api import EditRequest
from waferline.engine.remote.engine import EngineUnavailable, RemoteEngine
from waferline.engine.remote.stream import RemoteError

PROPS = {"default_generation_settings": {"n_ctx": 2048}, "total_slots": 2, "model_path": "/m/coder.gguf"}
MODELS = {"object": "list", "data": [{"id": "coder", "object": "model"}]}
TAGS = {"models": [{"name": "qwen2.5-coder:1.5b-base", "model": "qwen2.5-coder:1.5b-base"}]}
INFILL = Reply(chunks=sse({"content": "a", "stop": False},
                          {"content": "", "stop": True, "stop_type": "eos",
                           "timings": {"cache_n": 3, "prompt_n": 2, "predicted_n": 1}}, done=False),
               content_type="text/event-stream")  # fmt: skip
V1_COMPLETIONS = Reply(chunks=sse({"choices": [{"index": 0, "text": "b", "finish_reason": None}]},
                                  {"choices": [{"index": 0, "text": "", "finish_reason": "stop"}]}),
                       content_type="text/event-stream")  # fmt: skip
NOT_FOUND = json_reply({"error": {"code": 404, "message": "File Not Found"}}, 404)


def request() -> EditRequest:
    return EditRequest(session_id="file:///a.py", prefix="x = ", suffix="\n", time_budget_s=None)


@pytest.fixture
def llama_like() -> Iterator[FakeServer]:
    """A llama-server as the probes see it: /props, /v1/models, its two completion endpoints."""
    routes = {("GET", "/props"): json_reply(PROPS), ("GET", "/v1/models"): json_reply(MODELS),
              ("POST", "/infill"): INFILL, ("POST", "/v1/completions"): V1_COMPLETIONS}  # fmt: skip
    with fake_server(routes) as fake:  # type: ignore[arg-type]
        yield fake


def test_auto_finds_llama_server_first_and_the_openai_layout_behind_it(llama_like: FakeServer) -> None:
    engine = RemoteEngine("auto", llama_like.url)
    try:
        assert engine.dialect == "llama-server" and engine.context_tokens == 2048 and engine.model == "/m/coder.gguf"
        assert [c.dialect for c in engine._chain] == ["llama-server", "openai"]
        assert engine.complete(request(), lambda: False).text == "a"
        assert llama_like.paths() == ["/props", "/api/tags", "/v1/models", "/infill"]
        assert "via llama-server at" in engine.describe().description
    finally:
        engine.close()


def test_auto_finds_ollama_before_its_openai_layer_and_takes_its_first_model() -> None:
    routes = {("GET", "/api/tags"): json_reply(TAGS), ("GET", "/v1/models"): json_reply(MODELS)}
    with fake_server(routes) as fake:  # type: ignore[arg-type]
        engine = RemoteEngine("auto", fake.url)
        try:
            assert (engine.dialect, engine.model) == ("ollama", "qwen2.5-coder:1.5b-base")
            assert [c.dialect for c in engine._chain] == ["ollama", "openai"]
        finally:
            engine.close()


def test_auto_finds_an_openai_compatible_server() -> None:
    with fake_server({("GET", "/v1/models"): json_reply(MODELS)}) as fake:
        engine = RemoteEngine("auto", fake.url)
        try:
            assert (engine.dialect, engine.model) == ("openai", "coder")
        finally:
            engine.close()


def test_a_server_that_answers_no_probe_is_named_with_each_answer() -> None:
    with (
        fake_server({("GET", "/api/tags"): json_reply({"tags": []})}) as fake,
        pytest.raises(RemoteError, match="does not answer as llama-server, Ollama or an OpenAI") as e,
    ):
        RemoteEngine("auto", fake.url)
    message = str(e.value)
    assert "(/props answered HTTP 404" in message and "; /v1/models answered HTTP 404" in message
    assert "; /api/tags is not Ollama's (no models list)" in message


def test_an_unreachable_server_stops_the_probing() -> None:
    with pytest.raises(RemoteError, match=r"/props: cannot connect") as e:
        RemoteEngine("auto", "http://127.0.0.1:9")  # port 9: discard, nothing listens
    assert not e.value.reached


@pytest.mark.parametrize("status", [404, 501, 400])
def test_a_refused_endpoint_falls_back_to_the_next_dialect_for_the_session(
    llama_like: FakeServer, status: int
) -> None:  # fmt: skip
    message = "Infill is not supported by this model" if status != 404 else "File Not Found"
    llama_like.routes[("POST", "/infill")] = json_reply({"error": {"code": status, "message": message}}, status)
    engine = RemoteEngine("auto", llama_like.url)
    try:
        assert engine.complete(request(), lambda: False).text == "b"
        assert engine.complete(request(), lambda: False).text == "b"
        assert engine.dialect == "openai"
        posts = llama_like.paths("POST")
        assert posts == ["/infill", "/v1/completions", "/v1/completions"], "the refusal is remembered"
    finally:
        engine.close()


def test_a_prompt_too_long_for_the_context_is_the_requests_fault_not_the_dialects(llama_like: FakeServer) -> None:
    too_long = {"error": {"code": 400, "message": "the request exceeds the available context size", "type":
                          "exceed_context_size_error"}}  # fmt: skip
    llama_like.routes[("POST", "/infill")] = json_reply(too_long, 400)
    engine = RemoteEngine("auto", llama_like.url)
    try:
        with pytest.raises(EngineUnavailable, match=r"HTTP 400: .*context size"):
            engine.complete(request(), lambda: False)
        assert engine.dialect == "llama-server" and llama_like.paths("POST") == ["/infill"]
    finally:
        engine.close()


def test_a_named_dialect_has_nothing_to_fall_back_to(llama_like: FakeServer) -> None:
    llama_like.routes[("POST", "/infill")] = NOT_FOUND
    engine = RemoteEngine("llama-server", llama_like.url)
    try:
        assert [c.dialect for c in engine._chain] == ["llama-server"] and llama_like.paths() == ["/props"]
        with pytest.raises(EngineUnavailable, match="/infill answered HTTP 404"):
            engine.complete(request(), lambda: False)
    finally:
        engine.close()


def test_auto_against_the_real_llama_server(tmp_path_factory: pytest.TempPathFactory) -> None:
    model = shipped_model_gguf(tmp_path_factory.mktemp("probe"))
    with llama_server(model) as url:
        engine = RemoteEngine("auto", url, fim_template="waferline")
        try:
            assert [c.dialect for c in engine._chain] == ["llama-server", "openai"]  # no /api/tags on llama-server
            assert engine.model.endswith(".gguf") and engine.context_tokens > 0
            done = engine.complete(
                EditRequest(session_id="s", prefix="def add(a, b):\n    return ", suffix="\n", time_budget_s=None,
                            max_new_tokens=4), lambda: False,
            )  # fmt: skip
            assert done.text and done.new_tokens > 0
        finally:
            engine.close()
