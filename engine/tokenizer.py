"""Text <-> token ids: the `tokenizers` library behind a small interface, and streaming detokenization.

Three rules shape this module:
- User text is only ever text. `encode` never turns "<|fim_prefix|>" typed in a file into the control token: it
  encodes with control-token strings read as ordinary text (the tokenizer's `encode_special_tokens`, or a twin
  without the control tokens that are not marked special). Control tokens enter a prompt as ids, placed by code
  that means to (engine/fim.py).
- Nothing is added implicitly: `encode` adds no BOS/EOS unless asked.
- A streamed delta never splits a character. Byte-level BPE tokens can end inside a multi-byte UTF-8 character;
  `StreamDecoder` holds such bytes back until the character is complete, so that the concatenation of its deltas is
  exactly `decode(all ids)`.
"""

from __future__ import annotations

import functools
import json
import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tokenizers
from tokenizers import AddedToken, decoders, models, pre_tokenizers

# The control tokens of waferline's own tokenizer (the strings Qwen2.5-Coder uses), at ids 0..4 in training/bpe.py.
WAFERLINE_SPECIAL_TOKENS: tuple[str, ...] = (
    "<|endoftext|>",
    "<|fim_prefix|>",
    "<|fim_suffix|>",
    "<|fim_middle|>",
    "<|file_sep|>",
)

REPLACEMENT_CHAR = "\ufffd"  # what a decoder writes for bytes that do not (yet) form a character

# An added token that looks like markup ("<|x|>", "<fim_prefix>", "▁<PRE>", "<｜fim▁begin｜>") is a control token
# even when a tokenizer.json forgets to mark it special (Qwen2.5's FIM tokens are "special": false).
_CONTROL_LOOK = re.compile(r"^[\s▁]*<.+>[\s▁]*$", re.DOTALL)


def _is_control(added: dict[str, Any]) -> bool:
    return bool(added.get("special")) or bool(_CONTROL_LOOK.match(added.get("content", "")))


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # in a Python str every such code point stands alone


def without_lone_surrogates(text: str) -> str:
    return _LONE_SURROGATE.sub("\ufffd", text)


class Tokenizer:
    """A `tokenizers.Tokenizer` with waferline's conventions (see the module docstring)."""

    def __init__(self, tk: tokenizers.Tokenizer) -> None:
        self._tk = tk
        added: list[dict[str, Any]] = [
            {"id": i, "content": t.content, "special": t.special} for i, t in tk.get_added_tokens_decoder().items()
        ]
        self._special_ids = frozenset(int(t["id"]) for t in added if t["special"])
        self._control_ids = frozenset(int(t["id"]) for t in added if _is_control(t))
        # User text is encoded with special tokens matched as text (`encode_special_tokens`). Where every control
        # token is marked special that flag is all it takes, and the one tokenizer serves both kinds of encode under
        # a lock (a second copy of a 49k vocabulary costs ~8-12 MB resident). Where some are not (Qwen2.5's FIM
        # tokens), a twin without them encodes user text, so that their strings split into ordinary pieces.
        self._lock = threading.Lock()
        self._text_tk: tokenizers.Tokenizer | None = None
        if any(not t["special"] and _is_control(t) for t in added):
            data = json.loads(tk.to_str())
            data["added_tokens"] = [t for t in data.get("added_tokens") or [] if t.get("special") or not _is_control(t)]
            self._text_tk = tokenizers.Tokenizer.from_str(json.dumps(data))
            self._text_tk.encode_special_tokens = True

    @functools.cached_property
    def vocab_size(self) -> int:
        """Ids run 0..vocab_size-1 (maybe with gaps). Found at first use: it takes the whole vocabulary as Python
        strings, which done during a load left ~2 MB of a 49k vocabulary's load resident."""
        vocab = self._tk.get_vocab(with_added_tokens=True)
        return max(vocab.values()) + 1 if vocab else 0

    # -- construction --------------------------------------------------------------------------------------------------
    @classmethod
    def from_file(cls, path: str | Path) -> Tokenizer:
        return cls(tokenizers.Tokenizer.from_file(str(path)))

    @classmethod
    def from_str(cls, tokenizer_json: str) -> Tokenizer:
        return cls(tokenizers.Tokenizer.from_str(tokenizer_json))

    @property
    def backend_tokenizer(self) -> tokenizers.Tokenizer:
        """The wrapped `tokenizers.Tokenizer` (it parses control-token strings in text; prefer `encode`)."""
        return self._tk

    def to_str(self) -> str:
        """The tokenizer.json text."""
        return self._tk.to_str()

    # -- text <-> ids --------------------------------------------------------------------------------------------------
    def encode(self, text: str, *, add_special_tokens: bool = False, parse_special: bool = False) -> list[int]:
        """Token ids of `text`. Control-token strings inside `text` stay text unless `parse_special` is set.

        A lone surrogate (a JSON text may carry "\\ud800", and Python keeps it) cannot become UTF-8, which the
        tokenizers library needs: it is encoded as U+FFFD, the replacement character, so such a document still
        completes (the document's own text is not changed)."""
        text = without_lone_surrogates(text)
        if self._text_tk is not None and not parse_special:
            return list(self._text_tk.encode(text, add_special_tokens=add_special_tokens).ids)
        with self._lock:  # the flag is the tokenizer's own state: set and restored around one encode at a time
            self._tk.encode_special_tokens = self._text_tk is None and not parse_special
            try:
                return list(self._tk.encode(text, add_special_tokens=add_special_tokens).ids)
            finally:
                self._tk.encode_special_tokens = False

    def encode_infix(self, text: str) -> list[int]:
        """Encode text that continues other text: without the word-start marker that SentencePiece-style
        tokenizers (Llama 2, CodeLlama) put in front of every encoding. Byte-level BPE adds none; then this is
        `encode`. CodeLlama's reference code does the same with its "☺" trick for the suffix of an infilling prompt.
        """
        if not self._prepends_word_start:
            return self.encode(text)
        sentinel = "☺"
        head = self.encode(sentinel)
        ids = self.encode(sentinel + text)
        if ids[: len(head)] == head:
            return ids[len(head) :]
        ids = self.encode(text)  # the sentinel merged with the text: drop a bare marker token if there is one
        return ids[1:] if ids and self._tk.id_to_token(ids[0]) == "▁" else ids

    @functools.cached_property
    def _prepends_word_start(self) -> bool:
        ids = self.encode("a")
        return bool(ids) and (self._tk.id_to_token(ids[0]) or "").startswith("▁")

    def decode(self, ids: Sequence[int], *, skip_special_tokens: bool = True) -> str:
        """Text of `ids`. Ids outside the tokenizer (a model's padded vocabulary) decode to nothing."""
        return self._tk.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def stream(self, *, context: Sequence[int] = (), skip_special_tokens: bool = True) -> StreamDecoder:
        return StreamDecoder(self, context=context, skip_special_tokens=skip_special_tokens)

    # -- vocabulary ----------------------------------------------------------------------------------------------------
    def token_to_id(self, token: str) -> int | None:
        return self._tk.token_to_id(token)

    def id_to_token(self, token_id: int) -> str | None:
        return self._tk.id_to_token(token_id)

    def first_token_id(self, *candidates: str) -> int | None:
        """The id of the first candidate string the vocabulary holds."""
        for c in candidates:
            i = self._tk.token_to_id(c)
            if i is not None:
                return i
        return None

    @property
    def special_ids(self) -> frozenset[int]:
        """Ids of the added tokens marked special (what `skip_special_tokens` drops)."""
        return self._special_ids

    @property
    def control_ids(self) -> frozenset[int]:
        """Ids of added tokens that `encode` never produces from user text (special, or shaped like markup)."""
        return self._control_ids

    def __repr__(self) -> str:
        return f"Tokenizer(vocab_size={self.vocab_size}, control_tokens={len(self._control_ids)})"


class StreamDecoder:
    """Token ids in, one at a time; text deltas out, such that "".join(deltas) + finish() == decode(ids).

    It keeps a small window of ids: `prefix` marks where the window starts (always a character boundary),
    `read` how far text has been emitted. Each push decodes the window with and without the new ids and emits the
    difference, unless the text ends in U+FFFD: then the last token ended inside a character and the bytes wait for
    the next token. Decoding a window rather than a lone token keeps what decoders do at word starts (the SentencePiece
    leading-space strip, byte-level "Ġ" spaces) identical to a full decode.

    `context`: ids that precede the streamed ones (the end of the prompt); they shape decoding but are not emitted,
    except the bytes of a character that the context leaves incomplete, which come out with the token completing it.
    """

    def __init__(self, tokenizer: Tokenizer, *, context: Sequence[int] = (), skip_special_tokens: bool = True) -> None:
        self._tokenizer = tokenizer
        self._skip = skip_special_tokens
        self.ids: list[int] = list(context)
        self._prefix = 0
        self._read = len(self.ids)
        # A context that ends inside a character (a prompt cut at a byte-level token) leaves those bytes unread:
        # the first delta then carries the whole character, and every window starts on a character boundary.
        while self._read > 0 and self._decode(self.ids[: self._read]).endswith(REPLACEMENT_CHAR):
            self._read -= 1
        self._emitted: list[str] = []

    def _decode(self, ids: Sequence[int]) -> str:
        return self._tokenizer.decode(ids, skip_special_tokens=self._skip)

    def push(self, token_id: int) -> str:
        """Add one token; return the text it completes ("" while a character is still incomplete)."""
        self.ids.append(int(token_id))
        before = self._decode(self.ids[self._prefix : self._read])
        after = self._decode(self.ids[self._prefix :])
        if len(after) <= len(before) or after.endswith(REPLACEMENT_CHAR):
            return ""
        assert after.startswith(before), f"decoding is not prefix-stable here: {before!r} -> {after!r}"
        delta = after[len(before) :]
        self._prefix, self._read = self._read, len(self.ids)
        self._emitted.append(delta)
        return delta

    def extend(self, token_ids: Iterable[int]) -> str:
        return "".join(self.push(t) for t in token_ids)

    def finish(self) -> str:
        """The text still held back: bytes that never completed a character become U+FFFD, as `decode` writes them."""
        before = self._decode(self.ids[self._prefix : self._read])
        after = self._decode(self.ids[self._prefix :])
        delta = after[len(before) :] if after.startswith(before) else ""
        self._prefix = self._read = len(self.ids)
        self._emitted.append(delta)
        return delta

    @property
    def text(self) -> str:
        """Everything emitted so far."""
        return "".join(self._emitted)


@dataclass(frozen=True)
class SpecialTokens:
    """The ids generation needs: BOS to prepend (when `add_bos`), and the tokens that end a generation."""

    bos_id: int | None = None
    eos_id: int | None = None
    stop_ids: tuple[int, ...] = ()  # eos first, then every other end-of-generation id the checkpoint names
    pad_id: int | None = None
    add_bos: bool = False

    @classmethod
    def for_waferline(cls, tokenizer: Tokenizer) -> SpecialTokens:
        """waferline's own convention: no BOS; <|endoftext|> ends a generation, and so does <|file_sep|>."""
        eos = tokenizer.token_to_id("<|endoftext|>")
        stops = [i for i in (eos, tokenizer.token_to_id("<|file_sep|>")) if i is not None]
        return cls(bos_id=None, eos_id=eos, stop_ids=tuple(stops))


class PromptTooLongError(ValueError):
    """A prompt (plus the tokens asked for) does not fit the model's context."""

    def __init__(self, prompt_tokens: int, context_tokens: int, *, new_tokens: int = 0) -> None:
        self.prompt_tokens, self.context_tokens, self.new_tokens = prompt_tokens, context_tokens, new_tokens
        need = f"{prompt_tokens} prompt tokens" + (f" + {new_tokens} new tokens" if new_tokens else "")
        super().__init__(
            f"prompt too long: {need} exceed the model's context of {context_tokens} tokens "
            f"(shorten the prompt or ask for fewer tokens)"
        )


def check_prompt_fits(prompt_tokens: int, context_tokens: int, *, new_tokens: int = 0) -> None:
    """Raise PromptTooLongError unless prompt_tokens (+ new_tokens) fit in context_tokens positions."""
    if prompt_tokens + new_tokens > context_tokens:
        raise PromptTooLongError(prompt_tokens, context_tokens, new_tokens=new_tokens)


# -- tokenizers built in code ------------------------------------------------------------------------------------------
def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character map, which byte-level BPE vocabularies are written in."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    mapping, extra = {}, 0
    for b in range(256):
        if b in printable:
            mapping[b] = chr(b)
        else:
            mapping[b] = chr(256 + extra)
            extra += 1
    return mapping


# Characters in rough order of frequency in source code; the fallback tokenizer merges pairs of them.
_CODE_CHARS = " etaoinsrlcdupmfhgybwvkxjqz_\n()=.,:'\"[]{}-+*/#<>;0123456789ETAOINSRLCDUPMFHGYBWVKXJQZ!&|%\t@$?`~^\\"


def byte_fallback_tokenizer(vocab_size: int, special_tokens: Sequence[str] = WAFERLINE_SPECIAL_TOKENS) -> Tokenizer:
    """A byte-level BPE built in memory, for random-weight presets on a checkout without a trained tokenizer.

    ids 0..255 are the bytes, then the special tokens, then merges of pairs of common code characters until the
    vocabulary has `vocab_size` ids (or the pairs run out; larger ids then decode to nothing). Any text encodes.
    """
    if vocab_size < 256 + len(special_tokens):
        raise ValueError(f"vocab_size {vocab_size} is too small for 256 bytes + {len(special_tokens)} special tokens")
    b2u = _bytes_to_unicode()
    vocab = {b2u[b]: b for b in range(256)}
    for tok in special_tokens:
        vocab[tok] = len(vocab)
    chars = [b2u[b] for b in _CODE_CHARS.encode()]
    pairs = sorted(((a, b) for a in chars for b in chars), key=lambda p: chars.index(p[0]) + chars.index(p[1]))
    merges = []
    for a, b in pairs[: vocab_size - len(vocab)]:
        vocab[a + b] = len(vocab)
        merges.append((a, b))
    tk = tokenizers.Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tk.decoder = decoders.ByteLevel()
    tk.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in special_tokens])
    return Tokenizer(tk)
