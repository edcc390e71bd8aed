"""Evaluation cases drawn from held-out files with a fixed seed: single-line and syntax-node fill-in-the-middle.

A case is the whole file split at the middle: the model sees a window of the prefix and suffix (as a server would
send it), and the filled file (full prefix + prediction + full suffix) is what the parse check reads.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from waferline.training.data import SourceFile
from waferline.training.fim import Span, line_rest_span, nodes_by_kind, parse

FIM_KINDS = ("block", "expression", "arguments")  # SAFIM's three: block, control/expression, API call arguments


@dataclass(frozen=True)
class Case:
    task: str  # "line" or "fim"
    kind: str  # "line_rest", or one of FIM_KINDS
    path: str
    text: str  # the whole file
    span: Span

    @property
    def prefix(self) -> str:
        return self.text[: self.span.start]

    @property
    def target(self) -> str:
        return self.text[self.span.start : self.span.end]

    @property
    def suffix(self) -> str:
        return self.text[self.span.end :]


def line_cases(files: Sequence[SourceFile], n: int, seed: int) -> list[Case]:
    """n cursors at a random column of a random non-blank line of a random file; the target is the rest of the line."""
    rng = random.Random(f"line-{seed}")
    out: list[Case] = []
    while files and len(out) < n:
        f = rng.choice(files)
        span = line_rest_span(f.text, rng)
        if span is not None and span.end - span.start <= 200:
            out.append(Case("line", "line_rest", f.rel_path, f.text, span))
    return out


def fim_cases(files: Sequence[SourceFile], n: int, seed: int, max_chars: int = 400) -> list[Case]:
    """n whole nodes removed, kinds in turn (block, expression, argument list), each from a random file."""
    rng = random.Random(f"fim-{seed}")
    nodes = {f.rel_path: nodes_by_kind(parse(f.text), f.text, FIM_KINDS) for f in files}
    out: list[Case] = []
    attempts = 0
    while files and len(out) < n and attempts < 50 * n:
        attempts += 1
        kind = FIM_KINDS[len(out) % len(FIM_KINDS)]
        f = rng.choice(files)
        spans = [s for s in nodes[f.rel_path][kind] if s.end - s.start <= max_chars]
        if spans:
            out.append(Case("fim", kind, f.rel_path, f.text, rng.choice(spans)))
    return out


def edit_similarity(a: str, b: str) -> float:
    """1 - Levenshtein(a, b) / max(len): 1.0 for equal strings, 0.0 for nothing in common."""
    if a == b:
        return 1.0
    if not a or not b:
        return 0.0
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return 1.0 - prev[-1] / max(len(a), len(b))


def parses(text: str) -> bool:
    return not parse(text).root_node.has_error
