"""Text the server offers as a completion (copied from the document: prompt lookup), scored by the model itself.

A model of a few million parameters cannot know a project's names, but the document often holds the right line
already: the same call three lines up, the other half of a symmetric expression. The server sends such candidates
with its request (EditRequest.candidates); after the model's own greedy completion, each candidate is scored by
teacher forcing (one forward pass over its tokens, after the prompt the session already holds: the backend's
k-token verification step when the candidate fits it, a prefill otherwise). The first
candidate (the server sends them best first) that the model finds plausible replaces the greedy text: its mean
log-probability per token, the stop included, at least MIN_MEAN_LOGPROB. On line cases from held-out files
(`waferline eval-lookup`, docs/benchmarks-quality.md) comparing totals instead (the greedy path against a whole
copy) took the exact matches from 29 to 30 of 283; this rule to 39, every case where a candidate was right. The
prompt in the session is not changed, so the next keystroke still only appends.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import torch

from waferline.engine.healing import Healing
from waferline.engine.kvcache import Session
from waferline.engine.tokenizer import Tokenizer

MIN_MEAN_LOGPROB = -2.5  # a geometric-mean token probability of about 8%


@dataclass(frozen=True)
class Scored:
    text: str
    token_logprobs: list[float]
    stop_logprob: float

    @property
    def mean(self) -> float:
        return (sum(self.token_logprobs) + self.stop_logprob) / (len(self.token_logprobs) + 1)


def preferred(scored: Iterable[Scored]) -> Scored | None:
    """The first plausible candidate (see the module docstring), or None to keep the model's own text.

    (Also requiring it to be within a few nats of the greedy text's own mean changed nothing on the held-out cases:
    greedy means are at most 0, so any margin of 2.5 nats or more is implied.)"""
    return next((c for c in scored if c.mean >= MIN_MEAN_LOGPROB), None)  # lazily: later candidates go unscored


def line_end_ids(tokenizer: Tokenizer) -> list[int]:
    """Ids of ordinary tokens whose text starts with a line break: a single-line completion may end with any."""
    skip = tokenizer.special_ids | tokenizer.control_ids
    return [
        i
        for i in range(tokenizer.vocab_size)
        if i not in skip and tokenizer.decode([i], skip_special_tokens=False).startswith("\n")
    ]


@torch.inference_mode()
def score_candidates(
    session: Session,
    prompt: Sequence[int],
    candidates: Sequence[str],
    tokenizer: Tokenizer,
    *,
    stop_ids: Sequence[int],
    healing: Healing | None = None,
) -> Iterator[Scored]:
    """Each candidate's token log-probabilities after `prompt`, and the log-probability of stopping after it
    (any of `stop_ids`), one candidate at a time as the caller asks (each costs a forward pass). With `healing`,
    `prompt` is the healed prompt and a candidate is scored as the healed text plus the candidate, the tokens that
    spell the healed text drawn from the ids the healing allows, as generation draws them. After each, the session
    holds the prompt alone."""
    prompt = list(prompt)
    if not prompt:
        return
    stops = torch.tensor(list(stop_ids), dtype=torch.long)
    for text in candidates:
        ids = tokenizer.encode((healing.text if healing is not None else "") + text)
        if not ids or len(prompt) + len(ids) >= session.max_tokens:
            continue
        if healing is not None and not bool((healing.allowed == ids[0]).any()):
            continue  # its tokens do not begin where the healed prompt expects
        cached = session.reuse_prefix(prompt)  # at most all but the last prompt token, whose logits predict ids[0]
        run = [*prompt[cached:], *ids]
        # The backend's k-token step where it takes them all (about 2x cheaper than a prefill of a dozen tokens, and
        # the rows generation itself would compute), else a prefill.
        fast = session.model.verifies_in_one_call(len(run))
        logits = session.forward(run, last_only=False, like_steps=fast).float()  # (len(run), vocab)
        logits = logits[len(prompt) - cached - 1 :]  # row j predicts ids[j]; the last row, what follows them
        left = healing.text if healing is not None else ""  # its tokens are drawn as generation draws them
        for j, t in enumerate(ids):
            if not left:
                break
            assert healing is not None
            logits[j] = healing.mask(logits[j], left)
            left = healing.left_after(left, t)
        lp = torch.log_softmax(logits, dim=-1)
        token_lps = [float(lp[j, t]) for j, t in enumerate(ids)]
        stop_lp = float(torch.logsumexp(lp[len(ids), stops], dim=0)) if len(stops) else 0.0
        session.truncate(len(prompt))  # the prompt alone: the next request shares it
        yield Scored(text, token_lps, stop_lp)
