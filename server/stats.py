"""What the server counts while a developer types, served by the `waferline/stats` request.

The same figures are what `waferline bench-lsp` reports, so a benchmark and a live editor session can be compared
line by line: how many keystrokes came in, how many completion requests, how many were answered with a suggestion,
cancelled or superseded, answered from the typed-through cache, and how much of the prompts the KV cache served.
Latencies here are measured inside the server (request received -> response sent); bench-lsp measures the same from
the client side (keystroke sent -> response received).
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

# Older latencies are dropped past this many, so a server that runs for days keeps a bounded list: the latencies and
# each of the 7 phases, at most 8 x 10,000 floats (~2.6 MB with the deque's blocks; docs/reliability.md, "Memory").
MAX_LATENCIES = 10_000


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (0..100) by linear interpolation between closest ranks, None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    lo = int(rank)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (rank - lo)


@dataclass
class Stats:
    keystrokes: int = 0  # content changes received through didChange
    requests: int = 0  # inline completion + completion requests
    answered: int = 0  # requests answered with at least one suggestion
    empty: int = 0  # requests answered with nothing (no suggestion fit, or completion not wanted here)
    cancelled: int = 0  # cancelled by the client or superseded by a newer request for the same document
    cache_answers: int = 0  # answered from the typed-through or precomputed cache, without the model
    accepted: int = 0  # suggestions the editor reported as accepted (the item's command)
    # What the user kept of suggestions, as the clients report it (`waferline/didAcceptCompletionText`): accepts of
    # the next word, of the next line and of the whole rest, and the characters (code points) they kept together.
    kept: dict[str, int] = field(default_factory=lambda: {"word": 0, "line": 0, "full": 0})
    kept_chars: int = 0
    precomputed: int = 0  # suggestions computed while idle, on the assumption that the shown one is accepted
    held_back: int = 0  # suggestions the model wrote that the confidence gate did not show (minConfidence)
    held_through: int = 0  # requests answered empty at once: the user typed the start of a held-back suggestion
    copied: int = 0  # suggestions the engine took from the server's prompt-lookup candidates
    errors: int = 0  # requests answered with an error (bad input)
    # Text sync (server/app.py `_apply_changes`, docs/reliability.md "Text sync"): a change that could not apply puts
    # its document out of sync until a whole-text change; completions there are answered empty meanwhile.
    desyncs: int = 0  # documents that went out of sync
    resyncs: int = 0  # documents back in sync (a whole-text change)
    changes_dropped: int = 0  # content changes not applied: the one that could not, and ranged ones after it
    out_of_sync_answers: int = 0  # completion requests answered empty because their document was out of sync
    generations: int = 0  # model runs that finished (not superseded)
    # Speculative decoding (engine/speculate.py): model steps taken, draft tokens proposed and accepted by them.
    decode_steps: int = 0
    fallback_answers: int = 0  # answers the local model gave because the remote engine could not (engine/fallback.py)
    chat_generations: int = 0  # model runs for chat-style work (hover summaries, ask, code actions): engine/routing.py
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    # per draft source (engine/speculate.py SOURCES: "caller" is the tail of the model's previous text the server
    # sends, "ngram" n-gram lookup over the prompt): [drafted tokens verified, accepted]
    draft_sources: dict[str, list[int]] = field(default_factory=dict)
    # Warm-ups (server/features/warm.py): prompts prefilled while idle before a request needed them.
    warmups: int = 0  # finished: the document's session holds the prompt at the cursor
    warmups_cancelled: int = 0  # stopped by a request, an edit or another document's focus (what was done stays)
    warmup_tokens: int = 0  # prompt tokens warm-ups prefilled
    # Load shedding (server/shedding.py): work made free by a newer change or request for the same document.
    shed_before_plan: int = 0  # requests stale when their turn came: answered empty before any parse or plan
    shed_before_engine: int = 0  # requests stale after planning or the repository lookup: never queued for the engine
    context_skipped: int = 0  # repository lookups skipped because their request was stale when a thread was free
    context_kept: int = 0  # lookups answered by the context kept for the document's window (features/context_memo.py)
    precompute_yielded: int = 0  # background precomputes given up because real requests were waiting
    index_updates: int = 0  # re-extractions of open documents for the workspace index
    index_coalesced: int = 0  # document changes folded into an index update already waiting for the same document
    prompt_tokens_total: int = 0
    prefilled_tokens_total: int = 0  # prompt tokens the model had to compute; the rest came from the KV cache
    new_tokens_total: int = 0
    decode_s_total: float = 0.0
    prefill_s_total: float = 0.0
    latencies_ms: deque[float] = field(default_factory=lambda: deque(maxlen=MAX_LATENCIES))
    # where the milliseconds of a model answer go: did_change, plan, context, queue, prefill, decode, finish
    phases_ms: dict[str, deque[float]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def count(self, name: str, n: int = 1) -> None:
        """Add to one of the counters above (from any thread): shedding, context, precompute and index counts."""
        with self._lock:
            setattr(self, name, getattr(self, name) + n)

    def add_warmup(self, *, done: bool, prefilled_tokens: int) -> None:
        with self._lock:
            if done:
                self.warmups += 1
            else:
                self.warmups_cancelled += 1
            self.warmup_tokens += prefilled_tokens

    def add_kept(self, kind: str, chars: int) -> None:
        """A client kept `chars` characters of a suggestion by an accept of `kind` (word, line or full)."""
        with self._lock:
            self.kept[kind] += 1
            self.kept_chars += chars

    def add_latency(self, ms: float) -> None:
        with self._lock:
            self.latencies_ms.append(ms)

    def add_phases(self, timings: dict[str, float]) -> None:
        with self._lock:
            for name, ms in timings.items():
                self.phases_ms.setdefault(name, deque(maxlen=MAX_LATENCIES)).append(ms)

    def add_generation(
        self, *, prompt_tokens: int, prefilled_tokens: int, new_tokens: int, prefill_s: float, decode_s: float,
        decode_steps: int = 0, drafted_tokens: int = 0, accepted_tokens: int = 0,
        draft_sources: dict[str, list[int]] | None = None,
    ) -> None:  # fmt: skip
        with self._lock:
            self.generations += 1
            self.decode_steps += decode_steps
            self.drafted_tokens += drafted_tokens
            self.accepted_tokens += accepted_tokens
            for source, (proposed, accepted) in (draft_sources or {}).items():
                counts = self.draft_sources.setdefault(source, [0, 0])
                counts[0] += proposed
                counts[1] += accepted
            self.prompt_tokens_total += prompt_tokens
            self.prefilled_tokens_total += prefilled_tokens
            self.new_tokens_total += new_tokens
            self.prefill_s_total += prefill_s
            self.decode_s_total += decode_s

    def snapshot(self) -> dict[str, Any]:
        """The figures as one JSON-able object (the `waferline/stats` result and bench-lsp's keys)."""
        with self._lock:
            lat = list(self.latencies_ms)
            out: dict[str, Any] = {
                k: getattr(self, k)
                for k in (
                    "keystrokes", "requests", "answered", "empty", "cancelled", "cache_answers", "accepted",
                    "precomputed", "held_back", "held_through", "copied", "errors", "desyncs", "resyncs",
                    "changes_dropped", "out_of_sync_answers", "generations",
                    "prompt_tokens_total", "prefilled_tokens_total", "new_tokens_total", "fallback_answers",
                    "chat_generations", "decode_steps", "drafted_tokens", "accepted_tokens",
                    "shed_before_plan", "shed_before_engine", "context_skipped", "context_kept", "precompute_yielded",
                    "index_updates", "index_coalesced", "warmups", "warmups_cancelled", "warmup_tokens",
                )
            }  # fmt: skip
            out["kept"] = {**self.kept, "chars": self.kept_chars}
            sources = {name: list(counts) for name, counts in self.draft_sources.items()}
            decode_s = self.decode_s_total
            new_tokens = self.new_tokens_total
            phases = {name: list(values) for name, values in self.phases_ms.items()}
        reused = out["prompt_tokens_total"] - out["prefilled_tokens_total"]
        out["kv_reuse"] = round(reused / out["prompt_tokens_total"], 4) if out["prompt_tokens_total"] else None
        # per suggestion answered (an inline completion client shows each one it is answered with, unless typing
        # supersedes it first): what a partial accept adds to whole accepts
        out["kept"]["chars_per_answer"] = round(out["kept"]["chars"] / out["answered"], 3) if out["answered"] else None
        out["decode_tok_s"] = round(new_tokens / decode_s, 1) if decode_s > 0 else None
        steps = out["decode_steps"]
        out["tokens_per_step"] = round((steps + out["accepted_tokens"]) / steps, 3) if steps else None
        out["draft_sources"] = {
            name: {"drafted": d, "accepted": a, "acceptance": round(a / d, 3) if d else None}
            for name, (d, a) in sorted(sources.items())
        }
        for q in (50, 95, 99):
            p = percentile(lat, q)
            out[f"latency_ms_p{q}"] = round(p, 2) if p is not None else None
        out["latency_samples"] = len(lat)
        out["phase_ms_p50"] = {name: round(percentile(v, 50) or 0.0, 2) for name, v in phases.items()}
        return out
