"""Inline completion with a model that has no FIM tokens (engine/fim.py PrefixTemplate): the prompt is the prefix as
plain text, the suffix's first line stops the completion, and the local engine serves such a model instead of
refusing it. The shipped model stands in, its FIM template taken away (SmolLM2 itself: test_smollm2.py)."""

from __future__ import annotations

import dataclasses

import pytest

from waferline.engine.api import EditRequest
from waferline.engine.checkpoint import LoadedModel, load_model
from waferline.engine.fim import FimError, PrefixTemplate, suffix_first_line
from waferline.engine.local import LocalEngine
from waferline.engine.tokenizer import SpecialTokens

PREFIX = 'def scale(values, factor):\n    """Multiply each value by factor."""\n    return '


@pytest.fixture(scope="module")
def no_fim() -> LoadedModel:
    return dataclasses.replace(load_model(None), fim=None)


@pytest.fixture(scope="module")
def engine(no_fim: LoadedModel) -> LocalEngine:
    return LocalEngine(no_fim, speculate=False)


@pytest.mark.parametrize(
    ("suffix", "stop"),
    [
        (")\n    return x\n", ")"),  # the rest of the cursor's line
        ("  ]  \nnext()", "  ]"),
        ("\n\n    return total  \n", "\n    return total"),  # the cursor ends its line: the next non-blank one
        ("\n)\n", "\n)"),  # which stops a completion only where ")" starts a line
        ("\n \n\t\n", ""),
        ("", ""),
    ],
)
def test_the_suffixs_first_line_is_the_stop(suffix: str, stop: str) -> None:
    assert suffix_first_line(suffix) == stop


def test_the_prompt_is_the_prefix_as_plain_text(no_fim: LoadedModel) -> None:
    tk = no_fim.tokenizer
    template = PrefixTemplate.for_model(tk, no_fim.special)
    assert template.build(PREFIX, "\nSUFFIX_TEXT\n") == tk.encode(PREFIX)
    assert not set(template.build(PREFIX + "<|fim_suffix|>", "")) & tk.control_ids  # typed markup stays text
    assert template.build("", "x = 1\n") == [tk.token_to_id("<|endoftext|>")]  # an empty prefix: one start token
    assert template.stop_strings("x)\n") == ("x)",) and template.stop_strings("\n") == ()
    assert template.stop_strings("\n    y = 2") == ("\n    y = 2",)
    with pytest.raises(FimError, match="unknown FIM order"):
        template.build(PREFIX, "", order="pms")  # type: ignore[arg-type]
    with_bos = PrefixTemplate.for_model(tk, SpecialTokens(bos_id=4, eos_id=0, stop_ids=(0,), add_bos=True))
    assert with_bos.build(PREFIX, "") == [4, *tk.encode(PREFIX)] and with_bos.build("", "") == [4]


def test_the_engine_serves_a_model_without_fim_tokens(engine: LocalEngine) -> None:
    assert engine.fim.family == "none (prefix only)" and "FIM none (prefix only)" in engine.describe().description
    assert engine.healer is not None  # the prompt ends at the cursor: token healing applies
    request = EditRequest(session_id="a", prefix=PREFIX, suffix="", max_new_tokens=16, time_budget_s=None)
    assert engine.prompt_ids(request, 512) == engine.loaded.tokenizer.encode(PREFIX)
    free = engine.complete(request, lambda: False).text
    # the suffix's first line, met in the completion, ends it there: the text after the cursor is not written twice
    stop = free[len(free) // 2 :][:6].strip()
    assert stop and free.index(stop) > 0, free
    cut = engine.complete(dataclasses.replace(request, session_id="b", suffix=f"{stop}\n"), lambda: False)
    assert cut.text == free[: free.index(stop)] and cut.stop_reason == "stop_string"
