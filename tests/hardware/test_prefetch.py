"""The products' software prefetch (hardware/torch_backend/prefetch.py): chosen by timing a model's own steps, on and
off alternated; fixed by WAFERLINE_PREFETCH; and changing no result, only which reads wait."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from block_weights import blocks  # tests/support

from waferline.engine.checkpoint import DEFAULT_MODEL_DIR, load_model
from waferline.engine.gguf.write import export_gguf
from waferline.hardware.blocks import x8_kinds
from waferline.hardware.torch_backend import fused, prefetch


class FakeLibrary:
    """Records the settings asked for; a step takes `on_s` with the prefetch and `off_s` without (a fake clock)."""

    def __init__(self, on_s: float, off_s: float) -> None:
        self.on, self.now, self.asked = True, 0.0, []
        self.on_s, self.off_s = on_s, off_s

    def waferline_set_prefetch(self, on: int) -> int:
        before, self.on = self.on, bool(on)
        self.asked.append(on)
        return int(before)

    def step(self) -> None:
        self.now += self.on_s if self.on else self.off_s


@pytest.fixture(autouse=True)
def no_setting_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(prefetch.ENV, raising=False)


@pytest.mark.parametrize(("on_s", "off_s", "off"), [(1.0, 0.9, True), (1.0, 0.99, False), (0.9, 1.0, False)])
def test_the_faster_setting_is_chosen_and_a_small_difference_keeps_the_prefetch(
    on_s: float, off_s: float, off: bool
) -> None:
    lib = FakeLibrary(on_s, off_s)
    times = prefetch.time_steps(lib, lib.step, clock=lambda: lib.now)
    assert times[True] == pytest.approx([on_s] * len(times[True])) and len(times[False]) == len(times[True])
    assert times[False] == pytest.approx([off_s] * len(times[False]))
    assert prefetch.ratio(times) == pytest.approx(off_s / on_s)
    assert prefetch.prefers_off(times) is off
    assert lib.asked == [1, 0, 0, 1] * (len(times[True]) // 2)  # rounds of on, off, off, on


def test_rounds_stop_at_the_budget_once_the_least_are_done() -> None:
    slow = FakeLibrary(1.0, 1.0)  # a step of a second: the least rounds, whatever the budget
    assert len(prefetch.time_steps(slow, slow.step, clock=lambda: slow.now)[True]) == 2 * prefetch.MIN_ROUNDS
    fast = FakeLibrary(1e-6, 1e-6)  # within the budget: the most rounds
    assert len(prefetch.time_steps(fast, fast.step, clock=lambda: fast.now)[True]) == 2 * prefetch.MAX_ROUNDS


def test_the_fastest_steps_decide() -> None:
    """A shared machine only adds time: one disturbed round does not turn the choice, and slow steps without the
    prefetch do not hide its fastest one."""
    assert prefetch.prefers_off({True: [1.0, 1.0, 5.0], False: [0.9, 3.0, 3.0]}) is True
    assert prefetch.prefers_off({True: [1.0, 2.0], False: [0.99, 0.995]}) is False  # within the margin
    assert prefetch.prefers_off({True: [], False: []}) is False


@pytest.mark.parametrize(("raw", "fixed"), [("on", True), ("OFF", False), ("0", False), ("auto", None), ("", None)])
def test_the_environment_fixes_the_setting(raw: str, fixed: bool | None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(prefetch.ENV, raw)
    assert prefetch.from_env() is fixed
    lib = FakeLibrary(1.0, 0.5)
    chosen = prefetch.choose(lib, lib.step, clock=lambda: lib.now)
    if fixed is None:
        assert chosen is False and lib.asked  # measured: the steps without it took half the time
    else:
        assert chosen is fixed and lib.asked == []  # not measured


def test_an_unknown_value_is_logged_and_measured(monkeypatch: pytest.MonkeyPatch, caplog: Any) -> None:
    monkeypatch.setenv(prefetch.ENV, "sometimes")
    with caplog.at_level(logging.WARNING, logger="waferline.hardware"):
        assert prefetch.from_env() is None
    assert "WAFERLINE_PREFETCH='sometimes' is not one of auto, on, off" in caplog.text


@pytest.mark.parametrize("kind", ["Q4_0", "Q4_1", "Q8_0"])
def test_the_prefetch_changes_no_product(kind: str, lib: Any) -> None:
    """Rows as the file has them (the rows-ahead prefetch) and 8 interleaved where this build multiplies them (the
    blocks-ahead one), 1 and 2 threads."""
    g = np.random.default_rng(5)
    w = blocks(kind, g.standard_normal((304, 576)))
    x = torch.from_numpy(g.standard_normal((3, 576)).astype(np.float32))
    built = x8_kinds(int(lib.waferline_blocks_x8()))
    weights = [w] + ([w.interleaved(built)] if kind in built else [])
    assert len(weights) == 1 or weights[1].segments[0][0] == f"{kind}_X8"
    try:
        for weight in weights:
            for threads in (1, 2):
                lib.waferline_set_prefetch(1)
                with_it = fused.blocks_linear(x, weight, threads=threads)
                assert lib.waferline_set_prefetch(0) == 1
                without = fused.blocks_linear(x, weight, threads=threads)
                assert lib.waferline_set_prefetch(-1) == 0  # -1 reads it
                assert torch.equal(with_it, without)
    finally:
        lib.waferline_set_prefetch(1)


@pytest.fixture(scope="module")
def q4_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return export_gguf(DEFAULT_MODEL_DIR, tmp_path_factory.mktemp("prefetch") / "mini-q4_0.gguf", "q4_0")


@pytest.mark.parametrize("env", ["off", "on", "auto"])
def test_a_block_models_first_step_sets_the_prefetch(
    env: str, q4_file: Path, lib: Any, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    monkeypatch.setenv(prefetch.ENV, env)
    model = load_model(q4_file).model
    step = model.fused
    assert step is not None and step.prefetch is None
    kv = model.open_cache(8)
    try:
        with caplog.at_level(logging.INFO, logger="waferline.hardware"):
            model.forward(torch.tensor([1, 2, 3]), kv, 0)
        assert step.prefetch is {"off": False, "on": True}.get(env, step.prefetch)
        assert isinstance(step.prefetch, bool)
        assert lib.waferline_set_prefetch(-1) == int(step.prefetch)  # applied to the library
        assert ("software prefetch" in caplog.text) is (env == "auto")  # measured (and said) only for auto
    finally:
        lib.waferline_set_prefetch(1)


def test_the_loader_chooses_it_with_the_threads_and_again_for_other_threads(
    q4_file: Path, lib: Any, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    from waferline.engine.loader import model_threads

    monkeypatch.setenv(prefetch.ENV, "auto")
    model = load_model(q4_file).model
    step = model.fused
    assert step is not None
    try:
        with caplog.at_level(logging.INFO, logger="waferline.hardware"):
            model_threads(1, 10**6, model)  # at load, before any request
            assert isinstance(step.prefetch, bool) and caplog.text.count("software prefetch") == 1
            model_threads(1, 10**6, model)  # the same threads: nothing measured again
            assert caplog.text.count("software prefetch") == 1
            model_threads(2, 10**6, model)  # other threads: chosen for them
            assert caplog.text.count("software prefetch") == 2
            model.forward(torch.tensor([1, 2]), model.open_cache(8), 0)  # the first request measures nothing
            assert caplog.text.count("software prefetch") == 2
    finally:
        lib.waferline_set_prefetch(1)


def test_a_model_without_blocks_is_not_measured(lib: Any, caplog: Any) -> None:
    model = load_model(DEFAULT_MODEL_DIR).model  # the shipped checkpoint: float or int8 weights, no blocks
    if model.fused is None:
        pytest.skip("the shipped model decodes per-op here")
    kv = model.open_cache(8)
    with caplog.at_level(logging.INFO, logger="waferline.hardware"):
        model.forward(torch.tensor([1, 2]), kv, 0)
    assert model.fused.prefetch is True and "software prefetch" not in caplog.text


@pytest.mark.parametrize("threads", [1, 2])
def test_asking_for_the_kv_cache_ahead_changes_no_logit(
    threads: int, lib: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fused_step.c's prefetch of each layer's cached keys and values (a short step, past position 0) only says
    which reads wait: one-token steps and a 3-token verification at 130 cached positions give the same logits and
    cache with it and without, on 1 and 2 threads."""
    from waferline.engine.loader import load, set_threads

    monkeypatch.delenv(prefetch.KV_ENV, raising=False)
    loaded = load("tiny", weights="int8")
    model = loaded.model
    if model.fused is None:
        pytest.skip("the model decodes per-op here")
    set_threads(threads, loaded.args.n_params, model)
    assert lib.waferline_set_kv_prefetch(-1) == 1  # on unless the environment says off
    g = torch.Generator().manual_seed(3)
    prompt = torch.randint(0, loaded.args.vocab_size, (130,), generator=g)
    results = []
    try:
        for on in (1, 0):
            lib.waferline_set_kv_prefetch(on)
            kv = model.open_cache(160)
            model.forward(prompt, kv, 0)
            one = torch.cat([model.forward(torch.tensor([5 + i]), kv, 130 + i) for i in range(4)])
            few = model.forward([7, 8, 9], kv, 134, last_only=False, like_steps=True)
            results.append((one, few, kv.payload.data.clone()))
    finally:
        lib.waferline_set_kv_prefetch(1)
    assert all(torch.equal(a, b) for a, b in zip(results[0], results[1], strict=True))


def test_the_environment_switches_the_kv_prefetch_off(lib: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(prefetch.KV_ENV, "off")
    try:
        assert prefetch.apply_kv_from_env(lib) is False and lib.waferline_set_kv_prefetch(-1) == 0
        monkeypatch.setenv(prefetch.KV_ENV, "on")
        assert prefetch.apply_kv_from_env(lib) is True and lib.waferline_set_kv_prefetch(-1) == 1
    finally:
        lib.waferline_set_kv_prefetch(1)
