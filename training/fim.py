"""Syntax-aware fill-in-the-middle examples: which span becomes the middle, and how an example is laid out.

A middle is a whole tree-sitter node sampled by kind (a statement, a block, an expression, an argument list), the
rest of a line from a cursor inside it, or a plain random span, so the model learns to stop where a syntactic unit
ends and still copes with a cursor anywhere. The token layout is the engine's (`waferline.engine.fim`, family
"waferline"): PSM = [PRE] P [SUF] S [MID] M [EOT]; SPM = [PRE] [SUF] S [MID] P M [EOT]. Prefix, suffix and middle are
encoded separately as plain text, exactly as the engine encodes a prompt, so training and serving see the same ids.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from tree_sitter import Node, Tree

from waferline.engine.tokenizer import Tokenizer
from waferline.syntax.languages import parser_for
from waferline.training.bpe import ENDOFTEXT, FIM_MIDDLE, FIM_PREFIX, FIM_SUFFIX

Order = Literal["psm", "spm"]

# The kinds of middle and how often training draws each (the node kinds fall back to a random span when a file has
# no node of that kind that fits).
SPAN_WEIGHTS: dict[str, float] = {
    "statement": 0.2,
    "block": 0.12,
    "expression": 0.15,
    "arguments": 0.1,
    "line_rest": 0.23,  # cursor inside a line, middle = the rest of that line: what typing needs most
    "random": 0.2,
}
STATEMENT_TYPES = frozenset(
    {
        "expression_statement", "return_statement", "import_statement", "import_from_statement", "raise_statement",
        "assert_statement", "pass_statement", "break_statement", "continue_statement", "delete_statement",
        "global_statement", "nonlocal_statement", "if_statement", "for_statement", "while_statement",
        "try_statement", "with_statement", "function_definition", "class_definition", "decorated_definition",
    }
)  # fmt: skip
EXPRESSION_TYPES = frozenset(
    {
        "call", "binary_operator", "boolean_operator", "comparison_operator", "attribute", "subscript", "string",
        "list", "dictionary", "tuple", "set", "list_comprehension", "dictionary_comprehension", "generator_expression",
        "conditional_expression", "lambda", "not_operator", "unary_operator", "await", "parenthesized_expression",
    }
)  # fmt: skip
NODE_KINDS: dict[str, frozenset[str]] = {
    "statement": STATEMENT_TYPES,
    "block": frozenset({"block"}),
    "expression": EXPRESSION_TYPES,
    "arguments": frozenset({"argument_list"}),
}
MAX_MIDDLE_CHARS = 600
MIN_MIDDLE_CHARS = 1


@dataclass(frozen=True)
class Span:
    """A middle [start, end) in character offsets of the file, and the kind that chose it."""

    start: int
    end: int
    kind: str


def parse(text: str) -> Tree:
    parser = parser_for("python")
    assert parser is not None, "the tree-sitter Python grammar is not installed"
    return parser.parse(text.encode("utf-8"))


def nodes_by_kind(tree: Tree, text: str, kinds: Sequence[str] = tuple(NODE_KINDS)) -> dict[str, list[Span]]:
    """Every named node of the given kinds whose text is 1..MAX_MIDDLE_CHARS characters, as character spans."""
    data = text.encode("utf-8")
    # tree-sitter speaks bytes; map byte offsets to character offsets once (identity for ASCII files)
    ascii_only = len(data) == len(text)
    char_at = None if ascii_only else _byte_to_char(text)
    type_to_kind = {t: k for k in kinds for t in NODE_KINDS[k]}
    out: dict[str, list[Span]] = {k: [] for k in kinds}
    stack: list[Node] = [tree.root_node]
    while stack:
        node = stack.pop()
        kind = type_to_kind.get(node.type)
        if kind is not None and MIN_MIDDLE_CHARS <= node.end_byte - node.start_byte <= 4 * MAX_MIDDLE_CHARS:
            s, e = node.start_byte, node.end_byte
            if char_at is not None:
                s, e = char_at[s], char_at[e]
            if e - s <= MAX_MIDDLE_CHARS:
                out[kind].append(Span(s, e, kind))
        stack.extend(reversed(node.named_children))
    return out


def _byte_to_char(text: str) -> list[int]:
    table: list[int] = []
    for i, ch in enumerate(text):
        table.extend([i] * len(ch.encode("utf-8")))
    table.append(len(text))
    return table


def line_rest_span(text: str, rng: random.Random) -> Span | None:
    """A cursor at a random column of a random non-blank line (after its indentation); middle = the rest of it."""
    lines = text.split("\n")
    starts = [0]
    for line in lines[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    candidates = [i for i, line in enumerate(lines) if len(line.strip()) >= 2]
    if not candidates:
        return None
    i = rng.choice(candidates)
    line = lines[i]
    indent = len(line) - len(line.lstrip())
    col = rng.randrange(indent, len(line.rstrip()))
    return Span(starts[i] + col, starts[i] + len(line), "line_rest")


def random_span(text: str, rng: random.Random) -> Span:
    """Any span of 0..MAX_MIDDLE_CHARS // 2 characters (an empty middle teaches the model to stop at once)."""
    start = rng.randrange(0, len(text) + 1)
    length = min(int(rng.expovariate(1 / 60)), MAX_MIDDLE_CHARS // 2, len(text) - start)
    return Span(start, start + length, "random")


def sample_span(text: str, tree: Tree, rng: random.Random, kind: str | None = None) -> Span:
    """Draw a middle: a kind by SPAN_WEIGHTS (or the one given), then a node of that kind uniformly."""
    if kind is None:
        kind = rng.choices(list(SPAN_WEIGHTS), weights=list(SPAN_WEIGHTS.values()))[0]
    if kind in NODE_KINDS:
        nodes = nodes_by_kind(tree, text, (kind,))[kind]
        if nodes:
            return rng.choice(nodes)
        kind = "line_rest"
    if kind == "line_rest":
        span = line_rest_span(text, rng)
        if span is not None:
            return span
    return random_span(text, rng)


def context_window(text: str, span: Span, prefix_chars: int, suffix_chars: int) -> tuple[str, str, str]:
    """(prefix, middle, suffix) with the prefix and suffix cut to whole lines within the character budgets.

    A server also sends a window around the cursor, not the whole file; cutting at line starts keeps the
    indentation of the first line intact.
    """
    prefix, middle, suffix = text[: span.start], text[span.start : span.end], text[span.end :]
    if len(prefix) > prefix_chars:
        cut = len(prefix) - prefix_chars
        nl = prefix.find("\n", cut)
        prefix = prefix[nl + 1 :] if nl != -1 else prefix[cut:]
    if len(suffix) > suffix_chars:
        nl = suffix.rfind("\n", 0, suffix_chars)
        suffix = suffix[: nl + 1] if nl > 0 else suffix[:suffix_chars]
    return prefix, middle, suffix


@dataclass(frozen=True)
class FimIds:
    """The special ids a layout needs (ids 0..4 in waferline's tokenizer)."""

    eot: int
    prefix: int
    suffix: int
    middle: int

    @classmethod
    def of(cls, tokenizer: Tokenizer) -> FimIds:
        ids = [tokenizer.token_to_id(s) for s in (ENDOFTEXT, FIM_PREFIX, FIM_SUFFIX, FIM_MIDDLE)]
        assert all(i is not None for i in ids), "the tokenizer lacks waferline's special tokens"
        return cls(*(int(i) for i in ids if i is not None))


def fim_prompt(ids: FimIds, p: list[int], s: list[int], order: Order) -> list[int]:
    """The prompt the engine builds for the "waferline" family (see waferline.engine.fim)."""
    if order == "psm":
        return [ids.prefix, *p, ids.suffix, *s, ids.middle]
    return [ids.prefix, ids.suffix, *s, ids.middle, *p]


def fim_example(
    tokenizer: Tokenizer, ids: FimIds, prefix: str, middle: str, suffix: str, order: Order, max_tokens: int
) -> list[int]:
    """One training sequence: the prompt, the middle, then <|endoftext|>, at most max_tokens long.

    When too long, the prefix loses tokens at its start and the suffix at its end (the parts far from the cursor).
    """
    encoded = (tokenizer.encode(prefix), tokenizer.encode(middle), tokenizer.encode(suffix))
    p, m, s = fit_tokens(*encoded, max_tokens, suffix_share=3)
    return [*fim_prompt(ids, p, s, order), *m, ids.eot]


def fit_tokens(
    p: list[int], m: list[int], s: list[int], max_tokens: int, suffix_share: int
) -> tuple[list[int], list[int], list[int]]:
    """Prefix, middle and suffix tokens cut to fit max_tokens with a layout's 4 special tokens: the middle to half
    of max_tokens, then, when the rest is too long, the prefix loses its start and the suffix its end (the parts far
    from the cursor): the suffix keeps room // suffix_share tokens (more where the prefix is shorter than the rest),
    the prefix the rest."""
    m = m[: max_tokens // 2]
    room = max_tokens - len(m) - 4
    if len(p) + len(s) > room:
        keep_s = min(len(s), room // suffix_share)
        keep_p = min(len(p), room - keep_s)
        keep_s = min(len(s), room - keep_p)
        p, s = p[len(p) - keep_p :], s[:keep_s]
    return p, m, s
