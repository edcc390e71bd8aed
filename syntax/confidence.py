"""How likely a suggestion is to be right: a calibrated probability from the model's own token probabilities.

A small model is often unsure, and a wrong suggestion on screen costs the user more than no suggestion: showing
fewer, better suggestions is the trade Copilot and Cursor describe. Each suggestion gets a confidence in [0, 1], a
logistic function of simple features of how it was generated (below); the server hides suggestions under the
`minConfidence` option (automatic trigger) or `minConfidenceInvoked` (the editor's trigger-suggestion key).

The weights are fitted (training/calibrate.py) on the server's own answers to the evaluation's choosing part (code
of distributions never trained on, training/eval-parts.txt), labelled by whether the shown text was exactly right,
so that a confidence of 0.4 means about 40% of such suggestions are right; the threshold is chosen there too, and
checked on the distributions kept aside (docs/benchmarks-quality.md). They are stored in `confidence.json` beside
this module; a checkpoint with different habits deserves its own fit (docs/model-card.md, "Reproducing", says how).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

FEATURES = (
    "mean_logprob",  # mean natural-log probability of the generated tokens
    "min_logprob",  # the least likely token: one wild guess spoils a line
    "first_logprob",  # the first token: the model's certainty about how to start
    "stop_logprob",  # how sure the model was that the text ends there (0 when it did not stop by itself)
    "natural_stop",  # 1 when the model or the syntax ended it, 0 when cut by the token limit or the time budget
    "log_tokens",  # log(1 + generated tokens): long guesses are less often exactly right
    "cut_fraction",  # share of the generated text the finishing rules cut away (repeats, what did not parse)
    "copied",  # 1 when the text is a candidate copied from the document (prompt lookup), not the model's own
    # From the document (document_features): what the editor holds says whether a guess is plausible
    "known_names",  # share of the suggestion's names (the word typed before it included) found in the document
    "in_document",  # 1 when the line as it would read (its start, stripped, and the suggestion) is elsewhere in it
    "log_chars",  # log(1 + characters shown)
)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
NATURAL_STOPS = frozenset({"stop_token", "stop_string", "stop_rule"})
CALIBRATION_FILE = Path(__file__).with_name("confidence.json")


@dataclass(frozen=True)
class Calibration:
    weights: Mapping[str, float]
    bias: float
    fitted_on: str = ""  # what the fit saw (cases, model), for the record

    def confidence(self, features: Mapping[str, float]) -> float:
        z = self.bias + sum(self.weights.get(name, 0.0) * features.get(name, 0.0) for name in FEATURES)
        return 1.0 / (1.0 + math.exp(-max(min(z, 50.0), -50.0)))

    @classmethod
    def from_dict(cls, data: object) -> Calibration:
        if not isinstance(data, Mapping):
            raise ValueError("a confidence calibration is a JSON object")
        weights = data.get("weights")
        bias = data.get("bias")
        if not isinstance(weights, dict) or not isinstance(bias, int | float):
            raise ValueError("a confidence calibration needs 'weights' (feature -> number) and 'bias'")
        unknown = set(weights) - set(FEATURES)
        if unknown:
            raise ValueError(f"unknown confidence features {sorted(unknown)}; known: {', '.join(FEATURES)}")
        return cls({k: float(v) for k, v in weights.items()}, float(bias), str(data.get("fitted_on", "")))

    def to_dict(self) -> dict[str, object]:
        return {"weights": dict(self.weights), "bias": self.bias, "fitted_on": self.fitted_on}


# Used when confidence.json is missing or unreadable: the mean token probability alone (a fair first guess).
PRIOR = Calibration({"mean_logprob": 4.0, "natural_stop": 1.0}, 0.5, "prior: not fitted")


@lru_cache(maxsize=4)
def load_calibration(path: Path = CALIBRATION_FILE) -> Calibration:
    try:
        return Calibration.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return PRIOR


@dataclass(frozen=True)
class Evidence:
    """How the model wrote one suggestion: what its confidence, and that of what is left of it once the user has
    typed its start, are computed from. `token_ends` (where each token's text ends in `generated`) may be empty, when
    the engine cannot say: then only the whole suggestion's confidence is known."""

    token_logprobs: tuple[float, ...]
    token_ends: tuple[int, ...]
    stop_logprob: float | None
    stop_reason: str
    generated: str
    copied: bool = False
    document: Mapping[str, float] | None = None  # document_features of the whole suggestion, kept for its rest

    def features(self, shown: str, typed: int = 0, *, partial: bool = True) -> dict[str, float] | None:
        """The features of `shown[typed:]`, the rest of the suggestion after the user typed `typed` characters of
        it: the tokens that end past them, the same stop. The token the user is typing through counts with its
        probability as written (`partial`), or not at all (as if typing its start had made it certain: asked again,
        the model would draw it from the tokens that start with what was typed). None when the token boundaries are
        unknown and something was typed."""
        if typed == 0:
            lps = self.token_logprobs
        elif len(self.token_ends) == len(self.token_logprobs):
            starts = (0, *self.token_ends[:-1])
            lps = tuple(
                lp
                for lp, start, end in zip(self.token_logprobs, starts, self.token_ends, strict=True)
                if end > typed and (partial or start >= typed)
            )
        else:
            return None
        feats = features(
            lps, self.stop_logprob, self.stop_reason, self.generated[typed:], shown[typed:], copied=self.copied
        )
        if self.document is not None:
            feats.update(self.document, log_chars=math.log1p(len(shown) - typed))
        return feats

    def confidence(self, shown: str, typed: int = 0, *, partial: bool = True) -> float | None:
        feats = self.features(shown, typed, partial=partial)
        return None if feats is None else load_calibration().confidence(feats)


def features(
    token_logprobs: Sequence[float],
    stop_logprob: float | None,
    stop_reason: str,
    generated: str,
    shown: str,
    *,
    copied: bool = False,
) -> dict[str, float]:
    """The features of one suggestion: how it was generated, and how much of it the finishing rules kept."""
    lps = list(token_logprobs) or [0.0]
    return {
        "mean_logprob": sum(lps) / len(lps),
        "min_logprob": min(lps),
        "first_logprob": lps[0],
        "stop_logprob": stop_logprob if stop_logprob is not None else 0.0,
        "natural_stop": 1.0 if stop_reason in NATURAL_STOPS else 0.0,
        "log_tokens": math.log1p(len(token_logprobs)),
        "cut_fraction": 1.0 - min(len(shown), len(generated)) / len(generated) if generated else 0.0,
        "copied": 1.0 if copied else 0.0,
    }


def document_features(text: str, offset: int, shown: str) -> dict[str, float]:
    """Features of showing `shown` at `offset` of `text` that come from the document (see FEATURES): whether the
    names it writes are the document's own, and whether the line it makes is one the document already has. A
    handful of substring searches over the document, once per model answer."""
    line_start = text.rfind("\n", 0, offset) + 1
    line_end = text.find("\n", offset)
    line_end = len(text) if line_end < 0 else line_end
    head = text[line_start:offset]
    word = re.search(r"[A-Za-z0-9_]*$", head)
    written = (word.group(0) if word is not None else "") + shown
    names = [m.group(0) for m in _NAME.finditer(written)]
    elsewhere = text[:line_start] + "\n" + text[line_end:]
    known = sum(1 for n in names if re.search(r"(?<![A-Za-z0-9_])" + re.escape(n) + r"(?![A-Za-z0-9_])", elsewhere))
    line = (head + shown.split("\n", 1)[0]).strip()
    return {
        "known_names": known / len(names) if names else 1.0,
        "in_document": 1.0 if len(line) >= 4 and line in elsewhere else 0.0,
        "log_chars": math.log1p(len(shown)),
    }
