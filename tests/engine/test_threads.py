"""Threads per model (engine/loader.py `set_threads`): a small model's fused step keeps one thread, a large model's
one-token step all cores but one and its steps of several tokens every core, `--threads` sets both, and a second
model's load leaves the first one's threads as they were (the chat model loads after the one that types)."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest
import torch

from waferline.engine.loader import SMALL_MODEL_PARAMS, set_threads
from waferline.hardware.torch_backend.fused import BATCH_TOKENS, CompiledStep


def step() -> CompiledStep:
    return CompiledStep(lib=None, dims=torch.zeros(1), eps=torch.zeros(1), ptrs=None, keep=[], kv_dtype=torch.float32,
                        vocab=8)  # fmt: skip


@pytest.fixture(autouse=True)
def torch_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_each_model_keeps_its_own_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    typing, chat = SimpleNamespace(fused=step()), SimpleNamespace(fused=step())
    set_threads(None, SMALL_MODEL_PARAMS - 1, typing)
    set_threads(None, SMALL_MODEL_PARAMS, chat)
    assert (typing.fused.threads_for(1), typing.fused.threads_for(16)) == (1, 1)
    assert (chat.fused.threads_for(1), chat.fused.threads_for(BATCH_TOKENS - 1)) == (7, 7)
    assert (chat.fused.threads_for(BATCH_TOKENS), chat.fused.threads_for(16)) == (8, 8)
    assert torch.get_num_threads() == 7  # torch's own (the per-op path) is the process's, the last load's


def test_threads_given_set_both_and_bad_ones_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    model = SimpleNamespace(fused=step())
    set_threads(1, SMALL_MODEL_PARAMS * 10, model)
    assert (model.fused.threads_for(1), model.fused.threads_for(16)) == (1, 1)
    set_threads(None, SMALL_MODEL_PARAMS * 10, model)
    assert (model.fused.threads_for(1), model.fused.threads_for(16)) == (1, 2)
    with pytest.raises(ValueError, match="at least 1"):
        set_threads(0, 10, model)
    set_threads(None, 10, SimpleNamespace())  # a model without a fused step: torch's threads only
    assert torch.get_num_threads() == 1


def test_a_step_that_takes_every_prompt_leaves_torch_one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """int8 and GGUF block models prefill through the fused step too: torch runs only small ops around it, on one
    thread, so that its OpenMP workers never spin on the cores the step's pool uses."""
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    every = step()
    every.prefill_max = None
    model = SimpleNamespace(fused=every)
    set_threads(None, SMALL_MODEL_PARAMS * 10, model)
    assert (model.fused.threads_for(1), model.fused.threads_for(16)) == (7, 8)
    assert torch.get_num_threads() == 1
    set_threads(4, SMALL_MODEL_PARAMS * 10, model)
    assert model.fused.threads_for(1) == 4 and torch.get_num_threads() == 1


def test_an_unset_step_follows_torch() -> None:
    torch.set_num_threads(2)
    assert step().threads_for(1) == step().threads_for(16) == 2


def test_the_chat_models_threads_leave_torchs_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    from waferline.engine.loader import model_threads

    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    torch.set_num_threads(1)
    chat = SimpleNamespace(fused=step())
    assert model_threads(None, SMALL_MODEL_PARAMS, chat) == 3
    assert (chat.fused.threads_for(1), chat.fused.threads_for(16), torch.get_num_threads()) == (3, 4, 1)
