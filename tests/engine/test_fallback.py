"""The local fallback behind a remote engine (engine/fallback.py): answers while the remote one is down, marked with
why; asks the remote one again as soon as its background probe says it is back; builds one that was down at start
again in the background; never costs a keystroke a failed connection while it is down."""

from __future__ import annotations

import concurrent.futures
import threading
import time

from fixed_engine import FixedEngine  # tests/support (on sys.path: tests/conftest.py)

from waferline.engine.api import ENGINE_LANE, ChatRequest, Completion, EditRequest, EngineInfo, EngineUnavailable
from waferline.engine.fallback import FallbackEngine


class Remote:
    """A remote engine whose answers and probe the test decides."""

    def __init__(self) -> None:
        self.up = True
        self.calls = 0
        self.checks: list[concurrent.futures.Future[bool]] = []

    def complete(self, request: EditRequest, should_cancel: object) -> Completion:
        self.calls += 1
        if not self.up:
            raise EngineUnavailable("http://remote/infill: cannot connect (is the server running?)")
        return Completion(text="remote", stop_reason="stop_token")

    def check(self) -> concurrent.futures.Future[bool]:
        future: concurrent.futures.Future[bool] = concurrent.futures.Future()
        self.checks.append(future)
        return future

    def lane(self, request: object, key: str) -> str:
        return f"remote {key}"

    def describe(self) -> EngineInfo:
        return EngineInfo("remote model", can_chat=False)

    def context_chars(self, max_new_tokens: int) -> int:
        return 10_000

    def drop_session(self, session_id: str) -> None:
        pass


def request() -> EditRequest:
    return EditRequest(session_id="file:///a.py", prefix="x = ", suffix="")


def test_down_answers_locally_with_the_reason_and_comes_back_when_the_probe_says_so() -> None:
    remote = Remote()
    engine = FallbackEngine(remote, FixedEngine("local"), check_s=0.0)
    assert engine.complete(request(), lambda: False).text == "remote"
    remote.up = False
    down = engine.complete(request(), lambda: False)
    assert down.text == "local" and down.timings["fallback"] == 1.0 and "cannot connect" in (down.unavailable or "")
    assert engine.lane(request(), "file:///a.py") == ENGINE_LANE, "while down, the local model's lane"
    calls = remote.calls
    for _ in range(3):
        assert engine.complete(request(), lambda: False).text == "local"
    assert remote.calls == calls, "no keystroke tries the server that is down"
    assert remote.checks and all(not f.done() for f in remote.checks[:1]), "a probe runs in the background"
    remote.checks[0].set_result(False)  # still down
    assert engine.complete(request(), lambda: False).text == "local"
    remote.up = True
    remote.checks[-1].set_result(True)  # back
    back = engine.complete(request(), lambda: False)
    assert (
        back.text == "remote"
        and back.unavailable is None
        and "now answered locally" not in engine.describe().description
    )


def test_one_probe_at_a_time_and_at_most_every_check_s() -> None:
    remote = Remote()
    engine = FallbackEngine(remote, FixedEngine("local"), check_s=3600.0)
    remote.up = False
    engine.complete(request(), lambda: False)
    for _ in range(5):
        engine.complete(request(), lambda: False)
    assert len(remote.checks) == 0, "the first probe waits check_s after the failure"
    engine = FallbackEngine(remote, FixedEngine("local"), check_s=0.0)
    engine.complete(request(), lambda: False)
    for _ in range(5):
        engine.complete(request(), lambda: False)
    assert len(remote.checks) == 1, "a probe that has not answered is not started again"


def test_a_remote_engine_down_at_start_is_built_again_in_the_background() -> None:
    attempts: list[float] = []
    built = threading.Event()
    remote = Remote()

    def connect() -> Remote:
        attempts.append(time.monotonic())
        if len(attempts) == 1:
            raise OSError("http://remote/props: cannot connect (is the server running?)")
        built.set()
        return remote

    engine = FallbackEngine(None, FixedEngine("local"), reason="cannot connect", connect=connect, reconnect_s=0.0)
    first = engine.complete(request(), lambda: False)
    assert first.text == "local" and "cannot connect" in (first.unavailable or "")
    deadline = time.monotonic() + 5
    while not built.is_set() and time.monotonic() < deadline:
        engine.complete(request(), lambda: False)  # each request may start an attempt; none waits for it
        time.sleep(0.01)
    assert built.is_set() and len(attempts) >= 2
    while engine.primary is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert engine.complete(request(), lambda: False).text == "remote", "no options change needed"


def test_down_at_start_without_a_fallback_fails_each_request_until_it_is_reached() -> None:
    """No local model behind the remote one: requests fail as to a remote engine that is down (the server answers
    them empty and tells the user once), and the engine is built again in the background, no options change."""
    attempts: list[float] = []
    remote = Remote()

    def connect() -> Remote:
        attempts.append(time.monotonic())
        if len(attempts) == 1:
            raise OSError("http://remote/props: cannot connect (is the server running?)")
        return remote

    engine = FallbackEngine(None, None, reason="cannot connect", connect=connect, reconnect_s=0.0)
    info = engine.describe()
    assert info.problems == {"completion": ("cannot connect", False)} and "unavailable" in info.description
    assert engine.lane(request(), "file:///a.py") == ENGINE_LANE and engine.context_chars(32) is None
    deadline = time.monotonic() + 5
    failures = 0
    while engine.primary is None and time.monotonic() < deadline:
        try:
            engine.complete(request(), lambda: False)
        except EngineUnavailable as e:
            failures += 1
            assert "cannot connect" in str(e)
        time.sleep(0.01)
    assert failures >= 1 and len(attempts) >= 2
    assert engine.complete(request(), lambda: False).text == "remote"
    assert engine.describe().description == "remote model" and engine.lane(request(), "k") == "remote k"
    engine.drop_session("file:///a.py")  # no fallback to drop it from


def test_a_reply_the_remote_engine_began_to_stream_is_not_streamed_again_by_the_fallback() -> None:
    class Failing(Remote):
        def chat(self, request: ChatRequest, should_cancel: object) -> Completion:
            assert request.on_text is not None
            request.on_text("half an ans")
            raise EngineUnavailable("http://remote/v1/chat/completions: the connection was cut")

        def describe(self) -> EngineInfo:
            return EngineInfo("remote model", can_chat=True)

    pieces: list[str] = []
    engine = FallbackEngine(Failing(), FixedEngine("local answer", chat=True), check_s=3600.0)
    ask = ChatRequest(session_id="waferline/ask", messages=[{"role": "user", "content": "q"}], on_text=pieces.append)
    done = engine.chat(ask, lambda: False)
    assert done.text == "local answer" and done.unavailable is not None
    assert pieces == ["half an ans"], "what was streamed is not followed by a second reply: the response has it whole"
    again = engine.chat(ask, lambda: False)  # the remote engine is down: the local model streams from the start
    assert again.text == "local answer" and "".join(pieces[1:]) == "local answer"
