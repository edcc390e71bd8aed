"""Token rows for training: each file becomes a plain causal-LM example or a fill-in-the-middle one, packed.

Examples are concatenated into one stream (each ends with <|endoftext|>) and cut into rows of seq_len + 1 tokens,
as GPT-style pretraining does; a row's last token is the next row's first input. Everything is drawn from a seeded
random generator, so the same corpus, tokenizer and seed give the same rows on every machine.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from waferline.engine.tokenizer import Tokenizer
from waferline.training.data import SourceFile
from waferline.training.fim import FimIds, Order, context_window, fim_example, parse, sample_span

log = logging.getLogger("waferline.training")


@dataclass(frozen=True, kw_only=True)
class ExampleConfig:
    seq_len: int = 1024
    fim_rate: float = 0.5  # share of files (per pass) that become fill-in-the-middle examples instead of a plain one
    passes: int = 1  # times each file is drawn, with fresh choices each time (more, different FIM examples)
    spm_rate: float = 0.5  # share of FIM examples in suffix-prefix-middle order
    prefix_chars: int = 2400  # character windows around the middle (cut to whole lines); tokens trim further
    suffix_chars: int = 1200


def build_examples(
    files: Sequence[SourceFile], tokenizer: Tokenizer, cfg: ExampleConfig, seed: int
) -> tuple[list[list[int]], dict[str, int]]:
    """Token sequences and counts of the kinds drawn (plain, psm, spm, and each span kind).

    Each pass draws every file once: either the whole file as a plain causal-LM example, or (with probability
    fim_rate) fill-in-the-middle examples, one per prefix+suffix window's worth of the file, so that FIM takes about
    fim_rate of the tokens as well as of the files, and a long file teaches more than one middle.
    """
    rng = random.Random(seed)
    ids = FimIds.of(tokenizer)
    counts: dict[str, int] = {}
    out: list[list[int]] = []
    window = cfg.prefix_chars + cfg.suffix_chars
    for _ in range(cfg.passes):
        for f in files:
            if rng.random() >= cfg.fim_rate:
                out.append([*tokenizer.encode(f.text), ids.eot])
                counts["plain"] = counts.get("plain", 0) + 1
                continue
            tree = parse(f.text)
            for _ in range(max(1, round(len(f.text) / window))):
                span = sample_span(f.text, tree, rng)
                order: Order = "spm" if rng.random() < cfg.spm_rate else "psm"
                prefix, middle, suffix = context_window(f.text, span, cfg.prefix_chars, cfg.suffix_chars)
                out.append(fim_example(tokenizer, ids, prefix, middle, suffix, order, cfg.seq_len))
                counts[order] = counts.get(order, 0) + 1
                counts[span.kind] = counts.get(span.kind, 0) + 1
    return out, counts


def pack_rows(examples: Sequence[Sequence[int]], seq_len: int) -> Tensor:
    """(rows, seq_len + 1) int64: the examples end to end, cut into overlapping-by-one rows; the tail is dropped."""
    stream = torch.tensor([t for ex in examples for t in ex], dtype=torch.int64)
    n = (stream.numel() - 1) // seq_len
    assert n > 0, f"{stream.numel()} tokens do not fill one row of {seq_len + 1}"
    idx = torch.arange(n)[:, None] * seq_len + torch.arange(seq_len + 1)[None, :]  # (rows, seq_len + 1)
    return stream[idx]


def pack_flags(flags: Sequence[Sequence[bool]], seq_len: int) -> Tensor:
    """(rows, seq_len + 1) bool, laid out as `pack_rows` lays out the examples the flags go with: whether each
    token is a target the loss counts (a next-edit example's prompt is not)."""
    return pack_rows([[int(f) for f in ex] for ex in flags], seq_len).bool()


class RowSampler:
    """Batches of rows in a seeded order that reshuffles every epoch; `batch(step)` is a pure function of step.

    Being a function of the step (not of an iterator's state) is what makes a resumed run see the same batches.
    """

    def __init__(self, rows: Tensor, batch_size: int, seed: int, loss_mask: Tensor | None = None) -> None:
        assert rows.shape[0] >= batch_size, f"{rows.shape[0]} rows cannot fill a batch of {batch_size}"
        assert loss_mask is None or loss_mask.shape == rows.shape, "the loss mask must have the rows' shape"
        self.rows, self.batch_size, self.seed, self.loss_mask = rows, batch_size, seed, loss_mask
        self.per_epoch = rows.shape[0] // batch_size
        self._epoch = -1
        self._order = torch.empty(0, dtype=torch.int64)

    def batch(self, step: int) -> tuple[Tensor, Tensor]:
        """(inputs, targets), each (batch, seq_len)."""
        epoch, i = divmod(step, self.per_epoch)
        if epoch != self._epoch:
            g = torch.Generator().manual_seed(self.seed * 1000 + epoch)
            self._order, self._epoch = torch.randperm(self.rows.shape[0], generator=g), epoch
        chosen = self._order[i * self.batch_size : (i + 1) * self.batch_size]
        rows = self.rows[chosen].long()  # (B, seq_len + 1)
        targets = rows[:, 1:]
        if self.loss_mask is not None:  # targets the loss does not count are ignore_index (-100)
            targets = targets.masked_fill(~self.loss_mask[chosen][:, 1:], -100)
        return rows[:, :-1], targets


def compact(rows: Tensor) -> Tensor:
    """Token rows in int16 when every id fits (vocabularies under 32,768), else as they are: a quarter of int64's
    bytes, so that a run's prepared data (30M tokens: 60 MB) can travel to a machine with a GPU and no network."""
    if rows.numel() and int(rows.max()) < 2**15 and int(rows.min()) >= 0:
        return rows.to(torch.int16)
    return rows
