"""KV-cached sessions: one preallocated cache per document, reused across requests by longest common prefix.

A developer types one character; the new prompt shares almost all of its tokens with the previous one. A `Session`
remembers which token ids its cache holds, so `reuse_prefix(prompt)` keeps the longest common prefix and only the
difference is prefilled. A `SessionPool` keys sessions by a string (the server uses one per document), caps the
bytes their caches hold, and evicts whole sessions, least recently used first.

Invariant: `session.tokens` lists exactly the ids whose keys and values sit in `session.kv`, in order
(`len(session.tokens) == session.kv.length`); only `Session.forward`, `Session.verify`, `Session.reuse_prefix` and
`Session.truncate` change either.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from torch import Tensor

from waferline.engine.model import Transformer
from waferline.hardware import KVRef


class Scored(NamedTuple):
    """Row `at` of logits `rows` (n, vocab) with what greedy decoding and the per-token log-probability read from
    it. The row itself (`logits`) is indexed only when asked for: sampling asks, greedy decoding does not (indexing
    a tensor costs about a microsecond, at a few microseconds of Python per token)."""

    rows: Tensor
    at: int
    top: int  # the first index of the largest logit (argmax)
    top_logit: float
    lse: float  # logsumexp of the row

    @property
    def logits(self) -> Tensor:  # (vocab,)
        return self.rows[self.at]

    def logprob(self, token: int) -> float:
        return (self.top_logit if token == self.top else float(self.rows[self.at, token])) - self.lse


def scored(model: Transformer, rows: Tensor) -> list[Scored]:
    """rows (n, vocab) of `model`, each with its argmax and logsumexp (`row_stats`: one
    C call on the fused CPU step, where torch takes two calls of ~10 µs per row)."""
    tops, maxes, lses = model.row_stats(rows)
    return [Scored(rows, i, tops[i], maxes[i], lses[i]) for i in range(len(tops))]


class SessionClosedError(RuntimeError):
    """A session whose cache was evicted or dropped was used again; ask the pool for the session anew."""


class Session:
    """One sequence's KV cache and the token ids it holds. Not thread-safe: one worker thread owns a session."""

    def __init__(self, model: Transformer, session_id: str = "", *, max_tokens: int | None = None) -> None:
        self.model = model
        self.session_id = session_id
        self.kv: KVRef = model.open_cache(max_tokens)  # preallocated once: min(model context, max_tokens) positions
        self.tokens: list[int] = []
        self.closed = False

    @property
    def max_tokens(self) -> int:
        """Positions the cache holds: a prompt plus generated tokens must fit in this many."""
        return self.kv.max_tokens

    @property
    def length(self) -> int:
        return len(self.tokens)

    @property
    def nbytes(self) -> int:
        return self.kv.nbytes

    def reuse_prefix(self, prompt_ids: Sequence[int]) -> int:
        """Keep the longest common prefix of the cache and `prompt_ids`; return how many prompt tokens it covers.

        At least one prompt token is always left to prefill, because generation needs the logits that its forward
        pass yields; so a prompt equal to the cached tokens reuses all but its last token.
        """
        self._check_open()
        if not prompt_ids:
            raise ValueError("the prompt is empty: generation needs at least one token")
        if len(prompt_ids) > self.max_tokens:
            raise ValueError(
                f"prompt of {len(prompt_ids)} tokens does not fit this session's context of {self.max_tokens} tokens"
            )
        n = common_prefix(self.tokens, prompt_ids)
        n = min(n, len(prompt_ids) - 1)
        if n < len(self.tokens):
            self.model.device.kv_truncate(self.kv, n)
            del self.tokens[n:]
        return n

    def forward(self, ids: Sequence[int] | Tensor, *, last_only: bool = True, like_steps: bool = False) -> Tensor:
        """Run `ids` (appended after the cached tokens) through the model: logits (1 or T, vocab); `like_steps`:
        rows equal to one-token steps (`Transformer.forward`)."""
        self._check_open()
        if isinstance(ids, Tensor):
            assert ids.dim() == 1, f"forward takes a (T,) tensor of ids, got {tuple(ids.shape)}"
            ids = ids.tolist()
        assert len(ids) > 0, "forward takes at least one id"
        logits = self.model.forward(ids, self.kv, len(self.tokens), last_only=last_only, like_steps=like_steps)
        self.tokens.extend(ids)
        return logits

    def step(self, token: int) -> Scored:
        """Plain decoding's step: `forward([token])` with less around it (a decode step's few microseconds of Python
        count at ~0.1 ms a step), its row of logits (1, vocab) with the argmax and logsumexp generation reads."""
        self._check_open()
        logits = self.model.forward((token,), self.kv, len(self.tokens))
        self.tokens.append(token)
        top, top_logit, lse = self.model.row_stats(logits)
        return Scored(logits, 0, top[0], top_logit[0], lse[0])

    def verify(self, ids: Sequence[int]) -> Tensor:
        """Run `ids` (a token and the draft after it, appended after the cached tokens) in one step: logits
        (len(ids), vocab), row i predicting what follows ids[i]. Drafted tokens that turn out wrong are taken back
        with `truncate`, so the cache again holds exactly the tokens generation kept."""
        return self.forward(ids, last_only=False, like_steps=True)

    def truncate(self, length: int) -> None:
        """Forget every cached token past the first `length` (tokens scored for a look, not kept)."""
        self._check_open()
        if length < len(self.tokens):
            self.model.device.kv_truncate(self.kv, max(length, 0))
            del self.tokens[max(length, 0) :]

    def reset(self) -> None:
        """Forget every cached token (the allocation stays)."""
        self._check_open()
        self.model.device.kv_truncate(self.kv, 0)
        self.tokens.clear()

    def close(self) -> None:
        """Free the cache. Using the session afterwards raises SessionClosedError."""
        if not self.closed:
            self.model.device.kv_close(self.kv)
            self.tokens.clear()
            self.closed = True

    def _check_open(self) -> None:
        if self.closed:
            raise SessionClosedError(f"session {self.session_id!r} was closed (evicted or dropped)")

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{self.length}/{self.max_tokens} tokens"
        return f"Session({self.session_id!r}, {state})"


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two id sequences."""
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


class SessionPool:
    """Sessions by id, their caches together capped at `max_bytes`, evicted least recently used first.

    Every session gets the same preallocated size, `min(model context, max_tokens_per_session)` positions, so the
    cap bounds memory up front: at most `max_bytes // session_bytes` sessions live at once. Eviction closes a whole
    session (its cache is freed); a caller still holding it gets SessionClosedError, never another session's cache.
    """

    def __init__(
        self, model: Transformer, *, max_bytes: int | None = None, max_tokens_per_session: int | None = None
    ) -> None:
        self.model = model
        self.max_tokens_per_session = min(max_tokens_per_session or model.args.max_seq_len, model.args.max_seq_len)
        self.session_bytes = session_bytes(model, self.max_tokens_per_session)
        if max_bytes is not None and max_bytes < self.session_bytes:
            raise ValueError(
                f"a KV memory cap of {max_bytes:,} bytes cannot hold one session of {self.max_tokens_per_session} "
                f"tokens ({self.session_bytes:,} bytes); raise the cap or lower the tokens per session"
            )
        self.max_bytes = max_bytes
        self._sessions: OrderedDict[str, Session] = OrderedDict()  # least recently used first
        self.evictions = 0

    def get(self, session_id: str) -> Session:
        """The session for `session_id`, opened (evicting the least recently used to fit) if it is not live."""
        session = self._sessions.get(session_id)
        if session is not None:
            self._sessions.move_to_end(session_id)
            return session
        if self.max_bytes is not None:
            while self._sessions and self.bytes_used + self.session_bytes > self.max_bytes:
                _, victim = self._sessions.popitem(last=False)
                victim.close()
                self.evictions += 1
        session = Session(self.model, session_id, max_tokens=self.max_tokens_per_session)
        self._sessions[session_id] = session
        return session

    def drop(self, session_id: str) -> None:
        """Close and forget a session (a document closed); unknown ids are ignored."""
        session = self._sessions.pop(session_id, None)
        if session is not None:
            session.close()

    def clear(self) -> None:
        while self._sessions:
            self._sessions.popitem(last=False)[1].close()

    @property
    def bytes_used(self) -> int:
        return len(self._sessions) * self.session_bytes

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._sessions

    def __len__(self) -> int:
        return len(self._sessions)

    def __iter__(self) -> Iterator[str]:
        """Session ids, least recently used first."""
        return iter(list(self._sessions))


def session_bytes(model: Transformer, max_tokens: int) -> int:
    """Bytes one session's preallocated cache takes: keys and values of every layer at every position."""
    a = model.args
    return 2 * a.n_layers * a.n_kv_heads * a.head_dim * model.device.dtype.itemsize * max_tokens
