"""A TEST DOUBLE of `waferline serve`, for the editor-client tests only — not the product.

It speaks just enough of waferline's protocol (inline completion with a range and an accept command, the
`waferline/stats` and `waferline/ask` requests, the `waferline/didFocus` notification, which it records and reports
in its stats, hover, configuration, the `waferline/engineState` notification) for the editor clients to be
exercised before or without the real server and its model. Its suggestion is a fixed function of the line being
typed, so that a test can tell which answer it should see. Run: python double_server.py (stdio).
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer

server = LanguageServer("waferline-test-double", "0.0.0")
state: dict[str, Any] = {"requests": 0, "accepted": 0, "settings": {}, "latencies_ms": []}


def suggestion_for(line: str) -> str:
    """What a model might say after `line`: a deterministic, recognisable answer."""
    if line.rstrip().endswith("return"):
        return " a + b"
    if line.strip() == "return":
        return " a + b"
    if line.strip().startswith("return"):
        return "a + b"
    return "pass  # from the test double"


@server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
def inline_completion(ls: LanguageServer, params: types.InlineCompletionParams) -> list[types.InlineCompletionItem]:
    t0 = time.perf_counter()
    state["requests"] += 1
    if state["settings"].get("enable") is False:
        return []
    doc = ls.workspace.get_text_document(params.text_document.uri)
    lines = doc.lines
    line = lines[params.position.line] if params.position.line < len(lines) else ""
    before = line[: params.position.character]
    text = suggestion_for(before)
    pos = params.position
    item = types.InlineCompletionItem(
        insert_text=text,
        range=types.Range(start=pos, end=pos),
        command=types.Command(title="accepted", command="waferline.accepted", arguments=[state["requests"]]),
    )
    state["latencies_ms"].append((time.perf_counter() - t0) * 1000)
    return [item]


@server.command("waferline.accepted")
def accepted(ls: LanguageServer, *args: Any) -> None:
    state["accepted"] += 1


@server.command("waferline.rewrite")
def rewrite(ls: LanguageServer, *args: Any) -> dict[str, Any]:
    state.setdefault("rewrites", []).append(list(args))  # what the client sent, reported by waferline/stats
    return {"applied": False, "reason": "the test double does not rewrite"}


@server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
def did_change_configuration(ls: LanguageServer, params: types.DidChangeConfigurationParams) -> None:
    settings = params.settings or {}
    if isinstance(settings, dict):
        state["settings"] = settings.get("waferline", settings) or {}


@server.feature("waferline/didFocus")
def did_focus(ls: LanguageServer, params: Any) -> None:
    def plain(value: Any) -> Any:
        return {k: plain(v) for k, v in value._asdict().items()} if hasattr(value, "_asdict") else value

    state.setdefault("focus", []).append(plain(params))  # what the client sent, reported by waferline/stats


@server.feature(types.TEXT_DOCUMENT_HOVER)
def hover(ls: LanguageServer, params: types.HoverParams) -> types.Hover:
    return types.Hover(
        contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value="**waferline test double** hover answer")
    )


@server.feature("waferline/stats")
def stats(ls: LanguageServer, params: Any) -> dict[str, Any]:
    return {
        "requests": state["requests"],
        "accepted": state["accepted"],
        "decode_tok_s": 123.4,
        "engine": "waferline test double",
        "latency_ms_p50": 1.0,
        "settings_enable": state["settings"].get("enable", True),
        "rewrites": state.get("rewrites", []),
        "focus": state.get("focus", []),
    }


@server.feature("waferline/ask")
async def ask(ls: LanguageServer, params: Any) -> dict[str, Any]:
    """The question quoted; with a `partialResultToken`, the answer streamed first as the real server does ($/progress
    `{"delta"}` values), a second apart so that a test sees it being written."""
    question = getattr(params, "question", None) or (params.get("question") if isinstance(params, dict) else "")
    token = getattr(params, "partialResultToken", None) or (
        params.get("partialResultToken") if isinstance(params, dict) else None
    )
    answer = f"The test double was asked: *{question}*"
    if token is not None:
        for delta in ("The test double ", answer.removeprefix("The test double ")):
            ls.protocol.notify(types.PROGRESS, types.ProgressParams(token=token, value={"delta": delta}))
            await asyncio.sleep(1.0)
    return {"markdown": f"# Answer\n\n{answer}\n\n- `sample.py:1` defines `add`", "answer": answer}


@server.feature("waferlineTest/engineState")
def engine_state(ls: LanguageServer, params: Any) -> None:
    """Make the double send `waferline/engineState` with these parameters, as the real server does when a remote
    engine stops answering or answers again."""

    def plain(obj: Any) -> Any:  # pygls hands JSON objects over as namedtuple-like Objects
        return {k: plain(v) for k, v in obj._asdict().items()} if hasattr(obj, "_asdict") else obj

    ls.protocol.notify("waferline/engineState", plain(params))


if __name__ == "__main__":
    print("waferline test double on stdio", file=sys.stderr)
    server.start_io()
