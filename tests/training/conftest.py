"""A handful of small Python files and a tokenizer trained on them: enough for every training test, in seconds."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from waferline.engine.tokenizer import Tokenizer
from waferline.training.bpe import train_tokenizer

SOURCES = {
    "shapes.py": '''
        """Shapes and their areas."""
        import math


        class Circle:
            def __init__(self, radius: float) -> None:
                self.radius = radius

            def area(self) -> float:
                return math.pi * self.radius ** 2


        def total_area(shapes):
            total = 0.0
            for shape in shapes:
                total += shape.area()
            return total
    ''',
    "text_utils.py": """
        def words(text):
            return [w.strip(".,;") for w in text.split() if w]


        def count(text, word):
            if not word:
                raise ValueError("empty word")
            return sum(1 for w in words(text) if w.lower() == word.lower())


        def shout(text):
            return text.upper() + "!"
    """,
    "pkg/config.py": """
        import json
        import os

        DEFAULTS = {"debug": False, "workers": 4, "name": "café ☕"}


        def load(path):
            if not os.path.exists(path):
                return dict(DEFAULTS)
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
            merged = dict(DEFAULTS)
            merged.update(data)
            return merged
    """,
    "pkg/queue.py": """
        from collections import deque


        class Queue:
            def __init__(self, items=()):
                self._items = deque(items)

            def push(self, item):
                self._items.append(item)

            def pop(self):
                if not self._items:
                    raise IndexError("pop from an empty queue")
                return self._items.popleft()

            def __len__(self):
                return len(self._items)
    """,
}


def write_corpus(root: Path, copies: int = 3) -> Path:
    """The sources above, each under `copies` directories with a small change so deduplication keeps them."""
    for i in range(copies):
        for name, text in SOURCES.items():
            path = root / f"v{i}" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text).lstrip() + f"\nVERSION = {i}\n", encoding="utf-8")
    return root


@pytest.fixture(scope="session")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_corpus(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="session")
def tokenizer() -> Tokenizer:
    texts = [textwrap.dedent(t) for t in SOURCES.values()] * 2
    return Tokenizer.from_str(train_tokenizer(texts, vocab_size=400).to_str())


@pytest.fixture(scope="session")
def texts() -> list[str]:
    """The sources above as files would hold them."""
    return [textwrap.dedent(t).lstrip() for t in SOURCES.values()]
