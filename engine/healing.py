"""Token healing: let the model re-choose the prompt's last token when the cursor sits inside what would be one token.

A prompt cut at the cursor often ends in a fragment: `os.path.d` is encoded `os`, `.`, `path`, `.d` (say), while the
model saw `.dirname` as one token in training, so after `.d` it expects the start of a new token and writes one.
Healing backs the prompt up by its last token and lets the model write the removed text again: the first generated
token is one whose text starts with the removed text (`.d` -> `.dirname`, `.d`, `.dump`, ...); the removed text,
already in the document, is then taken off the front of the completion. Guidance and llama.cpp's server do the same.

A removed run of spaces or tabs may also be spelt in several tokens, a shorter run first (each next token held to the
rest of it). That matters after indentation, where a cursor waits on every new line an editor indents: the prompt
`...:\n    ` ends in a four-space token, while in training `    if` was three spaces and ` if` (the pre-tokenizer
gives a run's last space to the word after it); a model asked to go on after four spaces has only ever seen a line
end there, and writes one. Re-spelt, the three spaces and ` if` are open to it again.

Only byte-level BPE tokenizers are healed: their tokens decode one at a time to exactly their text. SentencePiece
tokenizers (a word-start marker in front of words) are left alone.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from waferline.engine.tokenizer import Tokenizer


@dataclass(frozen=True)
class Healing:
    """A prompt with its last token removed, the text that token stood for, and the ids allowed to come first."""

    prompt: list[int]
    text: str
    allowed: Tensor  # int64 ids allowed first (`TokenHealer.allowed`): the removed token, longer ones, shorter runs
    healer: TokenHealer | None = field(default=None, compare=False, repr=False)  # for the ids allowed after the first

    def mask(self, logits: Tensor, left: str | None = None) -> Tensor:
        """logits (..., vocab) with every id that cannot come next at -inf, while `left` (default: all of `text`) of
        the healed text is still to be written."""
        if left is None or left == self.text or self.healer is None:
            allowed: Tensor | list[int] = self.allowed
        else:
            allowed = self.healer.allowed(left)
        out = torch.full_like(logits, float("-inf"))
        out[..., allowed] = logits[..., allowed]
        return out

    def left_after(self, left: str, token: int) -> str:
        """What of the healed text is still to be written after `token`, when `left` was (one of the ids `mask`
        allowed for `left`): the rest of `left` when the token spelt a start of it, else nothing."""
        text = self.healer.text_of(token) if self.healer is not None else None
        return left[len(text) :] if text is not None and left.startswith(text) and text != left else ""

    def strip(self, completion: str) -> str:
        """The completion without the healed text at its front (it is in the document already)."""
        return completion[len(self.text) :] if completion.startswith(self.text) else completion


class TokenHealer:
    """An index of a tokenizer's ordinary tokens by their text, for `heal`."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer
        self.enabled = not tokenizer._prepends_word_start
        specials = tokenizer.special_ids | tokenizer.control_ids
        entries: list[tuple[str, int]] = []
        if self.enabled:
            for i in range(tokenizer.vocab_size):
                if i in specials:
                    continue
                text = tokenizer.decode([i], skip_special_tokens=False)
                if text and "\ufffd" not in text:  # a token that is part of a UTF-8 character has no text alone
                    entries.append((text, i))
        entries.sort()
        self._texts = [t for t, _ in entries]
        self._ids = [i for _, i in entries]
        self._text_of = {i: t for t, i in entries}
        self._id_of = {t: i for t, i in entries}

    def text_of(self, token: int) -> str | None:
        """An ordinary token's text (None for a special token or part of a UTF-8 character)."""
        return self._text_of.get(token)

    def allowed(self, text: str) -> list[int]:
        """Ids of every ordinary token that can begin a spelling of `text`: its text starts with `text`, or, when
        `text` is a run of spaces and tabs, is a shorter run of it (then more tokens spell the rest). Only such a run
        is split: byte-level BPE's pre-tokenizers give its last space to the word after it (`    if` is `   `,
        ` if`), while a word cut inside (` wh` as ` w`, `h...`) or a run of line ends (kept whole up to its last
        line end) is spelt as training never spelt it."""
        lo = bisect.bisect_left(self._texts, text)
        hi = bisect.bisect_left(self._texts, text + "\U0010ffff", lo)  # every text that starts with `text` sorts before
        if not text or text.strip(" \t"):
            return self._ids[lo:hi]
        return [i for n in range(1, len(text)) if (i := self._id_of.get(text[:n])) is not None] + self._ids[lo:hi]

    def heal(self, prompt: Sequence[int], *, keep: int = 0) -> Healing | None:
        """Back `prompt` up by its last token, or None when there is nothing to heal: the last token is special
        (an empty prefix ends at a FIM marker), lies within the first `keep` tokens, or is the only token that
        can begin a spelling of its own text (healing could not change anything)."""
        if not self.enabled or len(prompt) <= max(keep, 1):
            return None
        text = self._text_of.get(prompt[-1])
        if text is None:
            return None
        allowed = self.allowed(text)
        if len(allowed) <= 1:
            return None
        return Healing(list(prompt[:-1]), text, torch.tensor(allowed, dtype=torch.int64), self)
