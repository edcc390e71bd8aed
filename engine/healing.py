"""Token healing: let the model re-choose the prompt's last token when the cursor sits inside what would be one token.

A prompt cut at the cursor often ends in a fragment: `os.path.d` is encoded `os`, `.`, `path`, `.d` (say), while the
model saw `.dirname` as one token in training, so after `.d` it expects the start of a new token and writes one.
Healing backs the prompt up by its last token and lets the first generated token be any token whose text starts
with the removed text (`.d` -> `.dirname`, `.d`, `.dump`, ...); the removed text, already in the document, is then
taken off the front of the completion. Guidance and llama.cpp's server do the same.

Only byte-level BPE tokenizers are healed: their tokens decode one at a time to exactly their text. SentencePiece
tokenizers (a word-start marker in front of words) are left alone.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from waferline.engine.tokenizer import Tokenizer


@dataclass(frozen=True)
class Healing:
    """A prompt with its last token removed, the text that token stood for, and the ids allowed to come first."""

    prompt: list[int]
    text: str
    allowed: Tensor  # int64 ids whose text starts with `text` (always includes the removed token)

    def mask(self, logits: Tensor) -> Tensor:
        """logits (..., vocab) with every id outside `allowed` at -inf (for the first generated token only)."""
        out = torch.full_like(logits, float("-inf"))
        out[..., self.allowed] = logits[..., self.allowed]
        return out

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

    def allowed(self, text: str) -> list[int]:
        """Ids of every ordinary token whose text starts with `text`."""
        lo = bisect.bisect_left(self._texts, text)
        hi = bisect.bisect_left(self._texts, text + "\U0010ffff", lo)  # every text that starts with `text` sorts before
        return self._ids[lo:hi]

    def heal(self, prompt: Sequence[int], *, keep: int = 0) -> Healing | None:
        """Back `prompt` up by its last token, or None when there is nothing to heal: the last token is special
        (an empty prefix ends at a FIM marker), lies within the first `keep` tokens, or is the only token that
        starts with its own text (healing could not change anything)."""
        if not self.enabled or len(prompt) <= max(keep, 1):
            return None
        text = self._text_of.get(prompt[-1])
        if text is None:
            return None
        allowed = self.allowed(text)
        if len(allowed) <= 1:
            return None
        return Healing(prompt=list(prompt[:-1]), text=text, allowed=torch.tensor(allowed, dtype=torch.int64))
