"""`waferline serve` with a remote engine (`engineUrl`) over LSP: the shipped model exported as GGUF and served by the
real llama-server (built by `make test`), through the llama-server and OpenAI dialects; and a server that is not
there, reported as an engine that could not load, with every request still answered."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from llama_cpp_support import llama_cpp_bin, llama_server  # tests/support (on sys.path: tests/conftest.py)
from lsp_support import Typist, inline, lsp_session, open_doc, stats

from waferline.engine.checkpoint import DEFAULT_MODEL_DIR
from waferline.engine.gguf.write import export_gguf

pytestmark = pytest.mark.asyncio

URI = "file:///tmp/waferline-test/calc.py"
SOURCE = "import math\n\n\ndef area(r):\n    return \n\n\ndef perimeter(r):\n    return 2 * math.pi * r\n"
# No confidence gate (it is fitted for the local engine's probabilities) and a generous budget on a loaded machine.
OPTIONS = {"minConfidence": 0, "minConfidenceInvoked": 0, "timeBudgetMs": 3000, "precompute": False}


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    llama_cpp_bin()
    model = export_gguf(DEFAULT_MODEL_DIR, tmp_path_factory.mktemp("lsp-remote") / "waferline-mini-f32.gguf", "f32")
    with llama_server(model, "-np", "2") as url:
        yield url


@pytest.mark.parametrize("dialect", ["llama-server", "openai"])
async def test_typing_through_a_remote_engine(server_url: str, dialect: str) -> None:
    options = {**OPTIONS, "engineUrl": server_url, "engineDialect": dialect, "engineFimTemplate": "waferline"}
    async with lsp_session("vscode", options) as client:
        open_doc(client, URI, SOURCE)
        typist = Typist(client, URI, 4, 11)
        answered = 0
        for ch in "math.pi * ":
            typist.type(ch)
            items = await inline(client, URI, typist.position, invoked=True)
            answered += bool(items)
            for item in items:
                assert item.range is not None and item.range.start == typist.position
        s = await stats(client)
        assert dialect in s["engine"] and server_url in s["engine"], s["engine"]
        assert s["requests"] == 10 and s["errors"] == 0 and s["generations"] >= 1
        assert answered >= 1, f"the remote model showed nothing in ten keystrokes: {s}"
        assert s["kv_reuse"] is not None and s["kv_reuse"] > 0.5, "a keystroke finds its prompt in the server's cache"


async def test_an_engine_url_nobody_answers_is_reported_and_requests_still_answered(tmp_path: Path) -> None:
    options = {**OPTIONS, "engineUrl": "http://127.0.0.1:9", "engineDialect": "llama-server"}
    async with lsp_session("vscode", options) as client:
        open_doc(client, URI, SOURCE)
        assert await inline(client, URI, Typist(client, URI, 4, 11).position, invoked=True) == []
        messages = [m.message for m in client.messages]  # window/showMessage
        assert any("could not load the model" in m and "cannot connect" in m for m in messages), messages
        s = await stats(client)
        assert "failed to load" in s["engine"] and s["requests"] == 1
