"""The server's plain functions, without a transport: options, the suggestion cache, stats, ranges."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from fixed_engine import FixedEngine
from hypothesis import given
from hypothesis import strategies as st

from waferline.engine.api import Completion, EditRequest
from waferline.server.features.engine_request import skip_reason
from waferline.server.features.inline import advance
from waferline.server.features.suggestion_cache import SuggestionCache
from waferline.server.option_parsing import options_table, parse_options
from waferline.server.options import Options
from waferline.server.stats import Stats, percentile
from waferline.server.worker import Worker
from waferline.syntax.text import DocumentText

# -- options ---------------------------------------------------------------------------------------------------------


def test_options_from_nested_or_flat_settings() -> None:
    nested, problems = parse_options({"waferline": {"maxTokens": 8, "enable": False}}, Options())
    flat, problems_flat = parse_options({"maxTokens": 8, "enable": False}, Options())
    assert nested == flat == Options(max_tokens=8, enable=False)
    assert problems == problems_flat == []


def test_bad_values_fall_back_to_defaults_with_a_message() -> None:
    base = Options(max_tokens=8, temperature=0.5)
    opts, problems = parse_options(
        {"maxTokens": 0, "temperature": "hot", "backend": "abacus", "precompute": "yes", "bogus": 1}, base
    )
    assert opts.max_tokens == 32 and opts.temperature == 0.0 and opts.backend == "cpu" and opts.precompute is True
    assert len(problems) == 5
    assert any("bogus" in p and "unknown" in p for p in problems)
    assert any("maxTokens" in p and "1 to 512" in p for p in problems)


def test_unnamed_fields_keep_their_value_and_none_settings_change_nothing() -> None:
    base = Options(max_tokens=8)
    assert parse_options({"enable": True}, base)[0].max_tokens == 8
    assert parse_options(None, base) == (base, [])
    opts, problems = parse_options([1, 2], base)
    assert opts == base and problems and "object" in problems[0]


def test_integral_floats_are_accepted_for_integers() -> None:
    assert parse_options({"maxTokens": 16.0}, Options())[0].max_tokens == 16
    assert parse_options({"maxTokens": True}, Options())[1], "a boolean is not an integer"


def test_model_may_be_null_or_a_string() -> None:
    assert parse_options({"model": "tiny"}, Options())[0].model == "tiny"
    assert parse_options({"model": None}, Options(model="tiny"))[0].model is None
    assert parse_options({"model": 3}, Options())[1]


def test_options_table_lists_every_option_in_camel_case() -> None:
    names = [row[0] for row in options_table()]
    assert "maxTokens" in names and "kvCacheMb" in names and len(names) == len(set(names))


# -- the suggestion cache --------------------------------------------------------------------------------------------


def test_typed_through_answers_the_rest() -> None:
    cache = SuggestionCache()
    text = "x = foo(\n"
    cache.remember(text, 8, "a, b)", 8)
    typed = "x = foo(a, \n"
    hit = cache.lookup(typed, 11)
    assert hit is not None and hit.text == "b)" and hit.offset == 11 and hit.replace_end == 11
    assert cache.lookup("x = foo(c\n", 9) is None, "typed something else"
    assert cache.lookup("x = foo(a, b)\n", 13) is None, "typed all of it: nothing left to suggest"
    assert cache.lookup("x = foo(a\n# changed below\n", 9) is None, "the text after the cursor changed"


def test_cache_keeps_the_replaced_range_length() -> None:
    cache = SuggestionCache()
    cache.remember("f()\n", 2, "x)", 3)  # replaces the auto-closed ')'
    hit = cache.lookup("f(x)\n", 3)
    assert hit is not None and hit.text == ")" and hit.replace_end == 4


@given(st.text(max_size=30), st.text(max_size=10), st.text(min_size=1, max_size=10), st.text(max_size=30))
def test_cache_never_answers_what_does_not_extend_the_typed_text(before: str, typed: str, sug: str, after: str) -> None:
    cache = SuggestionCache()
    cache.remember(before + after, len(before), sug, len(before))
    hit = cache.lookup(before + typed + after, len(before) + len(typed))
    if hit is not None:
        assert typed + hit.text == sug and hit.text


# -- stats and ranges ------------------------------------------------------------------------------------------------


def test_percentile_interpolates() -> None:
    assert percentile([], 50) is None
    assert percentile([10.0], 99) == 10.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile(list(map(float, range(101))), 95) == 95.0


def test_stats_snapshot_reports_reuse_and_speed() -> None:
    stats = Stats()
    stats.add_generation(prompt_tokens=100, prefilled_tokens=10, new_tokens=20, prefill_s=0.01, decode_s=0.02)
    stats.add_latency(5.0)
    snap = stats.snapshot()
    assert snap["kv_reuse"] == 0.9 and snap["decode_tok_s"] == 1000.0 and snap["latency_ms_p50"] == 5.0


@pytest.mark.parametrize("encoding", ["utf-16", "utf-8", "utf-32"])
@given(text=st.text(max_size=20), line=st.integers(0, 3), col=st.integers(0, 5))
def test_advance_matches_the_document(encoding: str, text: str, line: int, col: int) -> None:
    head = ("abcde\n" * line) + "abcde"[:col]
    doc = DocumentText(head + text, encoding=encoding)
    start = doc.position_at(len(head))
    assert advance(*start, text, encoding) == doc.position_at(len(head) + len(text))


def test_skip_reasons() -> None:
    opts = Options(max_document_bytes=1024)
    assert skip_reason("x = 1\n", opts) is None
    assert "binary" in (skip_reason("a\0b", opts) or "")
    assert "maxDocumentBytes" in (skip_reason("x" * 2000, opts) or "")
    assert "disabled" in (skip_reason("x", Options(enable=False)) or "")


# -- the worker with the test double ---------------------------------------------------------------------------------


def test_worker_completes_off_the_loop_and_counts() -> None:
    async def main() -> None:
        stats = Stats()
        worker = Worker(stats)
        try:
            assert "test double" in await worker.load(lambda: FixedEngine("abc"))
            req = EditRequest(session_id="d", prefix="x = ", suffix="\n", max_new_tokens=2)
            done = await worker.complete(req)
            assert done is not None and done.text == "ab" and done.stop_reason == "max_tokens"
            again = await worker.complete(EditRequest(session_id="d", prefix="x = 1", suffix="\n"))
            assert again is not None and again.reused_tokens == len("\n\0x = ")
            assert stats.generations == 2
        finally:
            worker.close()

    asyncio.run(main())


def test_worker_answers_superseded_with_none() -> None:
    async def main() -> None:
        worker = Worker(Stats())
        try:
            await worker.load(lambda: FixedEngine("abcdefghij", token_delay_s=0.05))
            first = asyncio.ensure_future(worker.complete(EditRequest(session_id="d", prefix="", suffix="")))
            await asyncio.sleep(0.1)
            second = await worker.complete(EditRequest(session_id="d", prefix="a", suffix=""))
            assert await first is None and second is not None and second.text == "abcdefghij"
        finally:
            worker.close()

    asyncio.run(main())


def test_every_option_is_documented() -> None:
    """docs/configuration.md is the one list the editor clients mirror: it must name every option."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    missing = [name for name, _default, _type in options_table() if f"`{name}`" not in doc]
    assert not missing, f"options missing from docs/configuration.md: {missing}"


def test_recent_edits_of_other_documents_newest_first_within_budget() -> None:
    from waferline.server.features.recent_edits import RecentEdit, recent_edit_snippets

    text = "\n".join(f"line {i}" for i in range(40))
    edits = [
        RecentEdit("old.py", "python", text, 5, at=100.0),
        RecentEdit("new.py", "python", text, 20, at=200.0),
        RecentEdit("other.js", "javascript", text, 3, at=300.0),
        RecentEdit("stale.py", "python", text, 3, at=-1000.0),
    ]
    snippets = recent_edit_snippets(edits, "python", budget=10_000, now=250.0)
    assert [s.path for s in snippets] == ["new.py", "old.py"], "same language, fresh, newest first"
    assert (
        snippets[0].text.startswith("# new.py") and "line 20" in snippets[0].text and "line 27" not in snippets[0].text
    )
    assert recent_edit_snippets(edits, "python", budget=len(snippets[0].text) + 1, now=250.0)[0].path == "new.py"
    assert recent_edit_snippets(edits, "python", budget=10, now=250.0) == []


def test_worker_answers_an_engine_refusal_with_an_empty_completion() -> None:
    class Refusing(FixedEngine):
        def complete(self, request: EditRequest, should_cancel: Callable[[], bool]) -> Completion:
            raise ValueError("prompt too long")

    async def main() -> None:
        stats = Stats()
        worker = Worker(stats)
        try:
            await worker.load(lambda: Refusing("x"))
            done = await worker.complete(EditRequest(session_id="d", prefix="", suffix=""))
            assert done is not None and done.text == "" and done.stop_reason == "error" and stats.errors == 1
        finally:
            worker.close()

    asyncio.run(main())
