"""`waferline eval`: how well a model completes held-out code, next to two baselines, with a fixed seed.

Figures (stable keys in `evaluate()`'s result, which `--json` prints):
- perplexity and bits per character of whole held-out files (bits per character compare across tokenizers);
- single-line completion: cursor inside a random line, complete to its end: exact match and edit similarity;
- syntax-node FIM (SAFIM-style): a block, expression or argument list removed: exact match, edit similarity and the
  share of filled files that still parse;
- both FIM orders (psm, spm) for the model; the n-gram and copy-line baselines on the same cases.
The model runs through the engine (`load_model`, `Transformer.forward` with a KV cache, greedy), so any checkpoint
waferline loads can be evaluated the same way, e.g. a downloaded Qwen2.5-Coder.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from waferline.engine.checkpoint import LoadedModel, load_model
from waferline.engine.healing import Healing, TokenHealer
from waferline.training.baselines import NGramModel, bits_per_char, copy_similar_line
from waferline.training.cases import Case, edit_similarity, fim_cases, line_cases, parses
from waferline.training.data import HELD_OUT_PERCENT, SourceFile, load_corpus
from waferline.training.fim import Order, context_window

log = logging.getLogger("waferline.training")

ORDERS: tuple[Order, ...] = ("psm", "spm")


@dataclass(frozen=True, kw_only=True)
class EvalConfig:
    model: Path | str
    seed: int = 0
    line_cases: int = 100
    fim_cases: int = 99
    max_files: int | None = None  # held-out files used (perplexity and cases)
    ngram_files: int | None = None  # training files counted by the n-gram baseline (default: all)
    corpus_root: Path | None = None
    held_out_percent: int = HELD_OUT_PERCENT
    prefix_chars: int = 2400  # the same windows as training
    suffix_chars: int = 1200
    line_max_new: int = 48  # tokens generated at most per case
    fim_max_new: int = 128
    heal: bool = False  # also score SPM with token healing (waferline.engine.healing), as "model_spm_healed"


class Runner:
    """Greedy decoding and scoring with an engine model."""

    def __init__(self, lm: LoadedModel) -> None:
        if lm.fim is None:
            raise ValueError(f"model {lm.name} has no fill-in-the-middle tokens; eval needs a FIM model")
        self.lm, self.fim = lm, lm.fim
        self.stops = frozenset(lm.fim.stop_ids) | frozenset(lm.special.stop_ids)
        s = lm.special
        self.start_id = s.bos_id if s.add_bos and s.bos_id is not None else s.eos_id
        self.tokens_generated, self.decode_seconds = 0, 0.0

    @torch.no_grad()
    def nll(self, ids: Sequence[int]) -> float:
        """Sum of -log p(ids[i] | ids[:i]) in nats over i >= 1, in context-sized windows (no carry between them)."""
        model, ctx, total = self.lm.model, self.lm.context_tokens, 0.0
        for start in range(0, len(ids) - 1, ctx):
            chunk = torch.tensor(ids[start : start + ctx + 1])
            kv = model.open_cache(len(chunk) - 1)
            try:
                logits = model.forward(chunk[:-1], kv, 0, last_only=False)  # (T, vocab)
            finally:
                model.device.kv_close(kv)
            total += F.cross_entropy(logits.float(), chunk[1:], reduction="sum").item()
        return total

    def prompt(
        self, case: Case, order: Order, max_new: int, prefix_chars: int, suffix_chars: int
    ) -> tuple[list[int], str]:
        """The FIM prompt for a case, its windows shrunk until prompt + max_new fit the context; and the prefix."""
        while True:
            prefix, _, suffix = context_window(case.text, case.span, prefix_chars, suffix_chars)
            ids = self.fim.build(prefix, suffix, order)
            if len(ids) + max_new <= self.lm.context_tokens or prefix_chars < 16:
                return ids, prefix
            prefix_chars, suffix_chars = int(prefix_chars * 0.7), int(suffix_chars * 0.7)

    @torch.no_grad()
    def greedy(self, prompt: list[int], max_new: int, *, one_line: bool, healing: Healing | None = None) -> str:
        """Greedy completion of `prompt` (or of `healing.prompt`, whose first token is constrained and whose healed
        text is taken off the front of the result)."""
        model, tok = self.lm.model, self.lm.tokenizer
        assert len(prompt) + max_new <= self.lm.context_tokens, "prompt() keeps the prompt inside the context"
        if healing is not None:
            prompt = healing.prompt
        t0 = time.perf_counter()
        kv = model.open_cache(len(prompt) + max_new + 1)
        out: list[int] = []

        def text_of(ids: list[int]) -> str:
            text = tok.decode(ids)
            return healing.strip(text) if healing is not None else text

        try:
            logits = model.forward(torch.tensor(prompt), kv, 0)  # (1, vocab)
            if healing is not None:
                logits = healing.mask(logits)
            for _ in range(max_new + (healing is not None)):
                t = int(logits[-1].argmax())
                if t in self.stops:
                    break
                out.append(t)
                if one_line and "\n" in text_of(out):
                    break
                logits = model.forward(torch.tensor([t]), kv, len(prompt) + len(out) - 1)
        finally:
            model.device.kv_close(kv)
        self.tokens_generated += len(out)
        self.decode_seconds += time.perf_counter() - t0
        text = text_of(out)
        return text.split("\n", 1)[0] if one_line else text


def _scores(cases: Sequence[Case], preds: Sequence[str], *, parse_check: bool) -> dict[str, Any]:
    n = max(len(cases), 1)
    em = [p.rstrip() == c.target.rstrip() for c, p in zip(cases, preds, strict=True)]
    es = [edit_similarity(p.rstrip(), c.target.rstrip()) for c, p in zip(cases, preds, strict=True)]
    out: dict[str, Any] = {"exact_match": sum(em) / n, "edit_sim": sum(es) / n}
    if parse_check:
        ok = [parses(c.prefix + p + c.suffix) for c, p in zip(cases, preds, strict=True)]
        out["parse_rate"] = sum(ok) / n
        out["by_kind"] = {}
        for kind in sorted({c.kind for c in cases}):
            idx = [i for i, c in enumerate(cases) if c.kind == kind]
            out["by_kind"][kind] = {
                "cases": len(idx),
                "exact_match": sum(em[i] for i in idx) / len(idx),
                "edit_sim": sum(es[i] for i in idx) / len(idx),
                "parse_rate": sum(ok[i] for i in idx) / len(idx),
            }
    return out


def _ngram_order(vocab_size: int) -> int:
    """The largest n <= 4 whose packed keys fit int64 (4 for 8192 ids, 3 for Qwen's 151936)."""
    return max(1, min(4, int(62 // math.log2(max(vocab_size, 2)))))


def evaluate(cfg: EvalConfig, examples: int = 0) -> dict[str, Any]:
    """Every figure of the module docstring as one dict; `examples` > 0 also returns that many sample cases."""
    t_start = time.time()
    lm = load_model(cfg.model)
    runner = Runner(lm)
    tok = lm.tokenizer
    healer = TokenHealer(tok) if cfg.heal else None
    corpus = load_corpus(cfg.corpus_root, percent=cfg.held_out_percent)
    held: list[SourceFile] = corpus.held_out[: cfg.max_files] if cfg.max_files else corpus.held_out
    if not held:
        raise ValueError("the corpus has no held-out files to evaluate on")
    train_files = corpus.train[: cfg.ngram_files] if cfg.ngram_files else corpus.train
    start = [runner.start_id] if runner.start_id is not None else []
    t0 = time.time()
    ngram = NGramModel([start + tok.encode(f.text) for f in train_files], tok.vocab_size, _ngram_order(tok.vocab_size))
    log.info("n-gram (n=%d) counted from %d training files in %.0f s", ngram.n, len(train_files), time.time() - t0)

    # -- perplexity and bits per character on whole held-out files --------------------------------------------------
    chars = tokens = 0
    nll_model = nll_ngram = 0.0
    for f in held:
        ids = start + tok.encode(f.text)
        chars, tokens = chars + len(f.text), tokens + len(ids) - 1
        nll_model += runner.nll(ids)
        nll_ngram += float(-ngram.log_probs(ids).sum())
    log.info("perplexity over %d held-out files (%d tokens) done", len(held), tokens)

    # -- completion cases ----------------------------------------------------------------------------------------------
    tasks = {"line": line_cases(held, cfg.line_cases, cfg.seed), "fim": fim_cases(held, cfg.fim_cases, cfg.seed)}
    results: dict[str, dict[str, Any]] = {}
    samples: list[dict[str, Any]] = []
    for task, cases in tasks.items():
        one_line, max_new = task == "line", (cfg.line_max_new if task == "line" else cfg.fim_max_new)
        results[task] = {}
        prefixes: list[str] = []
        for order in ORDERS:
            preds = []
            for case in cases:
                ids, prefix = runner.prompt(case, order, max_new, cfg.prefix_chars, cfg.suffix_chars)
                preds.append(runner.greedy(ids, max_new, one_line=one_line))
                if order == ORDERS[0]:
                    prefixes.append(prefix)
            results[task][f"model_{order}"] = _scores(cases, preds, parse_check=task == "fim")
            if order == "spm":
                samples += [
                    {"task": task, "kind": c.kind, "path": c.path, "prefix_tail": c.prefix[-80:], "target": c.target,
                     "prediction": p, "suffix_head": c.suffix[:40]}
                    for c, p in list(zip(cases, preds, strict=True))[: examples]
                ]  # fmt: skip
            log.info(
                "%s %s: %s", task, order, {k: v for k, v in results[task][f"model_{order}"].items() if k != "by_kind"}
            )
        if healer is not None:
            preds = []
            for case in cases:
                ids, _ = runner.prompt(case, "spm", max_new + 1, cfg.prefix_chars, cfg.suffix_chars)
                preds.append(runner.greedy(ids, max_new, one_line=one_line, healing=healer.heal(ids)))
            results[task]["model_spm_healed"] = _scores(cases, preds, parse_check=task == "fim")
            log.info(
                "%s spm healed: %s",
                task,
                {k: v for k, v in results[task]["model_spm_healed"].items() if k != "by_kind"},
            )
        ngram_preds = [
            tok.decode(
                ngram.complete(start + tok.encode(p), cfg.line_max_new, lambda out: "\n" in tok.decode(out))
            ).split("\n", 1)[0]
            for p in prefixes
        ]
        results[task]["ngram"] = _scores(cases, ngram_preds, parse_check=task == "fim")
        results[task]["copy_line"] = _scores(cases, [copy_similar_line(p) for p in prefixes], parse_check=task == "fim")
        results[task]["cases"] = len(cases)

    out: dict[str, Any] = {
        "model": str(lm.path or lm.name),
        "params": lm.args.n_params,
        "context_tokens": lm.context_tokens,
        "seed": cfg.seed,
        "held_out_files": len(held),
        "held_out_tokens": tokens,
        "chars_per_token": chars / max(tokens, 1),
        "perplexity": {"model": math.exp(nll_model / max(tokens, 1)), "ngram": math.exp(nll_ngram / max(tokens, 1))},
        "bits_per_char": {"model": bits_per_char(nll_model, chars), "ngram": bits_per_char(nll_ngram, chars)},
        "ngram_order": ngram.n,
        "line": results["line"],
        "fim": results["fim"],
        "decode_tok_s": runner.tokens_generated / max(runner.decode_seconds, 1e-9),
        "seconds": round(time.time() - t_start, 1),
    }
    if examples:
        out["examples"] = samples
    return out
