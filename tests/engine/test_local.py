"""The local engine (engine/local.py) on the shipped model: FIM prompts with token healing, and what it says it is."""

from __future__ import annotations

import pytest

from waferline.engine.api import ChatRequest, ChatUnsupported, EditRequest
from waferline.engine.local import LocalEngine


@pytest.fixture(scope="module")
def engine() -> LocalEngine:
    return LocalEngine.load(None, weights="float32")


def test_local_engine_heals_a_prefix_cut_inside_a_word(engine: LocalEngine) -> None:
    """The shipped model prompts suffix-prefix-middle, so a cut word is healed: the prompt goes in one token shorter
    (generate() with healing is tested in test_healing.py); an empty prefix has nothing to heal."""
    assert engine.healer is not None
    tk = engine.loaded.tokenizer
    request = EditRequest(session_id="doc", prefix="import os\nbase = os.path.basen", suffix="\n", max_new_tokens=4,
                          time_budget_s=None)  # fmt: skip
    ids = engine.prompt_ids(request, 512)
    healing = engine.healer.heal(ids)
    assert healing is not None and tk.decode(ids).endswith(healing.text)
    done = engine.complete(request, lambda: False)
    assert done.prompt_tokens == len(ids) - 1
    plain = engine.complete(
        EditRequest(session_id="doc2", prefix="", suffix="x = 1\n", max_new_tokens=2), lambda: False
    )
    assert plain.prompt_tokens == len(engine.prompt_ids(EditRequest(session_id="d", prefix="", suffix="x = 1\n"), 512))


def test_describe_says_what_was_placed_and_that_it_cannot_chat(engine: LocalEngine) -> None:
    info = engine.describe()
    assert " on cpu float32, FIM waferline" in info.description and not info.can_chat
    with pytest.raises(ChatUnsupported, match="no chat template"):
        engine.chat(ChatRequest(session_id="c", messages=[{"role": "user", "content": "hi"}]), lambda: False)
