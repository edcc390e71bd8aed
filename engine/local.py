"""The local engine: the `Engine` interface (engine/api.py) on a model loaded into this process.

An EditRequest becomes a fill-in-the-middle prompt (suffix-prefix-middle for models trained on it, so a keystroke
only appends tokens), generated in the document's KV session, which keeps every shared prefix; a ChatRequest becomes
the model's chat template rendered to tokens (engine/chat.py), generated in a session of its own. Both decode
speculatively (drafts from n-gram lookup and the request's `draft`, verified k tokens per step: engine/speculate.py).
`warm` prefills the prompt `complete` would build into the document's session without decoding, in short chunks so
that a real request waits at most one of them.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import torch

from waferline.engine.api import (
    ENGINE_LANE,
    ChatRequest,
    ChatUnsupported,
    Completion,
    EditRequest,
    EngineInfo,
    ShouldCancel,
)
from waferline.engine.candidates import line_end_ids, preferred, score_candidates
from waferline.engine.chat import chat_prompt_ids, read_chat_template
from waferline.engine.checkpoint import LoadedModel
from waferline.engine.fim import FimTemplate, PrefixTemplate
from waferline.engine.generate import GenerationResult, generate, prefill
from waferline.engine.healing import Healing, TokenHealer
from waferline.engine.kvcache import Session, SessionPool, common_prefix
from waferline.engine.speculate import Drafter, DraftPolicy

FIM_OVERHEAD_TOKENS = 8  # control tokens of a FIM prompt, and a margin
CONTEXT_SAFETY = 0.85  # code denser than the sample (long identifiers, Unicode) takes more tokens per character
# Python code (docstrings, comments, code) whose characters per token size the prompt window: fixed data, so that
# the window does not move when a source file of waferline changes.
CODE_SAMPLE = "code_sample.txt"
# Prefill tokens per forward pass of a warm-up: cancellation is checked between chunks, so a keystroke's request waits
# at most one chunk (~11 ms for 64 tokens of the shipped model on a loaded 2-core machine, against ~20% more prefill
# time in all than 512-token chunks: the warm-up is idle work, the wait is the user's).
WARM_CHUNK = 64


def chars_per_token(loaded: LoadedModel) -> float:
    """The tokenizer's characters per token on the shipped code sample."""
    sample = resources.files("waferline.engine").joinpath(CODE_SAMPLE).read_text(encoding="utf-8")
    return len(sample) / max(len(loaded.tokenizer.encode(sample)), 1)


class LocalEngine:
    """The model in this process, with one KV session per document under a memory cap. See the module docstring."""

    def __init__(
        self,
        loaded: LoadedModel,
        *,
        kv_cache_bytes: int = 256 << 20,
        max_tokens_per_session: int = 4096,
        speculate: bool = True,
    ):
        self.loaded = loaded
        # a model without FIM tokens completes from the prefix, the suffix's first line a stop (engine/fim.py)
        self.fim: FimTemplate | PrefixTemplate = loaded.fim or PrefixTemplate.for_model(
            loaded.tokenizer, loaded.special
        )
        self.chars_per_token = chars_per_token(loaded)
        self.pool = SessionPool(
            loaded.model, max_bytes=kv_cache_bytes, max_tokens_per_session=max_tokens_per_session
        )  # sessions' caches together stay under kv_cache_bytes: least recently used documents are evicted
        # Token healing when the prompt ends at the cursor (suffix-prefix-middle): a cursor inside a word or after
        # indentation no longer makes the model start a new token there (waferline.engine.healing).
        self.healer = TokenHealer(loaded.tokenizer) if self.fim.default_order == "spm" else None
        self.chat_template = read_chat_template(Path(loaded.path)) if loaded.path is not None else None
        self._candidate_stops: tuple[int, ...] | None = None  # FIM stops and line breaks, computed on first use
        # Speculative decoding (engine/speculate.py): drafts from n-gram lookup and the request's `draft`, verified
        # several tokens per step; the policy learns per source how often drafts hold and what a k-token step costs
        # here, and drafts only where that pays. Output is the same either way.
        # Only where verification is exact (`Transformer.exact_verify`): elsewhere greedy text could part at a near-tie.
        self.draft_policy = DraftPolicy() if speculate and loaded.model.exact_verify() else None
        # The server calls this engine on its engine thread; the local fallback behind a remote engine may also be
        # called on a remote document's lane (engine/fallback.py): one call at a time, whichever thread it comes from.
        self._lock = threading.Lock()

    @classmethod
    def load(
        cls,
        model: str | None,
        *,
        backend: str = "cpu",
        weights: str = "auto",
        kv_cache_mb: int = 256,
        threads: int = 0,
        speculate: bool = True,
    ) -> LocalEngine:
        """Load the model (engine/loader.py: `weights` "auto" is the backend's default format) and warm it up.
        `threads` 0 lets the engine choose (one thread for a small model: on a small machine a second thread mostly
        waits at barriers for a core busy with the event loop). `speculate`: speculative decoding (on by default;
        it never changes the text)."""
        from waferline.engine.loader import load, set_threads

        loaded = load(model, backend=backend, weights=weights)
        set_threads(threads or None, loaded.args.n_params, loaded.model)
        engine = cls(loaded, kv_cache_bytes=kv_cache_mb << 20, speculate=speculate)
        engine.first_run()
        return engine

    def first_run(self) -> None:
        """One short, thrown-away generation at load, so that the first keystroke does not pay for first-call
        allocations and dispatch (not the `warmUp` option's prefill ahead of a request: server/features/warm.py)."""
        request = EditRequest(
            session_id="__first_run__", prefix="def f(x):\n    return ", suffix="\n", max_new_tokens=4
        )
        self.complete(request, lambda: False)
        self.drop_session("__first_run__")

    def context_chars(self, max_new_tokens: int) -> int:
        """Characters of prompt text that fit the context, so the server's plan sizes its window to the model and
        the prompt never has to be cut here (a cut that moved with every keystroke would defeat the KV cache)."""
        room = self.pool.max_tokens_per_session - max_new_tokens - FIM_OVERHEAD_TOKENS
        return max(int(room * self.chars_per_token * CONTEXT_SAFETY), 256)

    def describe(self) -> EngineInfo:
        lm = self.loaded
        weights = "random weights" if lm.path is None else str(lm.path)
        placed = lm.model.device.placement()
        return EngineInfo(
            description=f"{lm.name} ({lm.args.n_params / 1e6:.1f}M params, {weights}) on {lm.backend} "
            f"{placed.weights}, FIM {self.fim.family}",
            can_chat=self.chat_template is not None,
            can_warm=True,
        )

    def prompt_ids(self, request: EditRequest, room: int) -> list[int]:
        """The FIM prompt, shortened from its far ends (start of the prefix, end of the suffix) to fit `room`."""
        prefix, suffix = request.prefix, request.suffix
        for _ in range(8):
            ids: list[int] = self.fim.build(prefix, suffix)
            if len(ids) <= room:
                return ids
            keep = max(len(ids) - room, 1) / len(ids)  # roughly the share of characters to drop
            cut_p, cut_s = int(len(prefix) * keep) + 1, int(len(suffix) * keep) + 1
            prefix, suffix = prefix[cut_p:], suffix[: max(len(suffix) - cut_s, 0)]
        raise ValueError(f"could not fit the prompt into {room} tokens")

    def lane(self, request: EditRequest | ChatRequest, key: str) -> str:
        return ENGINE_LANE

    def _prompt(self, session: Session, request: EditRequest) -> tuple[list[int], Healing | None]:
        """The prompt ids `complete` feeds the model for `request` (healed: its last token is re-chosen), and the
        healing."""
        ids = self.prompt_ids(request, session.max_tokens - request.max_new_tokens)
        healing = self.healer.heal(ids) if self.healer is not None and request.prefix else None
        return (healing.prompt if healing is not None else ids), healing

    def warm(self, request: EditRequest, should_cancel: ShouldCancel) -> Completion:
        """Prefill the prompt of `request` into its session, all but its last token (which `complete` always runs
        for its logits), in WARM_CHUNK-token chunks with `should_cancel` checked before each."""
        return self._locked(self._warm, request, should_cancel)

    def _warm(self, request: EditRequest, should_cancel: ShouldCancel) -> Completion:
        session = self.pool.get(request.session_id)
        prompt, _ = self._prompt(session, request)
        t0 = time.perf_counter()
        held = min(common_prefix(session.tokens, prompt), len(prompt) - 1)
        done = Completion(text="", stop_reason="prefilled", prompt_tokens=len(prompt), reused_tokens=held)
        if held >= len(prompt) - 1:  # the session already holds all that a request can reuse
            return done
        if should_cancel():
            done.stop_reason = "cancelled"
            return done
        with torch.inference_mode():
            reused = session.reuse_prefix(prompt)  # cuts what the session holds past the common prefix
            logits = prefill(session, prompt[reused:-1], chunk_size=WARM_CHUNK, should_cancel=should_cancel)
        done.reused_tokens, done.prefilled_tokens = reused, session.length - reused
        done.prefill_s = time.perf_counter() - t0
        if logits is None:
            done.stop_reason = "cancelled"
        return done

    def complete(self, request: EditRequest, should_cancel: ShouldCancel) -> Completion:
        return self._locked(self._complete, request, should_cancel)

    def chat(self, request: ChatRequest, should_cancel: ShouldCancel) -> Completion:
        return self._locked(self._chat, request, should_cancel)

    def _locked(
        self, run: Callable[[Any, ShouldCancel], Completion], request: Any, should_cancel: ShouldCancel
    ) -> Completion:
        """`run(request, should_cancel)` holding the model (another lane's call may hold it meanwhile: wait, giving
        up with a cancelled completion when the request no longer wants it)."""
        while not self._lock.acquire(timeout=0.01):
            if should_cancel():
                return Completion(text="", stop_reason="cancelled")
        try:
            return run(request, should_cancel)
        finally:
            self._lock.release()

    def _complete(self, request: EditRequest, should_cancel: ShouldCancel) -> Completion:
        lm = self.loaded
        session = self.pool.get(request.session_id)
        prompt, healing = self._prompt(session, request)
        caller = (healing.text if healing is not None else "") + request.draft  # the healed text comes first
        result = generate(
            session,
            prompt,
            healing=healing,
            drafter=self._drafter(prompt, caller if request.draft else "", request.lookup),
            max_new_tokens=request.max_new_tokens + (healing is not None),  # the first token re-makes the healed one
            temperature=request.temperature,
            stop_token_ids=tuple(self.fim.stop_ids) + tuple(lm.special.stop_ids),
            stop_strings=(*request.stop_strings, *self.fim.stop_strings(request.suffix)),
            stop_rule=request.should_stop,
            tokenizer=lm.tokenizer,
            time_budget_s=request.time_budget_s,
            should_cancel=should_cancel,
        )
        completion = _completion(result)
        if request.candidates and result.stop_reason != "cancelled" and not should_cancel():
            return self._prefer_candidate(session, prompt, healing, request, completion)
        return completion

    def _prefer_candidate(
        self, session: Session, prompt: list[int], healing: Healing | None, request: EditRequest, own: Completion
    ) -> Completion:
        """The model's own text, or the first plausible one of the request's candidates (engine/candidates.py)."""
        if self._candidate_stops is None:
            self._candidate_stops = (*self.fim.stop_ids, *line_end_ids(self.loaded.tokenizer))
        t0 = time.perf_counter()
        best = preferred(score_candidates(
            session, prompt, request.candidates, self.loaded.tokenizer, stop_ids=self._candidate_stops,
            healing=healing,
        ))  # fmt: skip
        own.timings["candidates_s"] = time.perf_counter() - t0
        if best is None or best.text == own.text:
            return own
        return dataclasses.replace(
            own, text=best.text, stop_reason="stop_token", new_tokens=len(best.token_logprobs),
            token_logprobs=best.token_logprobs, stop_logprob=best.stop_logprob, token_ends=[], chosen="candidate",
        )  # fmt: skip

    def _chat(self, request: ChatRequest, should_cancel: ShouldCancel) -> Completion:
        if self.chat_template is None:
            raise ChatUnsupported("the model has no chat template")
        lm = self.loaded
        session = self.pool.get(request.session_id)
        room = session.max_tokens - request.max_new_tokens
        ids = chat_prompt_ids(lm.tokenizer, self.chat_template, request.messages, room)
        stops = (*lm.special.stop_ids, *sorted(lm.tokenizer.control_ids))  # any control token ends a reply
        on_text = request.on_text

        def streamed(_token: int, delta: str) -> None:
            if delta and on_text is not None:
                on_text(delta)

        result = generate(
            session, ids, max_new_tokens=request.max_new_tokens, temperature=request.temperature,
            stop_token_ids=stops, tokenizer=lm.tokenizer, time_budget_s=request.time_budget_s,
            should_cancel=should_cancel, drafter=self._drafter(ids, ""), on_token=streamed if on_text else None,
        )  # fmt: skip
        return _completion(result)

    def _drafter(self, prompt: list[int], caller: str, also: str = "") -> Drafter | None:
        """Drafts for one request: n-gram lookup over `prompt` (and `also` first, without a caller's draft), and the
        caller's expected text."""
        if self.draft_policy is None:
            return None
        tk = self.loaded.tokenizer
        ids = tk.encode(caller) if caller else []
        return Drafter(prompt, self.draft_policy, caller=ids, also=tk.encode(also) if also else [])

    def drop_session(self, session_id: str) -> None:
        with self._lock:
            self.pool.drop(session_id)


def _completion(result: GenerationResult) -> Completion:
    return Completion(
        text=result.text,
        stop_reason=result.stop_reason,
        prompt_tokens=result.prompt_tokens,
        reused_tokens=result.reused_tokens,
        prefilled_tokens=result.prefilled_tokens,
        new_tokens=result.new_tokens,
        prefill_s=result.prefill_s,
        decode_s=result.decode_s,
        timings=dict(result.timings),
        token_logprobs=list(result.token_logprobs),
        stop_logprob=result.stop_logprob,
        token_ends=list(result.token_ends),
        decode_steps=result.decode_steps,
        drafted_tokens=result.drafted_tokens,
        accepted_tokens=result.accepted_tokens,
        draft_sources={k: list(v) for k, v in result.draft_sources.items()},
    )
