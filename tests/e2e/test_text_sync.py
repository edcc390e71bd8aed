"""The text-sync state machine (issue 29): the client's text and the server's must never part without the server
knowing it.

A hypothesis `RuleBasedStateMachine` drives a real `waferline serve` (the engine's test double, a few milliseconds
per token so that completions are still running when the next change arrives) over stdio, writing every message at
once, without waiting for any answer, as an editor types: didOpen, didChange of several changes that each refer to
the text the one before left (full-text and ranged changes mixed, ranges at or past a line's end or the end of the
document, at `(line_count, 0)`, splitting a surrogate pair or a UTF-8 sequence, CRLF, CR and "\\n\\r" line ends,
emoji, ZWJ sequences and combining marks), versions that skip, repeat or go back, didClose then didOpen of the same
URI with a lower version, changes for documents never opened, and completion requests with a change for their
document right behind them. The client's copy follows the documented rule (tests/support/shadow_doc.py,
docs/reliability.md "Text sync"). Every few steps, and at the end of each session, every open document is read
through `waferline/document` and must equal the client's (text hash, length, lines, version, and whether it is in
sync); a completion sent while the document was out of sync must be answered empty, any other one with ranges inside
the document as it was sent.

`make test` runs a few dozen seeded sessions per encoding; `WAFERLINE_SYNC_SESSIONS=1000` runs that many (UTF-16),
`WAFERLINE_FUZZ_SEED=N` chooses the random run's seed (docs/reliability.md, "The text-sync test"). Each sequence it
found is kept as a test of its own at the end of this file.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest
from fuzz_support import SEEDS, fuzz_settings
from hypothesis import note, seed
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, get_state_machine_test, precondition, rule
from lsp_session import INVALID_PARAMS, Servers, range_inside, state_problems
from lsp_support import serve_command
from raw_lsp import RawClient
from shadow_doc import ShadowDocument, as_sent, units

FIXED = "x + 1"
SERVERS = Servers(serve_command(FIXED, token_delay_ms=3))
SESSIONS = int(os.environ.get("WAFERLINE_SYNC_SESSIONS") or 0)  # 0: the counts `make test` runs
_machines = itertools.count(1)
CHECKED = {"sessions": 0, "checks": 0}

PIECES = ["a", "xy", " ", "\t", "\n", "\r\n", "\r", "\n\r", "😀", "👩\u200d💻", "e\u0301", "\u0301", "é", "中", "𝔘",
          "def f(x):\n    return ", "s = '😀'\r\n", "# note\r"]  # fmt: skip
texts = st.lists(st.sampled_from(PIECES), max_size=6).map("".join)


@pytest.fixture(scope="module", autouse=True)
def stop_servers() -> Iterator[None]:
    yield
    SERVERS.stop()


def server(encoding: str) -> RawClient:
    return SERVERS.get(encoding)


def inside_positions(doc: ShadowDocument) -> list[dict[str, int]]:
    """Positions that fall inside a character of several code units (half a surrogate pair, inside UTF-8 bytes)."""
    out = []
    for line, (start, end) in enumerate(doc.lines()):
        units_before = 0
        for ch in doc.text[start:end]:
            n = units(ch, doc.encoding)
            out += [{"line": line, "character": units_before + k} for k in range(1, n)]
            units_before += n
    return out


def draw_valid_position(data: st.DataObject, doc: ShadowDocument) -> dict[str, int]:
    """A position the server accepts: on a line (its end, past it, inside a character) or (line_count, 0)."""
    n = doc.line_count
    line = data.draw(st.integers(0, n - 1), label="line")
    length = doc.line_units(line)
    kind = data.draw(st.sampled_from(["any", "any", "line_end", "past_line_end", "doc_end", "inside_char"]))
    if kind == "line_end":
        return {"line": line, "character": length}
    if kind == "past_line_end":
        return {"line": line, "character": length + data.draw(st.integers(1, 50))}
    if kind == "doc_end":
        return {"line": n, "character": 0}
    if kind == "inside_char" and (inside := inside_positions(doc)):
        return data.draw(st.sampled_from(inside))
    return {"line": line, "character": data.draw(st.integers(0, length))}


def draw_change(data: st.DataObject, doc: ShadowDocument) -> dict[str, Any]:
    """One content change against `doc` as it is: mostly ranged and valid, now and then the whole text or a range
    the server must refuse (past the end, reversed)."""
    kind = data.draw(st.sampled_from(["ranged"] * 8 + ["full", "past_end", "reversed", "end_past_end"]), label="kind")
    text = data.draw(texts, label="text")
    if kind == "full":
        return {"text": text}
    n = doc.line_count
    if kind == "past_end":
        start = data.draw(st.sampled_from([{"line": n, "character": 1}, {"line": n + 1, "character": 0}]))
        return {"range": {"start": start, "end": start}, "text": text}
    a, b = draw_valid_position(data, doc), draw_valid_position(data, doc)
    oa, ob = doc.offset(a["line"], a["character"]), doc.offset(b["line"], b["character"])
    start, end = (a, b) if oa <= ob else (b, a)
    if kind == "reversed" and oa != ob:
        start, end = end, start
    elif kind == "end_past_end":  # an end past the last line is the end of the document
        end = {"line": n + data.draw(st.integers(0, 3)), "character": data.draw(st.integers(0, 3))}
    elif data.draw(st.booleans()):
        end = start  # an insertion
    return {"range": {"start": start, "end": end}, "text": text}


class TextSync(RuleBasedStateMachine):
    encoding: ClassVar[str] = "utf-16"

    def __init__(self) -> None:
        super().__init__()
        self.client = server(self.encoding)
        self.prefix = f"sync{next(_machines)}"
        self.docs: dict[str, ShadowDocument] = {}
        self.closed: set[str] = set()
        self.versions: dict[str, int] = {}  # the last version each URI was opened or changed with
        self.ids = itertools.count()
        self.pending: dict[str, tuple[ShadowDocument, bool]] = {}  # completion id -> the document as sent, in sync?
        self.start = len(self.client.received)
        CHECKED["sessions"] += 1

    def uri(self, slot: int) -> str:
        return f"file:///tmp/waferline-sync/{self.prefix}/{slot}.py"

    def send(self, method: str, params: Any) -> None:
        note(f"> {method} {params}"[:3000])
        self.client.send({"jsonrpc": "2.0", "method": method, "params": params})

    def pick(self, data: st.DataObject) -> ShadowDocument:
        return self.docs[data.draw(st.sampled_from(sorted(self.docs)), label="document")]

    # -- rules: every message is written at once, nothing waits ------------------------------------------------------
    @rule(slot=st.integers(0, 2), text=texts, version=st.integers(0, 6))
    def open(self, slot: int, text: str, version: int) -> None:
        """didOpen (of an open document too: the new text replaces the old)."""
        uri = self.uri(slot)
        self.send("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": version,
                                                            "text": text}})  # fmt: skip
        self.docs[uri] = ShadowDocument(uri, as_sent(text), version, self.encoding)
        self.closed.discard(uri)
        self.versions[uri] = version

    @precondition(lambda self: self.docs)
    @rule(data=st.data(), bump=st.sampled_from([1, 1, 1, 0, 2, 7, -1]))
    def change(self, data: st.DataObject, bump: int) -> None:
        """didChange of 0-4 changes, each drawn against the text the one before leaves; a version that moves on,
        repeats, skips or goes back."""
        doc = self.pick(data)
        trial = ShadowDocument(doc.uri, doc.text, doc.version, doc.encoding)
        changes = []
        for _ in range(data.draw(st.integers(0, 4), label="changes")):
            change = draw_change(data, trial)
            changes.append(change)
            trial.apply([change], trial.version)
        version = doc.version + bump
        self.send("textDocument/didChange", {"textDocument": {"uri": doc.uri, "version": version},
                                             "contentChanges": changes})  # fmt: skip
        doc.apply(changes, version)
        self.versions[doc.uri] = version
        note(f"  the client's copy: {len(doc.text)} characters, version {version}, in sync {doc.in_sync}")

    @precondition(lambda self: self.docs)
    @rule(data=st.data(), then_change=st.booleans())
    def complete(self, data: st.DataObject, then_change: bool) -> None:
        """An inline completion at a position in the document, often with a change of it right behind."""
        doc = self.pick(data)
        pos = draw_valid_position(data, doc)
        msg_id = f"{self.prefix}-{next(self.ids)}"
        params = {"textDocument": {"uri": doc.uri}, "position": pos, "context": {"triggerKind": 1}}
        note(f"> [{msg_id}] textDocument/inlineCompletion {params}")
        self.client.send({"jsonrpc": "2.0", "id": msg_id, "method": "textDocument/inlineCompletion", "params": params})
        self.pending[msg_id] = (ShadowDocument(doc.uri, doc.text, doc.version, doc.encoding), doc.in_sync)
        if then_change:
            self.change(data, 1)

    @precondition(lambda self: self.docs)
    @rule(data=st.data(), reopen=st.booleans())
    def close(self, data: st.DataObject, reopen: bool) -> None:
        """didClose, and now and then didOpen of the same URI at once, with a lower version than it had."""
        doc = self.pick(data)
        self.send("textDocument/didClose", {"textDocument": {"uri": doc.uri}})
        del self.docs[doc.uri]
        self.closed.add(doc.uri)
        if reopen:
            version = self.versions[doc.uri] - 1
            self.send("textDocument/didOpen", {"textDocument": {"uri": doc.uri, "languageId": "python",
                                                                "version": version, "text": doc.text}})  # fmt: skip
            self.docs[doc.uri] = ShadowDocument(doc.uri, doc.text, version, self.encoding)
            self.closed.discard(doc.uri)
            self.versions[doc.uri] = version

    @rule(slot=st.integers(0, 3), closed=st.booleans())
    def change_unopened(self, slot: int, closed: bool) -> None:
        """A didChange for a document never opened (or closed): ignored, and it stays not open."""
        uri = sorted(self.closed)[0] if closed and self.closed else f"{self.uri(slot)}.never"
        if uri in self.docs:
            return
        rng = {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}
        self.send("textDocument/didChange", {"textDocument": {"uri": uri, "version": 9},
                                             "contentChanges": [{"range": rng, "text": "lost"}]})  # fmt: skip
        self.closed.add(uri)

    @rule()
    def check(self) -> None:
        """Wait for the answers so far and compare every document with the client's copy."""
        self.verify()

    def teardown(self) -> None:
        self.verify()
        for uri in self.docs:
            self.client.send({"jsonrpc": "2.0", "method": "textDocument/didClose", "params": {"textDocument": {
                "uri": uri}}})  # fmt: skip

    # -- the check ---------------------------------------------------------------------------------------------------
    def request(self, method: str, params: Any) -> dict[str, Any]:
        answer = self.client.request(method, params, f"{self.prefix}-{next(self.ids)}")
        assert "error" not in answer or answer["error"]["code"] != -32603, f"internal error: {answer}"
        return answer

    def verify(self) -> None:
        assert self.client.alive(), "the server exited"
        CHECKED["checks"] += 1
        assert self.client.wait_for_ids(self.pending, start=self.start, timeout=60), "a completion went unanswered"
        answers = {m.get("id"): m for m in self.client.responses(self.start) if m.get("id") in self.pending}
        for msg_id, (doc, in_sync) in self.pending.items():
            answer = answers[msg_id]
            assert "result" in answer, f"{msg_id}: {answer}"
            items = (answer["result"] or {}).get("items", [])
            assert in_sync or not items, f"{msg_id}: a completion against a text known wrong: {items}"
            for item in items:
                assert range_inside(item["range"], doc), f"{msg_id}: a range outside the document: {item['range']}"
        self.pending.clear()
        for doc in self.docs.values():
            problems = state_problems(self.request("waferline/document", {"uri": doc.uri}), doc)
            assert not problems, problems
        for uri in sorted(self.closed)[:3]:
            answer = self.request("waferline/document", {"uri": uri})
            assert answer.get("error", {}).get("code") == INVALID_PARAMS, f"{uri} is not open: {answer}"
        self.start = len(self.client.received)


class Utf8TextSync(TextSync):
    encoding = "utf-8"


class Utf32TextSync(TextSync):
    encoding = "utf-32"


@SEEDS
@pytest.mark.parametrize("machine", [TextSync, Utf8TextSync, Utf32TextSync], ids=["utf-16", "utf-8", "utf-32"])
def test_the_server_text_is_the_client_text(machine: type[TextSync], fuzz_seed: int) -> None:
    examples = SESSIONS or (20 if machine is TextSync else 8)
    if SESSIONS and machine is not TextSync:
        examples = max(1, SESSIONS // 4)
    before = dict(CHECKED)
    test = get_state_machine_test(machine, settings=fuzz_settings(examples, stateful_step_count=25))
    seed(fuzz_seed)(test)()
    sessions, checks = CHECKED["sessions"] - before["sessions"], CHECKED["checks"] - before["checks"]
    print(f"fuzz seed {fuzz_seed}: {sessions} sessions, {checks} sync checks, 0 desyncs")


# -- the sequences found, each kept -----------------------------------------------------------------------------------
def _send_all(client: RawClient, uri: str, notifications: list[tuple[int, list[dict[str, Any]]]]) -> None:
    for version, changes in notifications:
        client.send({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
            "textDocument": {"uri": uri, "version": version}, "contentChanges": changes}})  # fmt: skip


def _open(client: RawClient, uri: str, text: str, version: int = 0) -> None:
    client.send({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
        "uri": uri, "languageId": "python", "version": version, "text": text}}})  # fmt: skip


def _at(line: int, character: int, text: str, end: tuple[int, int] | None = None) -> dict[str, Any]:
    e = end or (line, character)
    return {"range": {"start": {"line": line, "character": character}, "end": {"line": e[0], "character": e[1]}},
            "text": text}  # fmt: skip


def _agrees(client: RawClient, doc: ShadowDocument, msg_id: str) -> dict[str, Any]:
    answer = client.request("waferline/document", {"uri": doc.uri, "includeText": True}, msg_id)
    assert not state_problems(answer, doc), (state_problems(answer, doc), answer["result"].get("text"))
    return dict(answer["result"])


def test_found_three_ranged_changes_after_an_insert_at_the_end() -> None:
    """Issue 29's first sample: the first of three ranged changes inserts "\\n\\r" at (line_count, 0), the next two
    refer to the text it leaves (the document ends in "\\r" before it, so "\\r\\n" joins into one line end)."""
    client, uri = server("utf-16"), "file:///tmp/waferline-sync/found/end.py"
    doc = ShadowDocument(uri, "x = 1\r", 0)
    _open(client, uri, doc.text)
    changes = [_at(2, 0, "\n\r"), _at(3, 0, "y = 2"), _at(2, 0, "# c", end=(3, 1))]
    _send_all(client, uri, [(1, changes)])
    assert doc.apply(changes, 1) and doc.in_sync
    assert _agrees(client, doc, "found-end")["text"] == "x = 1\r\n\r# c"


def test_found_valid_changes_before_one_that_cannot_apply() -> None:
    """Issue 29's second sample: two notifications each held valid changes before one that cannot apply. The valid
    ones stay applied, the version is each notification's, the document is out of sync (no completion), and the
    whole text brings it back."""
    client, uri = server("utf-16"), "file:///tmp/waferline-sync/found/odd.py"
    doc = ShadowDocument(uri, "def f():\n    return 1\n", 0)
    _open(client, uri, doc.text)
    first = [_at(0, 0, "# a\n"), _at(9, 0, "lost")]
    second = [_at(0, 0, "# b\n"), _at(1, 0, "dropped: the document is out of sync")]
    _send_all(client, uri, [(1, first), (2, second)])
    doc.apply(first, 1)
    doc.apply(second, 2)
    state = _agrees(client, doc, "found-odd")
    assert state["text"] == "# a\ndef f():\n    return 1\n" and state["version"] == 2 and not state["inSync"]
    ask = {"textDocument": {"uri": uri}, "position": {"line": 2, "character": 12}, "context": {"triggerKind": 1}}
    assert client.request("textDocument/inlineCompletion", ask, "found-odd-ask")["result"]["items"] == []
    whole = [{"text": "def g():\n    return "}, _at(1, 11, "2")]
    _send_all(client, uri, [(3, whole)])
    assert doc.apply(whole, 3) and doc.in_sync
    assert _agrees(client, doc, "found-odd-back")["inSync"]


def test_found_a_repeated_version_while_a_completion_runs() -> None:
    """A change that repeats the version (clients that count per notification kind do) while a completion for the
    document runs: the answer was checked against the version, so it was shown for the text before the change."""
    client, uri = server("utf-16"), "file:///tmp/waferline-sync/found/repeat.py"
    text = "def area(r):\n    return \n"
    _open(client, uri, text, version=4)
    client.send({"jsonrpc": "2.0", "method": "waferlineTest/setCompletion", "params": {"text": FIXED,
                 "tokenDelayMs": 40}})  # fmt: skip
    ask = {"textDocument": {"uri": uri}, "position": {"line": 1, "character": 11}, "context": {"triggerKind": 1}}
    start = len(client.received)
    client.send({"jsonrpc": "2.0", "id": "found-repeat", "method": "textDocument/inlineCompletion", "params": ask})
    _send_all(client, uri, [(4, [_at(0, 0, "import math\n")])])  # the same version, a different text
    assert client.wait_for_ids(["found-repeat"], start=start, timeout=30)
    answer = next(m for m in client.responses(start) if m.get("id") == "found-repeat")
    client.send({"jsonrpc": "2.0", "method": "waferlineTest/setCompletion", "params": {"text": FIXED,
                 "tokenDelayMs": 3}})  # fmt: skip
    assert answer["result"]["items"] == [], "a suggestion placed at the text before the change"
    _agrees(client, ShadowDocument(uri, "import math\n" + text, 4), "found-repeat-doc")
