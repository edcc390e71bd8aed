"""A model for each feature (engine/routing.py, engine/factory.py): chat-style work goes to its own engine, on a lane
of its own, while keystrokes' completions stay where they were; a remote chat engine that is down or slow never
holds up completions."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Iterator

import pytest
from fake_http import FakeServer, Reply, fake_server, json_reply, sse  # tests/support (on sys.path: tests/conftest.py)
from fixed_engine import FixedEngine

from waferline.engine.api import ENGINE_LANE, ChatRequest, EditRequest, EngineUnavailable
from waferline.engine.factory import build_engine
from waferline.engine.fallback import FallbackEngine
from waferline.engine.routing import RoutedEngine
from waferline.server.model_tasks import ASK_KEY, Budget, chat, infill
from waferline.server.options import Options
from waferline.server.stats import Stats
from waferline.server.worker import Worker

TEMPLATE = "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}<assistant>"
PROPS = {"default_generation_settings": {"n_ctx": 2048}, "total_slots": 2, "model_path": "/m/big-instruct.gguf",
         "chat_template": TEMPLATE}  # fmt: skip
ANSWER = Reply(chunks=sse({"content": "remote", "stop": False},
                          {"content": "", "stop": True, "stop_type": "eos", "timings": {"prompt_n": 9}}, done=False),
               content_type="text/event-stream")  # fmt: skip


class Chatty(FixedEngine):
    """The test double that also chats (with its fixed text)."""

    def chat(self, request: ChatRequest, should_cancel):  # type: ignore[no-untyped-def]
        return self.complete(EditRequest(session_id=request.session_id, prefix="", suffix=""), should_cancel)


@pytest.fixture
def remote() -> Iterator[FakeServer]:
    release = threading.Event()
    release.set()

    def held(_body: object) -> Reply:
        release.wait(10)
        return ANSWER

    routes = {("GET", "/props"): json_reply(PROPS), ("POST", "/completion"): held, ("POST", "/infill"): held}
    with fake_server(routes) as fake:  # type: ignore[arg-type]
        fake.release = release  # type: ignore[attr-defined]
        yield fake
        release.set()


def test_routes_by_request_and_names_each_engines_lane() -> None:
    completion, chat_engine = FixedEngine("typed"), Chatty("planned")
    routed = RoutedEngine(completion, chat_engine)
    edit = EditRequest(session_id="file:///a.py", prefix="x = ", suffix="")
    task = dataclasses.replace(edit, route="chat")
    assert routed.complete(edit, lambda: False).text == "typed"
    assert routed.complete(task, lambda: False).text == "planned"
    assert routed.chat(ChatRequest(session_id=ASK_KEY, messages=[]), lambda: False).text == "planned"
    info = routed.describe()
    assert "typed" in info.description and info.chat is not None and "planned" in info.chat
    assert routed.lane(edit, "file:///a.py") == ENGINE_LANE


def test_a_remote_chat_engine_gets_chat_style_work_and_keystrokes_stay_local(remote: FakeServer) -> None:
    options = Options(chat_engine="remote", chat_engine_url=remote.url, chat_engine_dialect="llama-server")
    engine = build_engine(options)
    try:
        assert isinstance(engine, RoutedEngine) and isinstance(engine.chat_engine, FallbackEngine)
        assert engine.chat_engine.fallback is engine.completion, "the local model is loaded once, for both"
        info = engine.describe()
        assert "waferline-mini" in info.description and info.chat is not None and remote.url in info.chat
        assert info.can_chat, "a remote chat engine is taken to follow instructions"
        task = EditRequest(session_id="waferline/hover", prefix="def f():\n    '''", suffix="", route="chat")
        assert engine.complete(task, lambda: False).text == "remote"
        answer = engine.chat(ChatRequest(session_id=ASK_KEY, messages=[{"role": "user", "content": "hi"}]),
                             lambda: False)  # fmt: skip
        assert answer.text == "remote" and remote.paths("POST") == ["/infill", "/completion"]
        assert remote.seen[-1].body is not None and remote.seen[-1].body["prompt"] == "<user>hi<assistant>"
        keystroke = EditRequest(session_id="file:///a.py", prefix="def add(a, b):\n    return ", suffix="\n")
        assert engine.complete(keystroke, lambda: False).timings.get("fallback") is None
        assert len(remote.paths("POST")) == 2, "the keystroke did not go to the chat engine"
        assert engine.lane(task, "waferline/hover") != engine.lane(keystroke, "file:///a.py") == ENGINE_LANE
    finally:
        engine.close()  # type: ignore[attr-defined]


def test_a_chat_engine_down_without_fallback_leaves_completions_working() -> None:
    options = Options(chat_engine="remote", chat_engine_url="http://127.0.0.1:9", engine_fallback=False)
    engine = build_engine(options)
    assert isinstance(engine, RoutedEngine) and isinstance(engine.chat_engine, FallbackEngine)
    assert engine.chat_engine.fallback is None, "no local model behind it: built again in the background"
    info = engine.describe()
    assert info.warning is not None and "chat-style work: the remote engine is unavailable" in info.warning
    assert info.problems["chat"][1] is False and not info.can_chat
    with pytest.raises(EngineUnavailable, match="cannot connect"):
        engine.chat(ChatRequest(session_id=ASK_KEY, messages=[]), lambda: False)
    keystroke = EditRequest(session_id="file:///a.py", prefix="def add(a, b):\n    return ", suffix="\n")
    assert engine.complete(keystroke, lambda: False).stop_reason != "unavailable"


def test_options_that_name_the_same_local_model_build_one_engine() -> None:
    assert not isinstance(build_engine(Options(chat_engine="local")), RoutedEngine)
    with pytest.raises(ValueError, match="chatEngineUrl is not set"):
        build_engine(Options(chat_engine="remote"))


def test_a_slow_remote_chat_does_not_hold_up_keystrokes(remote: FakeServer) -> None:
    """The remote answer is held back by the fake server until the keystroke's completion is in: on one lane the
    keystroke would wait for it (and this test would time out)."""
    from waferline.engine.remote.engine import RemoteEngine

    remote.release.clear()  # type: ignore[attr-defined]

    async def main() -> None:
        stats = Stats()
        worker = Worker(stats)
        try:
            await worker.load(lambda: RoutedEngine(FixedEngine("typed"), RemoteEngine("llama-server", remote.url,
                                                                                      chat=True)))  # fmt: skip
            asking = asyncio.ensure_future(chat(worker, ASK_KEY, [{"role": "user", "content": "why?"}], Budget(8, 5)))
            summary = asyncio.ensure_future(infill(worker, "waferline/hover", "def f():", "", Budget(8, 5), idle=True))
            while len(remote.paths("POST")) < 2:  # both remote requests reach the server, side by side
                await asyncio.sleep(0.01)
            typed = await asyncio.wait_for(
                worker.complete(EditRequest(session_id="file:///a.py", prefix="x = ", suffix="")), 5
            )
            assert typed is not None and typed.text == "typed" and not asking.done() and not summary.done()
            remote.release.set()  # type: ignore[attr-defined]
            answer, written = await asyncio.wait_for(asyncio.gather(asking, summary), 10)
            assert answer is not None and answer.text == "remote" and written is not None and written.text == "remote"
            assert stats.chat_generations == 2 and stats.generations == 3
        finally:
            worker.close()

    asyncio.run(main())
