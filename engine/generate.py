"""Generation as free functions over a KV-cached `Session` (the shape of gpt-fast's generate.py).

`prefill` runs prompt ids in chunks, `sample` picks the next id, and `generate` ties them together with the rules a
code-completion request needs: stop tokens, stop strings (on detokenized text), an optional stop rule on the text
(the server's syntax check), a token limit, a wall-clock budget, a per-token streaming callback and a cancellation
check between tokens. Its decode loop feeds one token a step (`Session.step`: on the CPU one call of the fused C
step); with a drafter, a speculation `Verifier` (engine/speculate.py) feeds the token and a draft after it instead.

Budget and cancellation are checked at token boundaries (and cancellation also between prefill chunks), never in
the middle of a forward pass, so a session's cache always holds exactly `session.tokens`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import torch
from torch import Tensor

from waferline.engine.healing import Healing
from waferline.engine.kvcache import Session, scored
from waferline.engine.sampling import draw, nucleus
from waferline.engine.speculate import Drafter, Verifier, sample_draft

STOP_REASONS = ("stop_token", "stop_string", "stop_rule", "max_tokens", "time_budget", "cancelled", "context_full")
DEFAULT_CHUNK = 512  # prefill tokens per forward pass: bounds activation memory, lets cancellation in between
STREAM_CONTEXT = 8  # prompt ids a detokenizer sees before the first new one (spaces at word starts depend on them)


class TextStream(Protocol):
    """Incremental detokenization: deltas whose concatenation (plus `finish()`) equals decoding all the ids."""

    def push(self, token_id: int) -> str: ...
    def finish(self) -> str: ...


class Detokenizer(Protocol):
    """What generation needs from a tokenizer (engine.tokenizer.Tokenizer is one)."""

    def stream(self, *, context: Sequence[int] = (), skip_special_tokens: bool = True) -> TextStream: ...


# on_token(token_id, text_delta): text_delta is the text this token makes safe to show: "" while a character is
# incomplete or while the text could still be the start of a stop string. Text held back when generation ends (a
# partial stop string that never completed, bytes of an unfinished character) is in the result's `text` only.
TokenCallback = Callable[[int, str], None]


@dataclass
class GenerationResult:
    tokens: list[int]  # generated ids; a stop token that ended generation is not included
    text: str  # their text, cut before a stop string that ended generation ("" without a tokenizer)
    stop_reason: str  # one of STOP_REASONS
    prompt_tokens: int
    reused_tokens: int  # prompt tokens whose keys and values the session already held
    prefilled_tokens: int  # prompt tokens computed now: prompt_tokens - reused_tokens
    prefill_s: float
    decode_s: float  # from the end of prefill to the end, sampling and detokenization included
    decode_steps: int  # forward passes after prefill: one token each, or a token and its draft (speculation)
    stop_token: int | None = None
    # Natural-log probability of each generated token under the distribution it was drawn from (after healing's
    # mask), and of the stop token that ended generation: the model's own confidence, which the server calibrates.
    token_logprobs: list[float] = field(default_factory=list)
    stop_logprob: float | None = None
    # Where each generated token's text ends in `text` (characters, healed text left out; past a stop string's cut
    # for the tokens after it): what is left of a suggestion once the user typed its start has these tokens'
    # probabilities (the server re-gates it, features/suggestion_cache.py).
    token_ends: list[int] = field(default_factory=list)
    # CPU seconds of this process (time.process_time) in prefill and decode: on a machine other jobs share, CPU time
    # shows what the work costs while wall time also counts waiting for a core
    timings: dict[str, float] = field(default_factory=dict)
    # Speculative decoding: drafted tokens verified, and of them kept (each kept one is a step saved), per source
    # (engine/speculate.py SOURCES) as [proposed, accepted].
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    draft_sources: dict[str, list[int]] = field(default_factory=dict)

    @property
    def new_tokens(self) -> int:
        return len(self.tokens)

    @property
    def decoded_tokens(self) -> int:
        """Next-token predictions decode made: one per step, plus one per kept drafted token."""
        return self.decode_steps + self.accepted_tokens

    @property
    def tokens_per_step(self) -> float:
        return self.decoded_tokens / self.decode_steps if self.decode_steps else 0.0

    @property
    def prefill_tok_s(self) -> float:
        return self.prefilled_tokens / self.prefill_s if self.prefill_s > 0 else 0.0

    @property
    def decode_tok_s(self) -> float:
        """Effective decode speed: tokens decoded per second (with speculation, more than steps per second)."""
        return self.decoded_tokens / self.decode_s if self.decode_s > 0 else 0.0

    @property
    def ms_per_token(self) -> float:
        return 1000.0 * self.decode_s / self.decoded_tokens if self.decoded_tokens else 0.0


def prefill(
    session: Session,
    ids: Sequence[int],
    *,
    chunk_size: int = DEFAULT_CHUNK,
    should_cancel: Callable[[], bool] | None = None,
) -> Tensor | None:
    """Append `ids` to the session's cache in chunks; the last position's logits (vocab,), or None if cancelled.

    Cancellation is checked between chunks; the cache then holds the chunks already run (still a valid prefix).
    """
    assert len(ids) > 0, "prefill needs at least one token"
    assert chunk_size > 0, f"chunk_size must be positive, got {chunk_size}"
    logits = None
    for i in range(0, len(ids), chunk_size):
        if i > 0 and should_cancel is not None and should_cancel():
            return None
        logits = session.forward(ids[i : i + chunk_size])
    assert logits is not None
    return logits[-1]


def sample(
    logits: Tensor, *, temperature: float = 0.0, top_p: float = 1.0, generator: torch.Generator | None = None
) -> int:
    """Next id from logits (vocab,): argmax when temperature is 0, else softmax(logits / T) cut to nucleus `top_p`."""
    if temperature <= 0:
        return int(logits.argmax())
    probs = torch.softmax(logits.float() / temperature, dim=-1)  # (vocab,)
    if top_p < 1.0:
        kept, order = nucleus(probs, top_p)
        return int(order[draw(kept, generator)])
    return draw(probs, generator)


def generate(
    session: Session,
    prompt_ids: Sequence[int],
    *,
    max_new_tokens: int,
    temperature: float = 0.0,
    top_p: float = 1.0,
    seed: int | None = None,
    stop_token_ids: Iterable[int] = (),
    stop_strings: Sequence[str] = (),
    stop_rule: Callable[[str], bool] | None = None,
    tokenizer: Detokenizer | None = None,
    time_budget_s: float | None = None,
    on_token: TokenCallback | None = None,
    should_cancel: Callable[[], bool] | None = None,
    chunk_size: int = DEFAULT_CHUNK,
    clock: Callable[[], float] = time.perf_counter,
    healing: Healing | None = None,
    drafter: Drafter | None = None,
) -> GenerationResult:
    """Complete `prompt_ids` in `session`, reusing the cached prefix it shares with them.

    With `healing` (waferline.engine.healing), `prompt_ids` is `healing.prompt`: the first tokens are drawn only from
    those that spell the healed text again (`healing.allowed`, then `healing.mask` for the rest of it), and that text
    is left out of the result's text and of the streamed deltas (the tokens keep it); those tokens do count against
    `max_new_tokens`.

    Greedy when temperature is 0; otherwise sampled, reproducibly when `seed` is given. `time_budget_s` is wall
    clock from this call (by `clock`), checked after each new token: the prefill always completes, and the first
    token, which costs only a sample of prefill's logits, is always produced. Raises ValueError for a prompt that
    does not fit the session's context, and for stop strings or a stop rule without a tokenizer.

    With a `drafter` (engine/speculate.py, made over the same prompt), decode is speculative: each step feeds the
    last token and a draft of the ones after it in one pass (`Session.verify`); the drafted tokens that sampling
    keeps (`sample_draft`) need no step of their own, and the rest are truncated from the cache. The tokens are
    those plain decoding writes: the same for greedy decoding, the same distribution when sampling.
    """
    prompt = list(prompt_ids)
    if len(prompt) > session.max_tokens:
        raise ValueError(
            f"prompt too long: {len(prompt)} tokens, but the context holds {session.max_tokens} "
            f"(the model's {session.model.args.max_seq_len}, or the session's cap)"
        )
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    if (stop_strings or stop_rule is not None) and tokenizer is None:
        raise ValueError("stop strings and stop rules work on text: pass the tokenizer")
    if not 0.0 < top_p <= 1.0:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    if healing is not None and (tokenizer is None or healing.prompt != prompt):
        raise ValueError("healing needs the tokenizer, and prompt_ids must be healing.prompt")
    stops = frozenset(stop_token_ids)
    start, start_cpu = clock(), time.process_time()
    deadline = None if time_budget_s is None else start + time_budget_s
    if should_cancel is not None and should_cancel():
        return GenerationResult([], "", "cancelled", len(prompt), 0, 0, 0.0, 0.0, 0)
    with torch.inference_mode():
        reused = session.reuse_prefix(prompt)
        logits = prefill(session, prompt[reused:], chunk_size=chunk_size, should_cancel=should_cancel)
        prefill_end, prefill_end_cpu = clock(), time.process_time()
        prefilled = session.length - reused
        if logits is None:
            return GenerationResult([], "", "cancelled", len(prompt), reused, prefilled, prefill_end - start, 0.0, 0)
        generator = None
        if temperature > 0:
            generator = torch.Generator(device=logits.device)
            generator.manual_seed(seed) if seed is not None else generator.seed()
        text = _TextTracker(tokenizer, prompt, stop_strings, skip=healing.text if healing is not None else "")
        heal_left = healing.text if healing is not None else ""  # of the healed text, what is still to be written
        if healing is not None:
            logits = healing.mask(logits)
        row = scored(session.model, logits.unsqueeze(0).contiguous())[0]
        tokens: list[int] = []
        steps = 0
        stop_token = None
        reason = "max_tokens"
        logprobs: list[float] = []
        ends: list[int] = []
        stop_logprob = None
        spec = None if drafter is None else Verifier(session, drafter, greedy=temperature <= 0)
        while len(tokens) < max_new_tokens:  # here `row` predicts the next token
            if heal_left and tokens:  # still spelling the healed text: only its tokens (the first row is masked)
                assert healing is not None
                row = scored(session.model, healing.mask(row.logits, heal_left).unsqueeze(0).contiguous())[0]
            draft = None if spec is None else spec.next_draft()
            if temperature <= 0:  # greedy: the argmax, drafted or not (`sample`, `sample_draft`)
                token = row.top
            elif draft is None:
                token = sample(row.logits, temperature=temperature, top_p=top_p, generator=generator)
            else:
                token = sample_draft(row.logits, draft, temperature=temperature, top_p=top_p, generator=generator)
            hit = spec is not None and spec.resolve(token)
            logprob = row.logprob(token)
            if token in stops:
                reason, stop_token, stop_logprob = "stop_token", token, logprob
                break
            tokens.append(token)
            logprobs.append(logprob)
            if heal_left:
                assert healing is not None
                heal_left = healing.left_after(heal_left, token)
            delta, found = text.push(token)
            ends.append(len(text.full))
            if on_token is not None:
                on_token(token, delta)
            if found:
                reason = "stop_string"
                break
            if stop_rule is not None and stop_rule(text.text):
                reason = "stop_rule"
                break
            if len(tokens) == max_new_tokens:
                break
            if should_cancel is not None and should_cancel():
                reason = "cancelled"
                break
            if deadline is not None and clock() >= deadline:
                reason = "time_budget"
                break
            if (session.length if spec is None else spec.held) >= session.max_tokens:
                reason = "context_full"
                break
            if spec is None:  # plain decoding: one token a step
                row = session.step(token)
            elif hit:  # the drafted token was fed with the step before: its logits are already there
                row = spec.take()
                continue
            else:
                room = min(max_new_tokens - len(tokens), session.max_tokens - session.length) - 1
                row = spec.step(token, room)
            steps += 1
        if spec is not None:
            spec.finish()
        if reason != "stop_string":
            tail = text.finish()  # bytes that never completed a character: streamed too, so the deltas make the text
            if tail and tokens and on_token is not None:
                on_token(tokens[-1], tail)
    end, end_cpu = clock(), time.process_time()
    return GenerationResult(
        tokens=tokens,
        text=text.text,
        stop_reason=reason,
        prompt_tokens=len(prompt),
        reused_tokens=reused,
        prefilled_tokens=prefilled,
        prefill_s=prefill_end - start,
        decode_s=end - prefill_end,
        decode_steps=steps,
        stop_token=stop_token,
        token_logprobs=logprobs,
        stop_logprob=stop_logprob,
        token_ends=ends,
        timings={"prefill_cpu_s": prefill_end_cpu - start_cpu, "decode_cpu_s": end_cpu - prefill_end_cpu},
        drafted_tokens=0 if spec is None else spec.drafted,
        accepted_tokens=0 if spec is None else spec.accepted,
        draft_sources={} if spec is None else spec.per_source,
    )


class _TextTracker:
    """Detokenizes generated ids as they come and finds stop strings in the text, holding back what could start one."""

    def __init__(
        self, tokenizer: Detokenizer | None, prompt: list[int], stop_strings: Sequence[str], *, skip: str = ""
    ) -> None:
        self.stream = None if tokenizer is None else tokenizer.stream(context=prompt[-STREAM_CONTEXT:])
        self.skip = skip  # text the first tokens repeat from the document (token healing): never shown
        self.stop_strings = [s for s in stop_strings if s]
        self.full = ""  # all text decoded so far
        self.shown = 0  # how much of `full` was handed to the callback
        self.cut: int | None = None  # where a stop string begins, once one is found

    @property
    def text(self) -> str:
        return self.full if self.cut is None else self.full[: self.cut]

    def push(self, token: int) -> tuple[str, bool]:
        """Add one token; (text now safe to show, whether a stop string was completed)."""
        if self.stream is None:
            return "", False
        before = len(self.full)
        self.full += self._unskipped(self.stream.push(token))
        if not self.stop_strings:
            return self._show(len(self.full)), False
        # a stop string that ends in the new text can begin up to len(stop) - 1 characters before it
        longest = max(len(s) for s in self.stop_strings)
        search_from = max(0, before - longest + 1)
        hits = [i for i in (self.full.find(s, search_from) for s in self.stop_strings) if i >= 0]
        if hits:
            self.cut = min(hits)
            return self._show(self.cut), True
        return self._show(len(self.full) - self._held_back()), False

    def finish(self) -> str:
        """Flush what the detokenizer and the stop-string check held back; the text still unshown."""
        if self.stream is not None:
            self.full += self._unskipped(self.stream.finish())
        return self._show(len(self.full))

    def _unskipped(self, new: str) -> str:
        """`new` without the part of `skip` it repeats; on a mismatch (not expected) skipping ends, text kept."""
        if not self.skip:
            return new
        n = 0
        while n < min(len(new), len(self.skip)) and new[n] == self.skip[n]:
            n += 1
        if n < len(new) and n < len(self.skip):
            self.skip = ""
            return new
        self.skip = self.skip[n:]
        return new[n:]

    def _held_back(self) -> int:
        """Length of the longest end of the text that is a proper prefix of a stop string."""
        for n in range(min(len(self.full), max(len(s) for s in self.stop_strings) - 1), 0, -1):
            tail = self.full[-n:]
            if any(s.startswith(tail) for s in self.stop_strings):
                return n
        return 0

    def _show(self, upto: int) -> str:
        upto = max(upto, self.shown)
        delta = self.full[self.shown : upto]
        self.shown = upto
        return delta
