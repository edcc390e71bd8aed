"""Drafts for speculative decoding: guesses of the next tokens that one k-token step verifies (engine/generate.py).

Code repeats itself: the rest of a line the user typed before, the text after the cursor, the previous suggestion.
A draft costs nothing to make from such text, and verifying k drafted tokens costs one step that reads every weight
once (`Session.verify`); each drafted token the model agrees with is a step saved. Output never changes: greedy
generation keeps a drafted token only when it is the argmax, sampling keeps it with the model's own probability
(`sample_draft`).

Sources, cheapest first:
- `caller`: the text the caller expects (EditRequest.draft: the still-valid tail of the previous suggestion, the
  text after the cursor), proposed position by position while the generated tokens follow it;
- `ngram`: n-gram lookup: the last n generated-or-prompt ids (n = 3, 2, 1) found earlier in the prompt, the
  generated text or the caller's draft (or, without one, other text the caller expects pieces of: EditRequest.lookup,
  the model's previous text for the document when the user typed something else), and the ids that followed that
  occurrence proposed (a `bytes.rfind` over the
  ids packed as int32: microseconds for a 4,000-token prompt).

`Verifier` runs generation's steps with the drafts (engine/generate.py calls it); `sample_draft` is the sampling
rule for a drafted position. `DraftPolicy` lives as long as the engine: per source it learns how often a drafted
token holds, and from the step times it measures, what a k-token step costs against a one-token step; it drafts the
length that maximises tokens per second of step time, and not at all where no length pays (then it still probes now
and then, with 2 tokens).
"""

from __future__ import annotations

import sys
import time
from array import array
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from waferline.engine.kvcache import Scored, Session
from waferline.engine.sampling import draw, nucleus

SOURCES = ("caller", "ngram")
NGRAMS = (3, 2, 1)  # suffix lengths n-gram lookup tries, longest first
MAX_DRAFT = 15  # drafted tokens per step: with the token before them, the fused step's 16
PROBE_EVERY = 8  # where drafting does not pay, still draft (2 tokens) every this many steps, to notice a change
PRIOR_ACCEPT = {"caller": 0.8, "ngram": 0.5}  # per-token acceptance assumed before a source has been seen
MIN_GAIN = 1.05  # draft only where the expected tokens per unit of step time beat plain steps by this much
PRIOR_SLOPE = 0.25  # extra cost of each further token in a step, in one-token steps, before any is measured
REFRESH_EVERY = 8  # steps between refreshes of the step costs a draft length is chosen by
STEP_WINDOW = 8  # observed times kept per step length (the least of them counts)
MEASURED_ENOUGH = 3  # observed times after which a length is priced by its own, not by the line over all lengths


@dataclass
class SourceStats:
    prior: float = 0.5  # acceptance assumed before any is seen
    proposed: int = 0  # drafted tokens verified
    accepted: int = 0  # of them, kept
    rejections: int = 0  # verifications that ended on a wrong drafted token

    @property
    def acceptance(self) -> float:
        """Chance that the next drafted token holds, given the previous did (smoothed towards the prior)."""
        return (self.accepted + 2 * self.prior) / (self.accepted + self.rejections + 2)


@dataclass
class DraftPolicy:
    """How long a draft to verify, per source, learnt online; shared by every request of an engine."""

    max_draft: int = MAX_DRAFT
    stats: dict[str, SourceStats] = field(default_factory=lambda: {s: SourceStats(PRIOR_ACCEPT[s]) for s in SOURCES})
    # tokens in a step -> seconds: the least of its last STEP_WINDOW observed times (a shared machine only ever adds
    # time: waiting for a core, a cache another process emptied)
    step_s: dict[int, float] = field(default_factory=dict)
    _recent: dict[int, deque[float]] = field(default_factory=dict)
    _skipped: int = 0
    _table: list[float] | None = None  # cost(t) for t = 0 .. max_draft + 1, as of the last refresh
    _choices: dict[float, list[tuple[int, float]]] = field(default_factory=dict)  # per acceptance, for that table
    _observed: int = 0

    def observe_step(self, tokens: int, seconds: float) -> None:
        recent = self._recent.get(tokens)
        new = recent is None
        if recent is None:
            recent = self._recent[tokens] = deque(maxlen=STEP_WINDOW)
        recent.append(seconds)
        self.step_s[tokens] = min(recent)
        self._observed += 1
        # the costs `length` reads are refreshed for a step length not seen before, else every REFRESH_EVERY steps
        # (the times change slowly; refreshing them each step cost more than the step saved by drafting)
        if new or self._observed % REFRESH_EVERY == 0:
            self._table = None

    def cost(self, tokens: int) -> float:
        """A step of `tokens` tokens in one-token steps: its own measured time where it was measured at least
        MEASURED_ENOUGH times (the least of its recent times, over the one-token step's), else the line 1 + s
        (tokens - 1), s the median over the measured lengths of each one's extra cost per token (weighted by how
        many times it was measured); the prior before any. A length timed once on a bad moment, and then not
        drafted again, is priced by the line, not by that moment (a per-length table kept such a cost for good);
        a length drafted often is priced by what it costs, which matters because the curve is not a line: flat
        while a step is bound by reading the weights, steeper once each token's arithmetic counts (on the shipped
        model the line through the short lengths priced 11 tokens at 2.9 one-token steps, against 3.8 measured)."""
        one = self.step_s.get(1)
        if tokens <= 1:
            return 1.0
        if one and len(self._recent.get(tokens, ())) >= MEASURED_ENOUGH:
            return max(1.0, self.step_s[tokens] / one)
        slopes = sorted(
            ((seconds / one - 1.0) / (t - 1), len(self._recent[t])) for t, seconds in self.step_s.items() if t > 1
        ) if one else []  # fmt: skip
        if not slopes:
            return 1.0 + PRIOR_SLOPE * (tokens - 1)
        return 1.0 + max(_weighted_median(slopes), 0.0) * (tokens - 1)

    def length(self, source: str, available: int) -> int:
        """Tokens of `available` to draft from `source` now (0: step one token)."""
        limit = min(available, self.max_draft)
        if limit <= 0:
            return 0
        a = round(min(self.stats[source].acceptance, 0.999), 2)  # to 1%: the choices below are kept per value
        if self._table is None:
            self._table = [self.cost(t) for t in range(self.max_draft + 2)]
            self._choices = {}
        choices = self._choices.get(a)
        if choices is None:
            choices = self._choices[a] = self._best_lengths(a, self._table)
        best_k, best = choices[limit]
        if best < MIN_GAIN:
            best_k = 0
            self._skipped += 1
            if self._skipped % PROBE_EVERY == 0:
                return min(2, limit)
        return best_k

    def _best_lengths(self, a: float, costs: list[float]) -> list[tuple[int, float]]:
        """For each limit 0..max_draft, the draft length up to it that maximises (1 + a + ... + a^k) / c(k + 1),
        the expected tokens per unit of step time, and that rate (0 and 1.0: no draft, one token a step)."""
        out = [(0, 1.0)]
        best_k, best = 0, 1.0
        expected, term = 1.0, 1.0  # tokens a step yields with k drafted: 1 + a + ... + a^k
        for k in range(1, self.max_draft + 1):
            term *= a
            expected += term
            rate = expected / costs[k + 1]
            if rate > best:
                best_k, best = k, rate
            out.append((best_k, best))
        return out

    def record(self, source: str, proposed: int, accepted: int, rejected: bool) -> None:
        s = self.stats[source]
        s.proposed += proposed
        s.accepted += accepted
        s.rejections += int(rejected)


def _weighted_median(pairs: list[tuple[float, int]]) -> float:
    """The value at half the total weight of (value, weight) pairs sorted by value."""
    half, seen = sum(w for _, w in pairs) / 2, 0
    for value, weight in pairs:
        seen += weight
        if seen >= half:
            return value
    return pairs[-1][0]


class Drafter:
    """One request's drafts: n-gram lookup over its context, and the caller's expected text."""

    def __init__(
        self, context: Sequence[int], policy: DraftPolicy, *, caller: Sequence[int] = (), also: Sequence[int] = ()
    ) -> None:
        self.policy = policy
        self.caller = list(caller)
        # searched first by n-gram lookup: the caller's draft, else other text the caller expects pieces of (`also`)
        self._corpus = self.caller or list(also)
        self._caller_buf = array("i", self._corpus).tobytes()
        self._buf = bytearray(array("i", context).tobytes())  # prompt ids, then each generated id, as int32
        self._generated: list[int] = []
        self._follows_caller = bool(self.caller)  # the generated ids so far are a prefix of the caller's draft

    def push(self, token: int) -> None:
        """A token generation kept (sampled): the context grows by it."""
        n = len(self._generated)
        if self._follows_caller and (n >= len(self.caller) or self.caller[n] != token):
            self._follows_caller = False
        self._generated.append(token)
        self._buf += token.to_bytes(4, sys.byteorder, signed=True)  # as array("i") packs it

    def propose(self, room: int) -> tuple[str, list[int]]:
        """(source, up to `room` ids likely to follow the context); ("", []) when no source offers any or the
        policy says drafting does not pay."""
        if room <= 0:
            return "", []
        if self._follows_caller:
            rest = self.caller[len(self._generated) :]
            k = self.policy.length("caller", min(room, len(rest)))
            if k:
                return "caller", rest[:k]
        found = self._lookup(room)
        if not found:
            return "", []
        k = self.policy.length("ngram", len(found))
        return ("ngram", found[:k]) if k else ("", [])

    def _lookup(self, room: int) -> list[int]:
        """The ids after the latest earlier occurrence of the context's last n ids (longest n first), searched in
        the caller's draft, then in the context itself."""
        buf, total = self._buf, len(self._buf) // 4
        for n in NGRAMS:
            if total <= n:
                continue
            pattern = bytes(buf[-4 * n :])
            hit = _rfind_aligned(self._caller_buf, pattern, len(self._caller_buf))
            if hit is not None and hit + n < len(self._corpus):
                return self._corpus[hit + n : hit + n + room]
            hit = _rfind_aligned(buf, pattern, 4 * (total - 1))  # an occurrence ending before the last id
            if hit is not None:
                end = min(hit + n + room, total)
                return array("i", bytes(buf[4 * (hit + n) : 4 * end])).tolist()
        return []


def _rfind_aligned(buf: bytes | bytearray, pattern: bytes, end: int) -> int | None:
    """The id index of the last occurrence of `pattern` (int32 ids) in buf[:end] on an id boundary, or None."""
    while True:
        at = buf.rfind(pattern, 0, end)
        if at < 0:
            return None
        if at % 4 == 0:
            return at // 4
        end = at + len(pattern) - 1


def sample_draft(
    logits: Tensor,
    draft: int,
    *,
    temperature: float = 0.0,
    top_p: float = 1.0,
    generator: torch.Generator | None = None,
) -> int:
    """Next id from logits (vocab,) when `draft` was proposed for it: distributed exactly as `sample`.

    Greedy: the argmax (the draft holds only if it is the argmax). Sampled, the rule for a draft that put all its
    mass on one token: keep `draft` with probability p(draft), else draw from p with `draft` removed, renormalised;
    P(draft) = p(draft) and P(y) = (1 - p(draft)) p(y) / (1 - p(draft)) = p(y) for every other y.
    """
    if temperature <= 0:
        return int(logits.argmax())
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    if top_p < 1.0:  # the nucleus `sample` draws from, as a full-vocabulary distribution
        kept, order = nucleus(probs, top_p)
        probs = torch.zeros_like(probs).scatter_(0, order, kept)
        probs /= probs.sum()
    u = float(torch.rand((), generator=generator))
    if u < float(probs[draft]):
        return draft
    residual = probs.clone()
    residual[draft] = 0.0
    if float(residual.sum()) <= 0.0:
        return draft
    return draw(residual, generator)


class Verifier:
    """Speculative decoding's steps for `generate` (which makes one only with a drafter): the drafted tokens of the
    last step while generation walks through them.

    After a step that fed [token, d1..dm], the cache holds the ds too and `left` of them are pending, with their
    logits rows; a sampled token equal to the next d is a hit (its row is taken, no step), any other ends the draft
    and the ds left are truncated, so the cache again holds exactly the prompt and the tokens kept but the last.
    """

    def __init__(self, session: Session, drafter: Drafter, *, greedy: bool = False) -> None:
        self.session = session
        self.drafter = drafter
        self.greedy = greedy  # tokens are the argmax: a row after the first whose argmax is not its draft is unread
        self.draft: list[int] = []  # the last step's drafted ids
        self.left = 0  # of them, not yet taken nor dropped: draft[-left:]
        self._rows: Tensor | None = None  # the last step's logits, row i predicting what follows its i-th id
        self._stats: tuple[list[int], list[float], list[float]] = ([], [], [])  # their argmax, max, logsumexp
        self.source = ""
        self.proposed = self.kept = 0  # of the current draft
        self.drafted = self.accepted = 0
        self.per_source: dict[str, list[int]] = {}

    @property
    def held(self) -> int:
        """Cache length plain decoding would have now (drafted tokens not yet taken do not count)."""
        return self.session.length - self.left

    def next_draft(self) -> int | None:
        return self.draft[-self.left] if self.left else None

    def resolve(self, token: int) -> bool:
        """Whether the sampled `token` is the next drafted one; if not, the rest of the draft is dropped."""
        self.drafter.push(token)
        if not self.left:
            return False
        if token == self.draft[-self.left]:
            return True
        self._end(rejected=True)
        return False

    def take(self) -> Scored:
        """The logits row of the drafted token just kept (a Scored made only for the rows taken)."""
        row = self._row(len(self.draft) - self.left + 1)
        self.left -= 1
        self.kept += 1  # counted when its row is used: then decode_steps + accepted = plain decoding's steps
        if not self.left:
            self._end(rejected=False)
        return row

    def step(self, token: int, room: int) -> Scored:
        """Feed `token` (and a draft of at most `room` tokens after it); logits predicting what follows `token`."""
        source, draft = self.drafter.propose(room)
        t0 = time.perf_counter()
        if not draft:
            row = self.session.step(token)
            self._observe(1, t0)
            return row
        rows = self.session.verify([token, *draft])
        self._observe(1 + len(draft), t0)
        self._rows, self._stats = rows, self.session.model.row_stats(rows, draft if self.greedy else ())
        self.draft, self.left = draft, len(draft)
        self.source, self.proposed, self.kept = source, len(draft), 0
        return self._row(0)

    def _row(self, i: int) -> Scored:
        """Row i of the last k-token step, with its stats (made here for a row past the first draft the argmax
        missed, where greedy stats stop: a token chosen under token healing's mask can still be that draft)."""
        assert self._rows is not None
        tops, maxes, lses = self._stats
        if i >= len(tops):
            one = self._rows[i : i + 1]
            top, top_logit, lse = self.session.model.row_stats(one)
            return Scored(one, 0, top[0], top_logit[0], lse[0])
        return Scored(self._rows, i, tops[i], maxes[i], lses[i])

    def finish(self) -> None:
        """Generation ended: forget drafted tokens not taken (the cache holds the prompt and the kept tokens)."""
        if self.left:
            self._end(rejected=False)

    def _observe(self, tokens: int, t0: float) -> None:
        self.drafter.policy.observe_step(tokens, time.perf_counter() - t0)

    def _end(self, *, rejected: bool) -> None:
        if self.left:
            self.session.truncate(self.session.length - self.left)
            self.left = 0
        self._rows = None
        self.drafter.policy.record(self.source, self.proposed, self.kept, rejected)
        self.drafted += self.proposed
        self.accepted += self.kept
        counts = self.per_source.setdefault(self.source, [0, 0])
        counts[0] += self.proposed
        counts[1] += self.kept
