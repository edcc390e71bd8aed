"""The model's previous text as a draft (server/features/suggestion_cache.py): when the model is asked again and the
user has typed the start of what it wrote last time, the rest goes to the engine as `EditRequest.draft`; and the
statistics per draft source."""

from __future__ import annotations

import asyncio

from fixed_engine import FixedEngine
from hypothesis import given
from hypothesis import strategies as st

from waferline.server.background import Background
from waferline.server.document import Document
from waferline.server.features.inline import InlineCompletions
from waferline.server.features.suggestion_cache import SuggestionCache
from waferline.server.options import Options
from waferline.server.stats import Stats
from waferline.server.worker import Worker

TEXT = "def area(radius):\n    return 3.14 * radius * radius\n\n\ndef total(values):\n    return "


def test_the_rest_of_the_previous_text_is_the_draft_while_its_start_is_typed() -> None:
    cache = SuggestionCache()
    cache.remember_output(TEXT, len(TEXT), "sum(values)")
    assert cache.draft(TEXT, len(TEXT)) == "sum(values)"  # asked again at the same place: all of it
    assert cache.draft(TEXT + "su", len(TEXT) + 2) == "m(values)"
    assert cache.draft(TEXT + "su)", len(TEXT) + 2) == "m(values)"  # text after the cursor may differ (auto-close)
    assert cache.draft(TEXT + "sx", len(TEXT) + 2) == ""  # typed something else
    assert cache.draft(TEXT + "sum(values)", len(TEXT) + 11) == ""  # typed all of it: nothing left
    assert cache.draft(TEXT[:-1], len(TEXT) - 1) == ""  # the cursor moved back
    edited = "# a comment\n" + TEXT[12:] + "su"  # the text before the cursor changed
    assert cache.draft(edited, len(edited)) == ""


def test_the_newest_matching_text_wins_and_old_ones_are_forgotten() -> None:
    cache = SuggestionCache()
    cache.remember_output(TEXT, len(TEXT), "sum(values)")
    cache.remember_output(TEXT, len(TEXT), "len(values)")
    assert cache.draft(TEXT + "s", len(TEXT) + 1) == "um(values)" and cache.draft(TEXT, len(TEXT)) == "len(values)"
    for i in range(8):
        cache.remember_output(TEXT, 10 + i, "x")
    assert cache.draft(TEXT + "s", len(TEXT) + 1) == ""
    cache.remember_output(TEXT, len(TEXT), "")  # an empty text is no draft
    assert cache.draft(TEXT, len(TEXT)) == ""


@given(before=st.text(max_size=400), output=st.text(min_size=1, max_size=30), typed=st.integers(0, 40),
       after=st.text(max_size=20))  # fmt: skip
def test_a_draft_is_always_the_unseen_rest_of_a_remembered_text(
    before: str, output: str, typed: int, after: str
) -> None:
    cache = SuggestionCache()
    cache.remember_output(before + after, len(before), output)
    typed_text = output[:typed]
    text = before + typed_text + after
    draft = cache.draft(text, len(before) + len(typed_text))
    if len(typed_text) < len(output):
        assert draft == output[len(typed_text) :]
    else:
        assert draft == ""


def test_a_request_after_typing_the_start_of_the_previous_text_sends_the_rest_as_its_draft() -> None:
    stats = Stats()
    worker = Worker(stats)
    doc = Document.open("file:///work/shapes.py", "python", TEXT, version=1)
    inline = InlineCompletions(worker, stats, {doc.uri: doc}, Background())
    engine = FixedEngine("sum(values)")
    options = Options(precompute=False, typed_through_cache=False, warm_up=False)  # the model is asked every time

    async def main() -> None:
        await worker.load(lambda: engine)
        await inline.answer(doc, len(TEXT), options, explicit=False)
        line, character = doc.text.position_at(len(TEXT))
        doc.syntax.apply(doc.text.apply_change(((line, character), (line, character)), "su", None))
        doc.text.version += 1
        await inline.answer(doc, len(TEXT) + 2, options, explicit=False)

    asyncio.run(main())
    worker.close()
    first, second = engine.requests
    assert first.draft == "" and second.draft == "m(values)"


def test_stats_count_drafts_per_source() -> None:
    stats = Stats()
    stats.add_generation(prompt_tokens=10, prefilled_tokens=1, new_tokens=8, prefill_s=0.0, decode_s=0.01,
                         decode_steps=3, drafted_tokens=7, accepted_tokens=5,
                         draft_sources={"caller": [4, 4], "lookup": [3, 1]})  # fmt: skip
    stats.add_generation(prompt_tokens=10, prefilled_tokens=1, new_tokens=2, prefill_s=0.0, decode_s=0.01,
                         decode_steps=2, draft_sources={"lookup": [1, 0]})  # fmt: skip
    sources = stats.snapshot()["draft_sources"]
    assert sources == {
        "caller": {"drafted": 4, "accepted": 4, "acceptance": 1.0},
        "lookup": {"drafted": 4, "accepted": 1, "acceptance": 0.25},
    }
