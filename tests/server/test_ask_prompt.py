"""What the chat model reads of an ask's evidence (server/features/ask.py `PromptMemory`, server/repository/evidence.py
`order_for_reuse`): the index's best PROMPT_EVIDENCE_ITEMS pieces, those the last prompt held first and in its order
(so the KV session serves them), never a piece the index did not give, and every piece shown numbered as the model
read it."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from waferline.server.features.ask import EVIDENCE_ITEMS, PROMPT_EVIDENCE_ITEMS, PromptMemory
from waferline.server.repository.evidence import Evidence, evidence_key, order_for_reuse

ROOT = Path("/repo")


def piece(n: int) -> Evidence:
    return Evidence("match", ROOT / f"m{n % 3}.py", ((n, 0), (n, 9)), f"function f{n}", f"def f{n}()", "python", -n)


def test_the_last_prompts_pieces_come_first_in_its_order() -> None:
    a, b, c, d, e = (piece(n) for n in range(5))
    assert order_for_reuse([a, b, c], []) == [a, b, c], "nothing before: the index's order"
    assert order_for_reuse([d, b, e, a], [evidence_key(x) for x in (a, b, c)]) == [a, b, d, e]
    assert order_for_reuse([c, b, a], [evidence_key(x) for x in (a, b, c)]) == [a, b, c], "the same prompt again"


lists = st.lists(st.integers(0, 20), unique=True, max_size=EVIDENCE_ITEMS).map(lambda ns: [piece(n) for n in ns])


@given(st.lists(lists, min_size=1, max_size=5))
def test_the_model_reads_the_best_pieces_and_the_shown_ones_are_numbered_alike(asks: list[list[Evidence]]) -> None:
    memory = PromptMemory()
    before: list[Evidence] = []
    for evidence in asks:
        prompted, shown = memory.order(evidence)
        assert sorted(map(evidence_key, prompted)) == sorted(map(evidence_key, evidence[:PROMPT_EVIDENCE_ITEMS]))
        assert shown[: len(prompted)] == prompted and sorted(map(evidence_key, shown)) == sorted(
            map(evidence_key, evidence)
        ), "the shown list starts with what the model read: citation [n] is the same piece in both"
        kept = [e for e in before if e in prompted]
        assert prompted[: len(kept)] == kept, "what the last prompt held comes first, in its order"
        before = prompted
