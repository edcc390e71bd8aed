"""Hypothesis strategies for fuzzing the server: texts, positions, params and whole sessions of LSP messages.

A session is drawn step by step (`draw_session`) with a shadow copy of each document (shadow_doc.py), so that
positions land near the text as the server will hold it, and each request carries what the server must answer:

    "result"           a result (or RequestCancelled, when the session cancelled it)
    "invalid_params"   InvalidParams (-32602)
    "not_found"        MethodNotFound (-32601)
    "any"              a result or an error, never InternalError (-32603)
    "optional"         at most one response, never InternalError (a message the server may drop)

URIs are written `@D0`..`@D2` and request ids are the step's index: the runner (lsp_session.py) makes both unique
per session. Message kinds that belong to the JSON-RPC envelope and framing (issue #13, part A) are drawn only when
named in `enabled` (see ENVELOPE_KINDS).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st
from shadow_doc import Refused, ShadowDocument, as_sent

SLOTS = 3  # documents per session
ENVELOPE_KINDS = frozenset(  # the JSON-RPC envelope and framing: checked once part A of issue #13 has landed
    {"batch", "no_jsonrpc", "object_id", "method_not_string", "notification_with_id", "unknown_malformed",
     "cancel_bad_id", "bad_frame"}
)  # fmt: skip

SNIPPETS = ["def f(x):\n    return ", "import os\n", "class A:\n    pass\n", "x = (1, 2", "    ", "\t", "# é\n",
            "s = '😀'\n", "if x:\n", '"""doc"""\n', "\x00", "\u2028", "\ufeff"]  # fmt: skip
_pieces = st.one_of(
    st.text(max_size=12),
    st.sampled_from(SNIPPETS),
    st.sampled_from(["\r\n", "\r", "\n", "\ud800", "\udfff", "\udbff\udc00", "😀", "𝔘", "é", "中"]),
    st.characters(categories=["Cs"]),  # lone surrogates: "\ud800" in the JSON text
    st.integers(100, 5000).map(lambda n: "y" * n),  # a long line
)
_CODE = ["import os\n", "x = 1\n", "def f(x):\n    return ", "\n", "    y = ", "class A:\n    def g(self):\n        ",
         "print(", "# note\r\n", "s = '😀'\n"]  # fmt: skip
texts = st.one_of(
    st.lists(_pieces, max_size=8).map("".join),
    st.lists(st.sampled_from(_CODE), max_size=6).map("".join),  # code a completion fits in: ranges get checked
)

_non_ints = st.sampled_from([1.5, "3", None, True, [], {}, -0.5, 1e30])
_huge = st.sampled_from([2**31 - 1, 2**31, 2**53, 10**30])


@dataclass
class Step:
    message: Any  # a message (ids and URIs as placeholders), or {"raw": str} bytes to write as they are
    expect: str | None = None  # for requests: what the server must answer (see the module docstring)
    kind: str = ""
    cancels: int | None = None  # $/cancelRequest: the step whose request it cancels
    doc: ShadowDocument | None = None  # for requests: the document as the server holds it when the request arrives


@dataclass
class Session:
    steps: list[Step] = field(default_factory=list)
    docs: dict[int, ShadowDocument] = field(default_factory=dict)  # the shadow of each open slot, at the end
    clean: set[int] = field(default_factory=set)  # slots whose every change had well-formed params
    sent: list[str] = field(default_factory=list)  # what the runner wrote, as JSON lines (for a reproduction)

    def __repr__(self) -> str:  # hypothesis prints the failing session: its JSON lines follow in the notes
        return f"Session({len(self.steps)} steps: {', '.join(step.kind for step in self.steps)})"


def uri(slot: int) -> str:
    return f"@D{slot}"


def draw_position(draw: Any, doc: ShadowDocument | None) -> tuple[Any, bool]:
    """A position (JSON) and whether the server must accept it in `doc`."""
    kind = draw(st.sampled_from(["valid"] * 5 + ["past_line_end", "end", "past_end", "negative", "huge", "not_int",
                                                 "missing"]))  # fmt: skip
    n = doc.line_count if doc is not None else 1
    line = draw(st.integers(0, n - 1))
    units = doc.line_units(line) if doc is not None else 0
    if kind == "valid":  # often at a line's end, where a completion is likeliest
        pos: Any = {"line": line, "character": draw(st.sampled_from([units, units]) | st.integers(0, units))}
    elif kind == "past_line_end":
        pos = {"line": line, "character": units + draw(st.integers(1, 1000))}
    elif kind == "end":
        pos = {"line": n, "character": 0}
    elif kind == "past_end":
        pos = {"line": n + draw(st.integers(0, 5)), "character": draw(st.integers(1, 3))}
    elif kind == "negative":
        pos = {"line": draw(st.sampled_from([-1, line])), "character": draw(st.sampled_from([-1, -(2**31)]))}
    elif kind == "huge":
        pos = {"line": draw(_huge), "character": draw(st.integers(0, 3))}
    elif kind == "not_int":
        pos = {"line": draw(_non_ints), "character": 0} if draw(st.booleans()) else {"line": 0, "character": 1.5}
    else:
        pos = draw(st.sampled_from([{"line": 0}, {"character": 0}, None, "0:0", [0, 0]]))
    ok = doc is not None and isinstance(pos, dict) and _accepted(doc, pos)
    return pos, ok


def _accepted(doc: ShadowDocument, pos: dict[str, Any]) -> bool:
    line, character = pos.get("line"), pos.get("character")
    if not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**31 for v in (line, character)):
        return False
    try:
        doc.offset(line, character)  # type: ignore[arg-type]
    except Refused:
        return False
    return True


def well_formed(pos: Any) -> bool:
    """An LSP Position by its types: the server's converter takes it (uintegers)."""
    return isinstance(pos, dict) and all(
        isinstance(pos.get(k), int) and not isinstance(pos.get(k), bool) and 0 <= pos[k] < 2**31
        for k in ("line", "character")
    )


@st.composite
def draw_session(draw: Any, *, enabled: frozenset[str] = frozenset(), max_steps: int = 14, large: int = 0) -> Session:
    """One session of messages on fresh documents (the server is already initialized); with `large`, it begins
    by opening a document of that many characters (a drawn text repeated)."""
    s = Session()
    if large:
        piece = draw(texts.filter(bool))
        text = as_sent((piece * (large // len(piece) + 1))[:large])
        item = {"uri": uri(0), "languageId": "python", "version": 1, "text": text}
        s.steps.append(_notify("textDocument/didOpen", {"textDocument": item}, "open_large"))
        s.docs[0], s.clean = ShadowDocument(uri(0), text, 1), {0}
    for _ in range(draw(st.integers(1, max_steps))):
        _draw_step(draw, s, enabled)
    return s


def _request(method: str, params: Any, expect: str, kind: str = "") -> Step:
    return Step({"jsonrpc": "2.0", "id": None, "method": method, "params": params}, expect, kind or method)


def _notify(method: str, params: Any, kind: str = "") -> Step:
    return Step({"jsonrpc": "2.0", "method": method, "params": params}, None, kind or method)


def _draw_step(draw: Any, s: Session, enabled: frozenset[str]) -> None:
    open_slots = sorted(s.docs)
    slot = draw(st.sampled_from(open_slots) if open_slots and draw(st.integers(0, 3)) else st.integers(0, SLOTS - 1))
    doc = s.docs.get(slot)
    kinds = ["open", "open", "change", "change", "change", "close", "inline", "inline", "completion", "hover",
             "code_action", "resolve", "command", "ask", "document", "stats", "cancel", "save", "config",
             "unknown", "watched", *sorted(enabled)]  # fmt: skip
    kind = draw(st.sampled_from(kinds))
    td = {"uri": uri(slot)}
    if kind == "open":
        text = as_sent(draw(texts))
        version = draw(st.integers(0, 10))
        lang = draw(st.sampled_from(["python", "python", "javascript", "rust", "plaintext", "klingon"]))
        s.steps.append(_notify("textDocument/didOpen", {"textDocument": {**td, "languageId": lang, "version": version,
                                                                         "text": text}}))  # fmt: skip
        s.docs[slot] = ShadowDocument(uri(slot), text, version)
        s.clean.add(slot)
    elif kind == "change":
        changes = []
        shadow = ShadowDocument(uri(slot), doc.text, 0) if doc is not None else None
        for _ in range(draw(st.integers(0, 3))):
            if draw(st.integers(0, 5)) == 0:
                changes.append({"text": draw(texts)})
                continue
            start, _ = draw_position(draw, shadow)
            end, _ = draw_position(draw, shadow) if draw(st.booleans()) else (start, True)
            changes.append({"range": {"start": start, "end": end}, "text": draw(texts)})
        version = (doc.version if doc is not None else 0) + draw(st.integers(0, 2))
        params = {"textDocument": {**td, "version": version}, "contentChanges": changes}
        if all(well_formed(r["range"]["start"]) and well_formed(r["range"]["end"]) for r in changes if "range" in r):
            if doc is not None:
                doc.apply(changes, version)
        else:
            s.clean.discard(slot)  # malformed params: the server drops the notification
            if draw(st.booleans()):  # and the rest of its params may be bad too
                params = draw(st.sampled_from([{"textDocument": td}, {"contentChanges": changes}, [], None]))
        s.steps.append(_notify("textDocument/didChange", params))
    elif kind == "close":
        s.steps.append(_notify("textDocument/didClose", {"textDocument": td}))
        s.docs.pop(slot, None)
    elif kind in ("inline", "completion", "hover"):
        pos, ok = draw_position(draw, doc)
        params: Any = {"textDocument": td, "position": pos}
        if kind == "inline":
            params["context"] = {"triggerKind": draw(st.sampled_from([1, 2]))}
        method = {"inline": "textDocument/inlineCompletion", "completion": "textDocument/completion",
                  "hover": "textDocument/hover"}[kind]  # fmt: skip
        expect = "result" if ok else "invalid_params"
        if draw(st.integers(0, 6)) == 0:
            params, expect = (
                draw(st.sampled_from([None, [], {"position": pos}, {"textDocument": td}])),
                "invalid_params",
            )
        s.steps.append(_request(method, params, expect, kind))
        s.steps[-1].doc = _copy(doc)
    elif kind == "code_action":
        start, ok1 = draw_position(draw, doc)
        end, ok2 = draw_position(draw, doc)
        params = {"textDocument": td, "range": {"start": start, "end": end}, "context": {"diagnostics": []}}
        s.steps.append(_request("textDocument/codeAction", params, "result" if ok1 and ok2 else "invalid_params"))
    elif kind == "resolve":
        s.steps.append(_request("codeAction/resolve", {"title": "t", "data": draw(_action_data(draw, td, doc))}, "any"))
        s.steps[-1].doc = _copy(doc)
    elif kind == "command":
        command = draw(st.sampled_from(["waferline.applyAction", "waferline.rewrite", "waferline.ask",
                                        "waferline.accept", "no.such.command"]))  # fmt: skip
        args = draw(st.sampled_from([[], [None], [1, 2], ["a question"], [{"question": ""}]]))
        if draw(st.booleans()):
            args = [draw(_action_data(draw, td, doc))]
        params = {"command": command, "arguments": args}
        s.steps.append(_request("workspace/executeCommand", params, "any", "command"))
    elif kind == "ask":
        pos, ok = draw_position(draw, doc)
        question = draw(st.sampled_from(["what is f?", "", None, 5, "😀\ud800"]))
        params = {"question": question, "textDocument": td, "position": pos}
        token = draw(st.sampled_from([None, "ask-1", 7, True, {"id": 1}]))  # LSP's partialResultToken, or not one
        if token is not None:
            params["partialResultToken"] = token
        good = isinstance(question, str) and question.strip() != "" and (token is None or token in ("ask-1", 7))
        s.steps.append(_request("waferline/ask", params, "result" if good and ok else "any"))
    elif kind == "document":
        params = {"uri": draw(st.sampled_from([uri(slot), 5, None])), "includeText": draw(st.booleans())}
        expect = "result" if doc is not None and params["uri"] == uri(slot) else "invalid_params"
        s.steps.append(_request("waferline/document", params, expect))
    elif kind == "stats":
        s.steps.append(_request("waferline/stats", draw(st.sampled_from([{}, None, [], 3])), "result"))
    elif kind == "cancel":
        live = [i for i, step in enumerate(s.steps) if step.expect is not None]
        if live and draw(st.booleans()):
            target = draw(st.sampled_from(live))
            s.steps.append(Step({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": None}}, None,
                                "cancel", cancels=target))  # fmt: skip
        else:
            s.steps.append(_notify("$/cancelRequest", {"id": draw(st.sampled_from([987654321, "never-sent"]))}))
    elif kind == "save":
        s.steps.append(_notify("textDocument/didSave", {"textDocument": td}))
    elif kind == "watched":
        s.steps.append(
            _notify(
                "workspace/didChangeWatchedFiles",
                {"changes": [{"uri": "file:///nowhere.py", "type": draw(st.integers(1, 3))}]},
            )
        )
    elif kind == "config":
        settings = draw(st.sampled_from([None, [], "x", {"waferline": {"maxTokens": "many"}},
                                         {"waferline": {"temperature": -3}}, {"waferline": {"minConfidence": None}},
                                         {"waferline": []}]))  # fmt: skip
        s.steps.append(_notify("workspace/didChangeConfiguration", {"settings": settings}))
    elif kind == "unknown":
        rename = {"textDocument": td, "position": {"line": 0, "character": 0}, "newName": "y"}
        references = {**rename, "context": {"includeDeclaration": True}}
        method, params = draw(st.sampled_from([("textDocument/rename", rename), ("no/such", {}), ("no/such", None),
                                               ("textDocument/references", references)]))  # fmt: skip
        s.steps.append(_request(method, params, "not_found", kind))
    else:
        s.steps.extend(_envelope_steps(draw, kind, td))


def _copy(doc: ShadowDocument | None) -> ShadowDocument | None:
    return ShadowDocument(doc.uri, doc.text, doc.version, doc.encoding, doc.in_sync) if doc is not None else None


def _action_data(draw: Any, td: dict[str, Any], doc: ShadowDocument | None) -> Any:
    length = len(doc.text) if doc is not None else 0
    start, _ = draw_position(draw, doc)
    end, _ = draw_position(draw, doc)
    return st.sampled_from([
        {"kind": "repair", "uri": td["uri"], "version": doc.version if doc else 0, "start": 0, "end": length},
        {"kind": "rewrite", "uri": td["uri"], "version": doc.version if doc else 0, "start": length, "end": 0},
        {"kind": "repair", "uri": td["uri"], "version": doc.version if doc else 0, "start": -5, "end": 10**12},
        {"kind": "repair", "uri": td["uri"], "version": "1", "start": "x", "end": None},
        {"textDocument": td, "range": {"start": start, "end": end}, "instruction": "shorter"},
        {"textDocument": td, "range": {"start": start}}, {"textDocument": 5, "range": []}, [], None, "data",
    ])  # fmt: skip


def _envelope_steps(draw: Any, kind: str, td: dict[str, Any]) -> list[Step]:
    """Messages only the JSON-RPC envelope and framing layer can answer well (issue #13, part A)."""
    stats = {"jsonrpc": "2.0", "id": None, "method": "waferline/stats", "params": {}}
    if kind == "batch":
        return [Step([stats, {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 1}}], None, kind)]
    if kind == "no_jsonrpc":
        return [Step({k: v for k, v in stats.items() if k != "jsonrpc"} | draw(st.sampled_from([{}, {"jsonrpc":
                     "1.0"}])), "optional", kind)]  # fmt: skip
    if kind == "object_id":
        return [Step({**stats, "id": draw(st.sampled_from([{"a": 1}, [1], 1.5, True]))}, None, kind)]
    if kind == "method_not_string":
        return [Step({**stats, "method": draw(st.sampled_from([5, None, ["x"]]))}, "optional", kind)]
    if kind == "notification_with_id":
        return [Step({"jsonrpc": "2.0", "id": None, "method": "textDocument/didSave", "params": {"textDocument": td}},
                     "optional", kind)]  # fmt: skip
    if kind == "unknown_malformed":
        return [_request("textDocument/rename", draw(st.sampled_from([5, "x", [1]])), "not_found", kind)]
    if kind == "cancel_bad_id":
        return [_notify("$/cancelRequest", {"id": draw(st.sampled_from([{}, [], None, 1.5]))}, kind)]
    raw = draw(st.sampled_from(["Content-Length: 5\r\n\r\n{}", "Content-Length: abc\r\n\r\n", "content-length: 2\r\n"
                                "\r\n{}", "Content-Length: 3\n\n{}x", "garbage\r\n\r\n"]))  # fmt: skip
    return [Step({"raw": raw}, None, kind)]
