"""A model for each feature, end to end through LSP: chat-style work (a hover summary, `waferline/ask`, a code action)
routed to the real llama-server (built by `make test`) serving the shipped model exported as GGUF, while inline
completions stay with the local model; `waferline/stats` names both engines and counts the chat-style runs, and the
llama-server's own counters show that it, not the local model, wrote them."""

from __future__ import annotations

import asyncio
import urllib.request
from pathlib import Path

import pytest
from llama_cpp_support import llama_server, shipped_model_gguf  # tests/support (on sys.path: tests/conftest.py)
from lsp_support import as_dict, inline, open_doc, stats
from lsprotocol import types
from repo_support import copy_fixture, open_file, position_of, repo_session, wait_indexed

pytestmark = pytest.mark.asyncio

OPTIONS = {"minConfidence": 0, "minConfidenceInvoked": 0, "timeBudgetMs": 3000, "precompute": False,
           "askMaxTokens": 16, "askTimeBudgetMs": 5000, "actionMaxTokens": 16, "actionTimeBudgetMs": 5000}  # fmt: skip


def decode_calls(url: str) -> int:
    """The llama-server's count of `llama_decode` calls so far (`--metrics`): any request it serves adds to it."""
    with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("llamacpp:n_decode_total "):
                return int(float(line.split()[1]))
    raise AssertionError("no llamacpp:n_decode_total in /metrics")


async def until(condition, timeout_s: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    for _ in range(int(timeout_s / 0.1)):
        if await condition():
            return
        await asyncio.sleep(0.1)
    raise AssertionError("timed out")


async def test_chat_style_work_goes_to_the_remote_engine_and_keystrokes_stay_local(tmp_path: Path) -> None:
    model = shipped_model_gguf(tmp_path)
    root = copy_fixture(tmp_path)
    with llama_server(model, "-np", "2", "--metrics") as url:
        options = {**OPTIONS, "chatEngine": "remote", "chatEngineUrl": url, "chatEngineDialect": "llama-server",
                   "chatEngineFimTemplate": "waferline"}  # fmt: skip
        async with repo_session(root, tmp_path / "cache", options) as client:
            await wait_indexed(client)
            path = root / "shop" / "checkout.py"
            uri = open_file(client, path)
            text = path.read_text()

            async def loaded() -> bool:
                return (await stats(client))["engine"] != "no engine loaded"

            await until(loaded)
            s = await stats(client)
            assert "waferline-mini" in s["engine"] and url not in s["engine"], s["engine"]
            assert url in s["chat_engine"] and "llama-server" in s["chat_engine"], s["chat_engine"]

            # A keystroke's completion: the local model, the llama-server decodes nothing.
            before = decode_calls(url)
            typed = (root / "shop" / "area.py").as_uri()
            open_doc(client, typed, "import math\n\n\ndef area(r):\n    return math.pi * \n")
            await inline(client, typed, types.Position(line=4, character=len("    return math.pi * ")), invoked=True)
            s = await stats(client)
            assert s["generations"] >= 1 and s["chat_generations"] == 0 and s["fallback_answers"] == 0
            assert decode_calls(url) == before, "the inline completion did not go to the remote engine"

            # A hover summary (fill-in-the-middle, written while idle) goes to the remote engine.
            hover = types.HoverParams(text_document=types.TextDocumentIdentifier(uri=uri),
                                      position=position_of(text, "def checkout", 4))  # fmt: skip
            assert await client.text_document_hover_async(hover) is not None

            async def summary_written() -> bool:
                return bool((await stats(client))["chat_generations"] >= 1)

            await until(summary_written)
            assert decode_calls(url) > before, "the llama-server wrote the summary"

            # waferline/ask: the remote chat engine is taken to follow instructions, so it writes the answer.
            asked = as_dict(await client.protocol.send_request_async("waferline/ask", {"question": "What does "
                                                                                       "`apply_tax` do?"}))  # fmt: skip
            assert asked["model"] == "instruction", asked.get("markdown")
            after_ask = await stats(client)
            assert after_ask["chat_generations"] >= 2

            # A code action (write a docstring) also runs on the remote engine, and the rewrite is offered.
            params = types.CodeActionParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                range=types.Range(
                    start=position_of(text, "basket = Basket()"),
                    end=position_of(text, "basket = Basket()", len("basket = Basket()")),
                ),
                context=types.CodeActionContext(diagnostics=[]),
            )
            # The rewrite carries a command, which the test client reads as a Command rather than a CodeAction.
            offered = {a.title.split(" for ")[0]: a for a in await client.text_document_code_action_async(params) or []}
            assert "waferline: write a docstring" in offered, list(offered)
            assert "waferline: rewrite the selection as instructed…" in offered, list(offered)
            docstring = offered["waferline: write a docstring"]
            assert isinstance(docstring, types.CodeAction)
            await client.code_action_resolve_async(docstring)
            s = await stats(client)
            assert s["chat_generations"] >= after_ask["chat_generations"] + 1 and s["errors"] == 0, s
            assert s["fallback_answers"] == 0, "nothing was answered locally in the remote engine's place"
