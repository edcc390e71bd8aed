"""Byte-level BPE for waferline's own model, trained with the `tokenizers` library.

The special tokens are the strings Qwen2.5-Coder uses, so the engine's fill-in-the-middle templates and stop rules
treat waferline's model like that family. The pre-tokenizer is Qwen2's split rule (letters, single digits,
punctuation runs, newlines, whitespace runs) followed by byte-level mapping, so any byte sequence round-trips.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

ENDOFTEXT = "<|endoftext|>"
FIM_PREFIX = "<|fim_prefix|>"
FIM_SUFFIX = "<|fim_suffix|>"
FIM_MIDDLE = "<|fim_middle|>"
FILE_SEP = "<|file_sep|>"
SPECIAL_TOKENS = [ENDOFTEXT, FIM_PREFIX, FIM_SUFFIX, FIM_MIDDLE, FILE_SEP]  # ids 0..4, in this order
VOCAB_SIZE = 8192

# Qwen2's pre-tokenizer pattern (from its tokenizer.json): digits one at a time, whitespace runs kept together.
SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def new_tokenizer() -> Tokenizer:
    tok = Tokenizer(models.BPE(unk_token=None, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(SPLIT_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    return tok


def train_tokenizer(texts: Iterable[str], vocab_size: int = VOCAB_SIZE) -> Tokenizer:
    """Train on the given texts; the vocabulary counts the special tokens and the 256 byte symbols."""
    assert vocab_size > 256 + len(SPECIAL_TOKENS), f"vocab_size {vocab_size} leaves no room for merges"
    tok = new_tokenizer()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_batches(texts), trainer=trainer)
    for i, s in enumerate(SPECIAL_TOKENS):
        assert tok.token_to_id(s) == i, f"special token {s} got id {tok.token_to_id(s)}, expected {i}"
    return tok


def _batches(texts: Iterable[str], size: int = 64) -> Iterator[list[str]]:
    batch: list[str] = []
    for t in texts:
        batch.append(t)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def encode(tok: Tokenizer, text: str) -> list[int]:
    """Token ids of text with the raw tokenizer (control-token strings in it become control tokens)."""
    return tok.encode(text, add_special_tokens=False).ids


def chars_per_token(tok: Tokenizer, texts: Iterable[str]) -> float:
    n_chars = n_tokens = 0
    for t in texts:
        n_chars += len(t)
        n_tokens += len(encode(tok, t))
    return n_chars / max(n_tokens, 1)
