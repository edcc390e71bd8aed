"""`waferline/ask`'s answer streamed (server/features/ask_stream.py), without a server: the streamed text is always the
start of the final answer, however the model's text is cut into pieces; deltas are throttled; nothing is sent once
closed; the token is read as LSP's ProgressToken."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pygls.exceptions import JsonRpcInvalidParams

from waferline.server.features.ask import ground_answer
from waferline.server.features.ask_stream import AnswerStream, partial_result_token, reply_so_far, stable_end
from waferline.server.model_tasks import without_reasoning
from waferline.server.repository.evidence import Evidence

ROOT = Path("/repo")
EVIDENCE = [
    Evidence(
        "definition", ROOT / "shop/pricing.py", ((19, 0), (22, 0)), "function apply_tax", "def apply_tax", "py", 1
    ),
    Evidence("usage", ROOT / "shop/checkout.py", ((4, 0), (4, 20)), "use of apply_tax", "apply_tax(x)", "py", 1),
]


def ground(text: str) -> str:
    return ground_answer(text, EVIDENCE, ROOT)


# Model text made of what grounding and reasoning look at: citations, links, `file:line` mentions, brackets, spaces.
PIECES = st.sampled_from([
    "[", "]", "(", ")", "[1]", "[2]", "[9]", "](x)", "pricing.py:20", "checkout.py:5", "other.py:3", " ", "\n", "  ",
    "the", "tax", "1", ".", ":", "<think>", "</think>", "<th", "ink>", "é", "py",
])  # fmt: skip


@given(st.lists(PIECES, max_size=30), st.data())
def test_what_is_streamed_is_always_the_start_of_the_final_answer(pieces: list[str], data: st.DataObject) -> None:
    text = "".join(pieces)
    final = ground(without_reasoning(text))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=8)))
    before = ""
    for cut in [*cuts, len(text)]:
        reply = reply_so_far(text[:cut])
        shown = ground(reply[: stable_end(reply)])
        assert final.startswith(shown), (text[:cut], shown, final)
        assert shown.startswith(before), "what was sent is never taken back"
        before = shown


def test_stable_end_waits_for_whitespace_and_closed_brackets() -> None:
    assert stable_end("It adds tax") == len("It adds ")
    assert stable_end("See [1") == len("See ")
    assert stable_end("See [1] and [lin") == len("See [1] and ")
    assert stable_end("See [the link](shop/pri") == len("See ")
    assert stable_end("See [the link](x) now ") == len("See [the link](x) now ")
    assert stable_end("pricing.py:2") == 0, "a mention may still grow: pricing.py:20"


def test_a_reasoning_block_is_not_streamed() -> None:
    assert reply_so_far("<thi") == "" and reply_so_far("  <think>why") == ""
    assert reply_so_far("<think>why</think>\n It adds") == "It adds"
    assert reply_so_far("It <think>") == "It <think>", "not at the start: text like any other"


def test_the_token_is_an_integer_or_a_string() -> None:
    assert partial_result_token({"question": "q"}) is None
    assert partial_result_token({"question": "q", "partialResultToken": 7}) == 7
    assert partial_result_token({"question": "q", "partialResultToken": "ask-1"}) == "ask-1"
    for bad in (True, 1.5, {"id": 1}, [1]):
        with pytest.raises(JsonRpcInvalidParams):
            partial_result_token({"question": "q", "partialResultToken": bad})


@pytest.mark.asyncio
async def test_deltas_join_to_the_answer_and_a_burst_is_one_delta() -> None:
    sent: list[str] = []
    stream = AnswerStream(lambda value: sent.append(value["delta"]), ground, interval_s=0.02)
    text = "It applies the tax [1] in pricing.py:20 and other.py:3 calls it [2]. Done"
    for ch in text[:20]:  # a burst from the loop's own thread: one wake-up, one delta
        stream.on_text(ch)
    await asyncio.sleep(0)
    assert sent == ["It applies the tax"], "the text up to the last whole word"
    rest = text[20:]
    writer = threading.Thread(target=lambda: [stream.on_text(ch) for ch in rest])  # the engine's thread
    writer.start()
    writer.join()
    await asyncio.sleep(0)
    assert len(sent) == 1, "the next delta waits for the interval"
    await asyncio.sleep(0.1)  # past the interval: the timer has fired
    assert len(sent) == 2
    stream.finish(ground(text))
    assert "".join(sent) == ground(text) and stream.chunks == len(sent) == 3, "the last word comes with finish"
    assert "(not in the evidence)" in sent[1] and "[[1]](file:///repo/shop/pricing.py#L20)" in sent[1]
    stream.on_text(" more")
    await asyncio.sleep(0.05)
    assert stream.chunks == 3, "nothing after the answer"


@pytest.mark.asyncio
async def test_nothing_is_sent_once_closed() -> None:
    sent: list[str] = []
    stream = AnswerStream(lambda value: sent.append(value["delta"]), ground)
    stream.on_text("Cancelled ")
    stream.close()
    stream.on_text("answer ")
    await asyncio.sleep(0.05)
    stream.finish("Cancelled answer")
    assert sent == []
