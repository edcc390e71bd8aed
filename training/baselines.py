"""Two simple baselines that the evaluation runs on the same cases, so the table shows what the network adds.

- `NGramModel`: an interpolated (Witten-Bell) token n-gram model counted from the training tokens. It gives a
  perplexity on the same tokens as the network, and greedy completions from the prefix (it never sees the suffix).
- `copy_similar_line`: copy the rest of the earlier line that looks most like the text before the cursor, the trick
  an editor's "repeat line" does; strong on code full of near-duplicate lines.
Counting is vectorised with numpy (n-gram keys packed into int64), so ~10M training tokens take seconds.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Sequence

import numpy as np


class NGramModel:
    """Token n-grams (orders 1..n) with Witten-Bell interpolation; `vocab_size ** n` must fit in 63 bits."""

    def __init__(self, sequences: Sequence[Sequence[int]], vocab_size: int, n: int = 4) -> None:
        assert n >= 1 and vocab_size**n < 2**63, f"{n}-grams over {vocab_size} ids do not pack into int64"
        self.n, self.V = n, vocab_size
        self.orders: list[dict[str, np.ndarray]] = []
        arrays = [np.asarray(s, dtype=np.int64) for s in sequences if len(s) > 0]
        self.total = sum(len(a) for a in arrays)
        unigram = np.bincount(np.concatenate(arrays), minlength=vocab_size) if arrays else np.zeros(vocab_size)
        self.unigram = (unigram + 1) / (self.total + vocab_size)  # add-one at the bottom so nothing has zero mass
        for k in range(2, n + 1):
            keys = np.concatenate([self._keys(a, k) for a in arrays if len(a) >= k] or [np.zeros(0, np.int64)])
            uniq, counts = np.unique(keys, return_counts=True)  # sorted (context, next) keys
            ctx = uniq // self.V
            starts = np.flatnonzero(np.r_[True, ctx[1:] != ctx[:-1]]) if len(uniq) else np.zeros(0, np.int64)
            ctx_keys = ctx[starts]
            ctx_total = np.add.reduceat(counts, starts) if len(starts) else np.zeros(0, np.int64)
            ctx_types = np.diff(np.r_[starts, len(uniq)])
            best = np.zeros(len(starts), dtype=np.int64)  # most frequent next token per context
            if len(starts):
                order = np.lexsort((-counts, ctx))  # by context, then by count descending
                firsts = order[np.r_[True, ctx[order][1:] != ctx[order][:-1]]]
                best = uniq[firsts] % self.V
            self.orders.append(
                {"keys": uniq, "counts": counts, "ctx": ctx_keys, "total": ctx_total, "types": ctx_types, "best": best}
            )

    def _keys(self, a: np.ndarray, k: int) -> np.ndarray:
        """Packed k-gram keys of a 1-D token array: sum a[i + j] * V ** (k - 1 - j)."""
        out = np.zeros(len(a) - k + 1, dtype=np.int64)
        for j in range(k):
            out = out * self.V + a[j : len(a) - k + 1 + j]
        return out

    @staticmethod
    def _lookup(sorted_keys: np.ndarray, values: np.ndarray, queries: np.ndarray) -> np.ndarray:
        if len(sorted_keys) == 0:
            return np.zeros(len(queries), dtype=values.dtype)
        i = np.clip(np.searchsorted(sorted_keys, queries), 0, len(sorted_keys) - 1)
        return np.where(sorted_keys[i] == queries, values[i], 0)

    def log_probs(self, seq: Sequence[int]) -> np.ndarray:
        """Natural-log probability of seq[i] given seq[:i], for i = 1..len(seq) - 1 (interpolated, normalised)."""
        a = np.asarray(seq, dtype=np.int64)
        nxt = a[1:]
        p = self.unigram[nxt]
        for k in range(2, self.n + 1):
            tab = self.orders[k - 2]
            # positions with k - 1 tokens of history; the others keep the lower-order estimate
            pos = np.arange(k - 1, len(a))  # index of the predicted token
            if len(pos) == 0:
                continue
            ctx = np.zeros(len(pos), dtype=np.int64)
            for j in range(k - 1, 0, -1):
                ctx = ctx * self.V + a[pos - j]
            c_hw = self._lookup(tab["keys"], tab["counts"], ctx * self.V + a[pos]).astype(np.float64)
            c_h = self._lookup(tab["ctx"], tab["total"], ctx).astype(np.float64)
            t_h = self._lookup(tab["ctx"], tab["types"], ctx).astype(np.float64)
            lower = p[pos - 1]
            seen = c_h > 0
            p[pos - 1] = np.where(seen, (c_hw + t_h * lower) / np.maximum(c_h + t_h, 1), lower)
        return np.log(p)

    def next_token(self, context: Sequence[int]) -> int:
        """The most frequent continuation of the longest context seen in training (backoff), else the top unigram."""
        for k in range(min(self.n, len(context) + 1), 1, -1):
            tab = self.orders[k - 2]
            key = 0
            for t in context[len(context) - (k - 1) :]:
                key = key * self.V + int(t)
            i = int(np.searchsorted(tab["ctx"], key))
            if i < len(tab["ctx"]) and tab["ctx"][i] == key:
                return int(tab["best"][i])
        return int(np.argmax(self.unigram))

    def complete(self, context: Sequence[int], max_tokens: int, stop: Callable[[list[int]], bool]) -> list[int]:
        """Greedy tokens after `context` until `stop(tokens)` says so or max_tokens."""
        ctx, out = list(context[-(self.n - 1) :]) if self.n > 1 else [], []
        for _ in range(max_tokens):
            t = self.next_token(ctx)
            out.append(t)
            ctx = [*ctx, t][-(self.n - 1) :] if self.n > 1 else []
            if stop(out):
                break
        return out


def copy_similar_line(prefix: str, lookback: int = 200) -> str:
    """The rest of the earlier line whose start best matches the current line's text before the cursor.

    Ties go to the nearest line. Only lines longer than the cursor's column qualify (there must be a rest to copy).
    """
    lines = prefix.split("\n")
    cur, earlier = lines[-1], lines[:-1][-lookback:]
    best, best_score = "", -1.0
    for line in reversed(earlier):
        if len(line.rstrip()) <= len(cur):
            continue
        head = line[: len(cur)]
        score = difflib.SequenceMatcher(None, cur, head, autojunk=False).ratio() if cur else 1.0
        if score > best_score:
            best, best_score = line[len(cur) :], score
    return best.rstrip()


def bits_per_char(nll_nats: float, chars: int) -> float:
    return nll_nats / math.log(2) / max(chars, 1)
