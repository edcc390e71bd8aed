"""Shared fixtures for engine tests: tiny tokenizers and tiny random Hugging Face checkpoints, built in tmp dirs.

Tokenizers (session-scoped, built in memory, no files needed):
- `train_bpe(vocab_size, special_tokens)`: trains a byte-level BPE on `code_corpus` with the given special tokens.
- `bpe_tokenizer`: a byte-level BPE trained here on a small code corpus with CJK, accents and emoji, so that some
  tokens end in the middle of a UTF-8 character; waferline's special tokens at ids 0..4.
- `fallback_tokenizer`: `byte_fallback_tokenizer(512)`, what a random-weight preset uses on a fresh checkout.

Checkpoints (written with `save_checkpoint`, loadable by waferline and by transformers):
- `tiny_args(model_type, **overrides)`: the ModelArgs of a tiny model (dim 64, 2 layers, 4 heads, 2 KV heads, vocab
  512, context 256); Qwen2 gets QKV biases and tied embeddings unless overridden.
- `random_state(args, seed=, weight_scale=)`: random weights for it in Hugging Face names.
- `write_checkpoint(name, **options) -> Path`: a factory that writes a tiny checkpoint under this test's tmp_path;
  see its docstring for the options (model type, shape overrides, weight scale, dtype, shards, tokenizer).
- `tiny_checkpoint`: one ready-made Qwen2 checkpoint (GQA, QKV bias, tied embeddings), session-scoped: read it,
  never modify it.
- `tiny_model`: that checkpoint loaded by waferline on the cpu backend in float32 (a `LoadedModel`), session-scoped.

Every engine test runs torch with one intra-op thread (`single_thread` from tests/conftest.py, through the autouse
`_one_thread`): tiny shapes gain nothing from threads, and on a busy 2-core machine OpenMP's barriers turned a 60x64
matmul from microseconds into 30 ms.

Random weights are drawn with std 0.02 * `weight_scale` (default 5, i.e. 0.1): at std 0.02 the logits of a tiny model
are nearly flat, and greedy parity between two implementations would hinge on ties.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import tokenizers
from random_weights import scaled_state  # tests/support
from tokenizers import decoders, models, pre_tokenizers, trainers
from torch import Tensor

from waferline.engine.checkpoint import LoadedModel, load_model
from waferline.engine.checkpoint_save import save_checkpoint
from waferline.engine.model import ModelArgs
from waferline.engine.tokenizer import WAFERLINE_SPECIAL_TOKENS, Tokenizer, byte_fallback_tokenizer


@pytest.fixture(autouse=True)
def _one_thread(single_thread: None) -> None:
    """Every engine test runs with `single_thread` (tests/conftest.py)."""


CORPUS = [
    "def add(a, b):\n    return a + b\n",
    "class Point:\n    def __init__(self, x, y):\n        self.x = x\n        self.y = y\n",
    "for i in range(10):\n    print(f'{i}: {i * i}')\n",
    "function greet(name) {\n  return `Hello, ${name}!`;\n}\n",
    'fn main() {\n    let v: Vec<i32> = (0..10).collect();\n    println!("{:?}", v);\n}\n',
    "# café, naïve, façade — résumé\n",
    "// 你好，世界。代码补全很快。\n",
    "s = '日本語のテキスト'  # Japanese\n",
    "emoji = '😀🚀✨👩‍💻'\n",
    "if x is None:\n\traise ValueError('x must be set')\n",
]

TINY_SHAPE: dict[str, Any] = dict(
    vocab_size=512, dim=64, n_layers=2, n_heads=4, n_kv_heads=2, intermediate_size=128, max_seq_len=256
)


def train_test_bpe(texts: list[str], vocab_size: int, special_tokens: tuple[str, ...] | list[str]) -> Tokenizer:
    """A byte-level BPE (GPT-2 style) trained on `texts`, the special tokens at ids 0.. (for tests only)."""
    tk = tokenizers.Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(special_tokens),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tk.train_from_iterator(texts * 20, trainer)
    return Tokenizer(tk)


@pytest.fixture(scope="session")
def train_bpe() -> Callable[..., Tokenizer]:
    """`train_bpe(vocab_size, special_tokens, texts=CORPUS) -> Tokenizer`: a byte-level BPE with other tokens."""

    def train(vocab_size: int, special_tokens: list[str] | tuple[str, ...], texts: list[str] = CORPUS) -> Tokenizer:
        return train_test_bpe(texts, vocab_size, special_tokens)

    return train


@pytest.fixture(scope="session")
def code_corpus() -> list[str]:
    """The texts the test tokenizers are trained on (code, accents, CJK, emoji)."""
    return list(CORPUS)


@pytest.fixture(scope="session")
def bpe_tokenizer() -> Tokenizer:
    return train_test_bpe(CORPUS, 420, WAFERLINE_SPECIAL_TOKENS)


@pytest.fixture(scope="session")
def fallback_tokenizer() -> Tokenizer:
    return byte_fallback_tokenizer(512)


def make_tiny_args(model_type: str = "qwen2", **overrides: Any) -> ModelArgs:
    """A tiny model's shape; Qwen2 gets QKV biases and tied embeddings unless overridden."""
    defaults: dict[str, Any] = dict(TINY_SHAPE, model_type=model_type)
    if model_type == "qwen2":
        defaults.update(qkv_bias=True, tie_embeddings=True, rope_theta=1_000_000.0, norm_eps=1e-6)
    return ModelArgs(**{**defaults, **overrides})


def make_random_state(args: ModelArgs, *, seed: int = 0, weight_scale: float = 5.0) -> dict[str, Tensor]:
    """init_random's weights with every non-norm tensor scaled by weight_scale (tests/support/random_weights.py)."""
    return scaled_state(args, seed=seed, weight_scale=weight_scale)


@pytest.fixture
def tiny_args() -> Callable[..., ModelArgs]:
    """`tiny_args(model_type="qwen2", **overrides) -> ModelArgs`."""
    return make_tiny_args


@pytest.fixture
def random_state() -> Callable[..., dict[str, Tensor]]:
    """`random_state(args, *, seed=0, weight_scale=5.0) -> state_dict` in Hugging Face names."""
    return make_random_state


WriteCheckpoint = Callable[..., Path]


def _writer(root: Path, tokenizer: Tokenizer) -> WriteCheckpoint:
    def write(
        name: str = "ckpt",
        *,
        model_type: str = "qwen2",
        seed: int = 0,
        weight_scale: float = 5.0,
        dtype: str | None = None,
        max_shard_bytes: int | None = None,
        with_tokenizer: bool = True,
        fim_template: str | None = "waferline",
        **arg_overrides: Any,
    ) -> Path:
        """Write a tiny random checkpoint to <tmp>/<name> and return its path.

        model_type and arg_overrides shape it (see `make_tiny_args`); dtype ("bfloat16", ...) is the stored dtype;
        max_shard_bytes splits it into shards with an index; with_tokenizer=False leaves out the tokenizer files.
        """
        args = make_tiny_args(model_type, **arg_overrides)
        return save_checkpoint(
            root / name,
            args,
            make_random_state(args, seed=seed, weight_scale=weight_scale),
            tokenizer_json=tokenizer.to_str() if with_tokenizer else None,
            fim_template=fim_template if with_tokenizer else None,
            dtype=dtype,
            max_shard_bytes=max_shard_bytes,
        )

    return write


@pytest.fixture
def write_checkpoint(tmp_path: Path, bpe_tokenizer: Tokenizer) -> WriteCheckpoint:
    return _writer(tmp_path, bpe_tokenizer)


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory: pytest.TempPathFactory, bpe_tokenizer: Tokenizer) -> Path:
    return _writer(tmp_path_factory.mktemp("tiny"), bpe_tokenizer)("qwen2-tiny")


@pytest.fixture(scope="session")
def tiny_model(tiny_checkpoint: Path) -> LoadedModel:
    return load_model(tiny_checkpoint, backend="cpu", dtype="float32")
