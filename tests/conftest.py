"""Fixtures shared by more than one test package; tests/support (the engine's test double) on the import path."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent / "support"))
E2E = Path(__file__).resolve().parent / "e2e"
# The user's model cache (engine/model_cache.py) is an empty folder for the tests and the servers they start: a model
# someone fetched with `waferline fetch-model` must not become every test's chat model. Tests that want the SmolLM2
# file name it (.cache/models, `make smollm2`).
os.environ["WAFERLINE_MODEL_CACHE"] = tempfile.mkdtemp(prefix="waferline-test-model-cache-")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test under tests/e2e is marked `e2e` (a new file there too), so `-m "not e2e"` is the inner loop."""
    for item in items:
        if item.path.is_relative_to(E2E):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture
def single_thread() -> Iterator[None]:
    """torch with one intra-op thread for the test, then as it was: tiny shapes gain nothing from a second thread,
    which on the shared 2-core machines only waits at OpenMP barriers. Engine tests use it for every test
    (tests/engine/conftest.py), the torch backend's test modules through `pytestmark`."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
