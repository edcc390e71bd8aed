"""A remote engine that dies and comes back, end to end through LSP with the real llama-server (built by `make test`):
killed while it streams an answer, the user is told once (`window/showMessage`), `waferline/stats` and the
clients' `waferline/engineState` say it is down, the keystrokes meanwhile are answered (empty, or by the local model
with the fallback); started again on the same port, it is used again without restarting waferline."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from llama_cpp_support import llama_server, server_pid, shipped_model_gguf  # tests/support (on sys.path)
from lsp_support import Typist, as_dict, inline, lsp_session, open_doc, stats
from pytest_lsp import LanguageClient

pytestmark = pytest.mark.asyncio

URI = "file:///tmp/waferline-test/shapes.py"
SOURCE = "import math\n\n\ndef area(r):\n    return \n\n\ndef perimeter(r):\n    return 2 * math.pi * r\n"
OPTIONS = {"minConfidence": 0, "minConfidenceInvoked": 0, "precompute": False, "timeBudgetMs": 30_000,
           "maxTokens": 512, "engineDialect": "llama-server", "engineFimTemplate": "waferline"}  # fmt: skip


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return shipped_model_gguf(tmp_path_factory.mktemp("recovery"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def processing(url: str) -> bool:
    """Whether one of the llama-server's slots is decoding now."""
    try:
        with urllib.request.urlopen(url + "/slots", timeout=1) as r:
            return any(s.get("is_processing") for s in json.loads(r.read()))
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


async def kill_mid_stream(client: LanguageClient, typist: Typist, url: str) -> bool:
    """Type until a keystroke's request is being decoded, then SIGKILL the server; True when it was mid-stream."""
    for ch in " math.pi * r ** 2 ":
        typist.type(ch)
        request = asyncio.ensure_future(inline(client, URI, typist.position, invoked=True))
        while not request.done():
            if processing(url):
                os.kill(server_pid(url), signal.SIGKILL)
                await request  # answered all the same (empty)
                return True
            await asyncio.sleep(0.002)
    os.kill(server_pid(url), signal.SIGKILL)
    return False


def watch_engine_state(client: LanguageClient) -> list[dict[str, Any]]:
    states: list[dict[str, Any]] = []

    @client.feature("waferline/engineState")
    def engine_state(params: Any) -> None:
        states.append(as_dict(params))

    return states


@pytest.mark.parametrize("fallback", [False, True], ids=["no-fallback", "local-fallback"])
async def test_killed_mid_stream_reported_once_then_used_again_once_back(model: Path, fallback: bool) -> None:
    port = free_port()
    async with contextlib.AsyncExitStack() as stack:
        with llama_server(model, "-np", "2", port=port) as url:
            options = {**OPTIONS, "engineUrl": url, "engineFallback": fallback}
            client = await stack.enter_async_context(lsp_session("vscode", options))
            states = watch_engine_state(client)
            open_doc(client, URI, SOURCE)
            typist = Typist(client, URI, 4, 11)
            typist.type("m")
            await inline(client, URI, typist.position, invoked=True)
            before = await stats(client)
            assert before["engine_state"] == "ready" and before["generations"] == 1, before
            assert await kill_mid_stream(client, typist, url), "no keystroke's request was caught mid-stream"
        # The server is gone: a few more keystrokes, each answered, one message for all of them.
        for ch in "ath":
            typist.type(ch)
            await inline(client, URI, typist.position, invoked=True)
        down = await stats(client)
        told = [m.message for m in client.messages if "not answering" in m.message]
        assert len(told) == 1, [m.message for m in client.messages]
        assert url in told[0] and ("the local model answers" in told[0]) == fallback, told[0]
        assert down["engine_state"] == ("degraded" if fallback else "down"), down
        assert url in as_dict(down["engine_problems"])["completion"]
        if fallback:
            assert down["fallback_answers"] >= 3 and down["errors"] == 0
        else:
            assert down["errors"] >= 1
        assert states and states[-1]["state"] == down["engine_state"], states

        with llama_server(model, "-np", "2", port=port):  # back, on the same URL
            served = await served_remotely_again(client, typist, fallback)
            back = await stats(client)
            assert back["engine_state"] == "ready" and states[-1]["state"] == "ready", (back, states[-1:])
            assert fallback or served == 1, f"{served} keystrokes to get back"
            assert any("answers again" in m.message for m in client.log_messages)
            assert len([m for m in client.messages if "not answering" in m.message]) == 1, "no second message"


async def served_remotely_again(client: LanguageClient, typist: Typist, fallback: bool) -> int:
    """Keystrokes until one is answered by the remote engine again: the first one without the fallback (each
    request tries the server); with it, once the background probe (every second at most) has seen it back."""
    for n in range(1, 21):
        before = await stats(client)
        typist.type(".")
        await inline(client, URI, typist.position, invoked=True)
        after = await stats(client)
        remote = (
            after["generations"] > before["generations"] and after["fallback_answers"] == before["fallback_answers"]
        )
        if remote and after["errors"] == before["errors"]:
            return n
        assert fallback, f"the first request after the restart failed: {after['engine_problems']}"
        await asyncio.sleep(0.3)
    raise AssertionError("the remote engine was not used again")
