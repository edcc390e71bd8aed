"""`waferline serve` with a real model (the `tiny` preset: random weights, real decode through the engine).

What a random model writes is noise, so these tests assert what holds for any output: every request is answered,
a shown suggestion starts at the cursor and leaves the document with no syntax error it did not already have, and
typing reuses the document's KV cache (most prompt tokens are not prefilled again).
"""

from __future__ import annotations

import pytest
from lsp_support import Typist, inline, lsp_session, open_doc, stats
from tree_sitter import Parser

from waferline.syntax.languages import language
from waferline.syntax.tree import collect_errors

pytestmark = pytest.mark.asyncio

URI = "file:///tmp/waferline-test/shapes.py"
SOURCE = (
    'import math\n\n\ndef area(r):\n    """Area of a circle."""\n    return \n\n\ndef main():\n    print(area(2))\n'
)


def errors(text: str) -> int:
    lang = language("python")
    assert lang is not None
    source = text.encode()
    return len(collect_errors(Parser(lang).parse(source).root_node, source))


async def test_typing_with_the_tiny_model() -> None:
    async with lsp_session("vscode", {"model": "tiny", "precompute": False}) as client:
        open_doc(client, URI, SOURCE)
        typist = Typist(client, URI, 5, 11)
        text = SOURCE
        cursor = SOURCE.index("return ") + len("return ")
        shown = 0
        for ch in "math.pi":
            typist.type(ch)
            text = text[:cursor] + ch + text[cursor:]
            cursor += 1
            items = await inline(client, URI, typist.position)
            assert len(items) <= 1
            for item in items:
                assert isinstance(item.insert_text, str) and item.insert_text
                assert item.range is not None and item.range.start == typist.position
                replaced = item.range.end.character - item.range.start.character
                applied = text[:cursor] + item.insert_text + text[cursor + replaced :]
                # The invariant: no syntax error the document did not already have ("return math." has one).
                assert errors(applied) <= errors(text), f"suggestion {item.insert_text!r} added a syntax error"
                shown += 1
        s = await stats(client)
        assert s["requests"] == 7 and s["answered"] + s["empty"] + s["cancelled"] == 7
        assert s["generations"] >= 1 and "tiny" in s["engine"]
        assert s["prompt_tokens_total"] > 0
        # Each keystroke appends to the prompt (suffix-prefix-middle), so the cache serves most of it.
        assert s["prefilled_tokens_total"] < s["prompt_tokens_total"] / 2, s
        assert shown == s["answered"]
