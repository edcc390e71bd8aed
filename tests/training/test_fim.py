import random

import pytest

from waferline.engine.fim import FimTemplate
from waferline.engine.tokenizer import Tokenizer
from waferline.training.data import SourceFile
from waferline.training.dataset import ExampleConfig, build_examples, pack_rows
from waferline.training.fim import (
    NODE_KINDS,
    FimIds,
    context_window,
    fim_example,
    fim_prompt,
    nodes_by_kind,
    parse,
    sample_span,
)


def _node_types_at(text: str, start: int, end: int) -> set[str]:
    """Types of every node whose byte range is exactly [start, end) in characters (ASCII offsets here)."""
    data = text.encode("utf-8")
    b_start, b_end = len(text[:start].encode()), len(text[:end].encode())
    assert len(data) >= b_end
    found, stack = set(), [parse(text).root_node]
    while stack:
        n = stack.pop()
        if n.start_byte == b_start and n.end_byte == b_end:
            found.add(n.type)
        stack.extend(n.children)
    return found


@pytest.mark.parametrize("kind", list(NODE_KINDS))
def test_node_middles_are_exactly_a_syntax_node_of_their_kind(kind: str, texts: list[str]) -> None:
    rng = random.Random(0)
    seen = 0
    for text in texts:
        tree = parse(text)
        if not nodes_by_kind(tree, text, (kind,))[kind]:
            continue
        for _ in range(5):
            span = sample_span(text, tree, rng, kind)
            assert span.kind == kind
            assert _node_types_at(text, span.start, span.end) & NODE_KINDS[kind], text[span.start : span.end]
            seen += 1
    assert seen > 0


def test_node_spans_use_character_offsets_in_non_ascii_files(texts: list[str]) -> None:
    text = next(t for t in texts if "café" in t)
    spans = nodes_by_kind(parse(text), text, ("arguments",))["arguments"]
    assert all(text[s.start] == "(" and text[s.end - 1] == ")" for s in spans)


@pytest.mark.parametrize("order", ["psm", "spm"])
def test_both_orders_reassemble_the_window_and_match_the_engine_template(
    tokenizer: Tokenizer, order: str, texts: list[str]
) -> None:
    ids = FimIds.of(tokenizer)
    template = FimTemplate.for_family("waferline", tokenizer)
    rng = random.Random(1)
    for text in texts:
        for _ in range(10):
            span = sample_span(text, parse(text), rng)
            prefix, middle, suffix = context_window(text, span, 10_000, 10_000)
            assert prefix + middle + suffix == text
            ex = fim_example(tokenizer, ids, prefix, middle, suffix, order, max_tokens=4096)  # type: ignore[arg-type]
            # the prompt part is token for token what the engine sends for this model at serving time
            prompt = template.build(prefix, suffix, order)  # type: ignore[arg-type]
            assert ex[: len(prompt)] == prompt
            assert ex[-1] == ids.eot
            m = tokenizer.decode(ex[len(prompt) : -1])
            assert m == middle
            if order == "psm":
                p_ids = ex[1 : ex.index(ids.suffix)]
                s_ids = ex[ex.index(ids.suffix) + 1 : ex.index(ids.middle)]
            else:
                s_ids = ex[2 : ex.index(ids.middle)]
                p_ids = prompt[ex.index(ids.middle) + 1 :]
            assert tokenizer.decode(p_ids) + m + tokenizer.decode(s_ids) == text


def test_long_examples_are_trimmed_far_from_the_cursor(tokenizer: Tokenizer) -> None:
    ids = FimIds.of(tokenizer)
    prefix, middle, suffix = "a = 1\n" * 200, "b = 2\n", "c = 3\n" * 200
    ex = fim_example(tokenizer, ids, prefix, middle, suffix, "psm", max_tokens=64)
    assert len(ex) <= 64
    assert fim_prompt(ids, [], [], "psm")[0] == ex[0]
    assert tokenizer.decode(ex[ex.index(ids.middle) + 1 : -1]) == middle
    # what survives is the prefix's end and the suffix's start: the text next to the cursor
    p = tokenizer.decode(ex[1 : ex.index(ids.suffix)])
    s = tokenizer.decode(ex[ex.index(ids.suffix) + 1 : ex.index(ids.middle)])
    assert prefix.endswith(p) and suffix.startswith(s)


def test_examples_mix_plain_and_fim_and_pack_into_rows(tokenizer: Tokenizer, texts: list[str]) -> None:
    files = [SourceFile(f"f{i}.py", t) for i, t in enumerate(texts * 5)]
    examples, counts = build_examples(files, tokenizer, ExampleConfig(seq_len=64, fim_rate=0.5), seed=3)
    assert counts["plain"] > 0 and counts.get("psm", 0) + counts.get("spm", 0) > 0
    assert examples == build_examples(files, tokenizer, ExampleConfig(seq_len=64, fim_rate=0.5), seed=3)[0]
    rows = pack_rows(examples, 64)
    assert rows.shape[1] == 65 and bool((rows[1:, 0] == rows[:-1, -1]).all())
