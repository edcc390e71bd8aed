"""The engine's state for the user (server/engine_state.py): one change per outage, not one per keystroke; and a
remote engine's requests through the worker: at most one upstream per document, documents side by side."""

from __future__ import annotations

import asyncio
import collections
from typing import Any

import pytest
from fake_http import Reply, fake_server, json_reply, sse  # tests/support (on sys.path: tests/conftest.py)

from waferline.engine.api import EditRequest
from waferline.engine.remote.engine import RemoteEngine
from waferline.engine.remote.http import HttpEngine
from waferline.server.engine_state import EngineHealth, Problem, outage_message
from waferline.server.stats import Stats
from waferline.server.worker import Worker

PROPS = {"default_generation_settings": {"n_ctx": 2048}, "total_slots": 4, "model_path": "/m/coder.gguf"}
# A slow answer: 40 pieces 0.05 s apart, so that requests overlap and a superseded one is cut mid-stream.
SLOW = Reply(chunks=sse(*[{"content": "x", "stop": False} for _ in range(40)],
                        {"content": "", "stop": True, "stop_type": "limit", "timings": {"prompt_n": 3}}, done=False),
             content_type="text/event-stream", pause_s=0.05)  # fmt: skip


def test_an_outage_is_one_change_and_the_return_another() -> None:
    health = EngineHealth()
    changes: list[tuple[str, Problem | None]] = []
    health.on_change = lambda route, problem: changes.append((route, problem))
    for reason in ("closed mid-answer", "cannot connect", "cannot connect"):
        health.failed("completion", reason, answered_locally=False)
    assert [(r, p.reason if p else None) for r, p in changes] == [("completion", "closed mid-answer")]
    assert health.state() == "down" and health.snapshot()["problems"] == {"completion": "cannot connect"}
    health.answered("completion")
    health.answered("completion")
    assert changes[-1] == ("completion", None) and len(changes) == 2 and health.state() == "ready"
    health.failed("chat", "timed out", answered_locally=True)
    assert health.state() == "degraded" and len(changes) == 3
    assert "chat-style work" in outage_message("chat", Problem("timed out", True))
    assert "the local model answers" in outage_message("chat", Problem("timed out", True))
    health.reset({"chat": ("down at start", False)})
    assert health.state() == "down" and len(changes) == 3, "the load reported that one already"
    health.answered("completion")
    assert health.state() == "down", "a local completion says nothing of the chat engine"


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Streams open on the client side, per document (the request's session) and in all."""
    seen: dict[str, Any] = {"open": collections.Counter(), "max": collections.Counter(), "max_total": 0}
    stream = HttpEngine.stream

    async def counting(self: HttpEngine, path: str, body: dict, parse: Any, request: Any, *a: Any, **kw: Any):  # type: ignore[no-untyped-def]
        key = request.session_id
        seen["open"][key] += 1
        seen["max"][key] = max(seen["max"][key], seen["open"][key])
        seen["max_total"] = max(seen["max_total"], sum(seen["open"].values()))
        try:
            return await stream(self, path, body, parse, request, *a, **kw)
        finally:
            seen["open"][key] -= 1

    monkeypatch.setattr(HttpEngine, "stream", counting)
    return seen


def test_one_request_upstream_per_document_and_documents_side_by_side(counted: dict[str, Any]) -> None:
    routes = {("GET", "/props"): json_reply(PROPS), ("POST", "/infill"): SLOW}

    async def until(condition) -> None:  # type: ignore[no-untyped-def]
        for _ in range(500):
            if condition():
                return
            await asyncio.sleep(0.01)
        raise AssertionError("timed out")

    async def main(url: str) -> None:
        worker = Worker(Stats())
        try:
            await worker.load(lambda: RemoteEngine("llama-server", url))

            def req(doc: str, prefix: str) -> EditRequest:
                return EditRequest(session_id=doc, prefix=prefix, suffix="", max_new_tokens=64, time_budget_s=None)

            a1 = asyncio.ensure_future(worker.complete(req("file:///a.py", "a = ")))
            b1 = asyncio.ensure_future(worker.complete(req("file:///b.py", "b = ")))
            await until(lambda: sum(counted["open"].values()) == 2)  # both documents' streams at once
            a2 = asyncio.ensure_future(worker.complete(req("file:///a.py", "a = 1")))  # a keystroke in a.py
            first, other, second = await asyncio.wait_for(asyncio.gather(a1, b1, a2), 30)
            assert first is None, "the superseded request is answered at once, its stream closed"
            assert other is not None and second is not None and other.text == second.text == "x" * 40
        finally:
            worker.close()

    with fake_server(routes) as fake:  # type: ignore[arg-type]
        asyncio.run(main(fake.url))
        assert fake.wait_for_no_streams() == 0 and fake.closed_early == 1, "the server saw the cut stream end"
    assert counted["max"]["file:///a.py"] == 1, "never two requests of a.py upstream at once"
    assert counted["max_total"] == 2
