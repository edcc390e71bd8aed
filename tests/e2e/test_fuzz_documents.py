"""The stateful test: a hypothesis state machine opens, edits (valid and invalid ranges, full and incremental),
closes and reopens documents and asks for completions, keeping a shadow copy of each (tests/support/shadow_doc.py).
After every step the server's copy, read through `waferline/document`, must agree with the shadow in text
(sha256), length, line count, version and whether it is in sync (a refused edit puts both out of sync, by the rule
of docs/reliability.md "Text sync"); a shown range must lie inside the document. It runs with a UTF-16 client (LSP's
default) and with clients that ask for UTF-8 and UTF-32 positions, each against one server process (the engine's
test double), once with a fixed seed and once with a random one. (Its messages wait for each step's answers;
tests/e2e/test_text_sync.py writes them all at once.)
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest
from fuzz_support import FIXED_TEXT, SEEDS, fuzz_settings
from hypothesis import note, seed
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, get_state_machine_test, invariant, precondition, rule
from lsp_session import INVALID_PARAMS, Servers, range_inside, state_problems
from lsp_strategies import draw_position, texts, well_formed
from lsp_support import serve_command
from raw_lsp import RawClient
from shadow_doc import ShadowDocument, as_sent

SERVERS = Servers(serve_command(FIXED_TEXT))
_machines = itertools.count(1)


@pytest.fixture(scope="module", autouse=True)
def stop_servers() -> Iterator[None]:
    yield
    SERVERS.stop()


def server(encoding: str) -> RawClient:
    return SERVERS.get(encoding)


class Documents(RuleBasedStateMachine):
    encoding: ClassVar[str] = "utf-16"

    def __init__(self) -> None:
        super().__init__()
        self.client = server(self.encoding)
        self.prefix = f"m{next(_machines)}"
        self.docs: dict[str, ShadowDocument] = {}
        self.closed: set[str] = set()
        self.ids = itertools.count()

    def uri(self, slot: int) -> str:
        return f"file:///tmp/waferline-fuzz/{self.prefix}/{slot}.py"

    def send(self, method: str, params: Any) -> None:
        note(f"> {method} {params}"[:2000])
        self.client.send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method: str, params: Any) -> dict[str, Any]:
        note(f"> {method} {params}"[:2000])
        answer = self.client.request(method, params, f"{self.prefix}-{next(self.ids)}")
        assert "error" not in answer or answer["error"]["code"] != -32603, f"internal error: {answer}"
        return answer

    def pick(self, data: st.DataObject) -> ShadowDocument:
        return self.docs[data.draw(st.sampled_from(sorted(self.docs)), label="document")]

    # -- rules --------------------------------------------------------------------------------------------------------
    @rule(slot=st.integers(0, 3), text=texts, version=st.integers(0, 5))
    def open(self, slot: int, text: str, version: int) -> None:
        """didOpen, or a second didOpen of an open document: the new text replaces the old."""
        uri = self.uri(slot)
        item = {"uri": uri, "languageId": "python", "version": version, "text": text}
        self.send("textDocument/didOpen", {"textDocument": item})
        self.docs[uri] = ShadowDocument(uri, as_sent(text), version, self.encoding)
        self.closed.discard(uri)

    @precondition(lambda self: self.docs)
    @rule(data=st.data(), full=st.integers(0, 6), bump=st.integers(0, 2))
    def change(self, data: st.DataObject, full: int, bump: int) -> None:
        """didChange with 0-3 changes (incremental, some with invalid ranges, or now and then the whole text)."""
        doc = self.pick(data)
        trial = ShadowDocument(doc.uri, doc.text, doc.version, doc.encoding)
        changes: list[dict[str, Any]] = []
        for _ in range(data.draw(st.integers(0, 3), label="changes")):
            if full == 0:
                change: dict[str, Any] = {"text": data.draw(texts)}
            else:
                start, _ = draw_position(data.draw, trial)
                end, _ = draw_position(data.draw, trial) if data.draw(st.booleans()) else (start, True)
                if not (well_formed(start) and well_formed(end)):
                    continue  # a malformed position makes the whole message unreadable: the fuzzing sessions' part
                change = {"range": {"start": start, "end": end}, "text": data.draw(texts)}
            changes.append(change)
            trial.apply([change], trial.version)  # later changes are drawn against the text as it will be
        version = doc.version + bump
        self.send("textDocument/didChange", {"textDocument": {"uri": doc.uri, "version": version},
                                             "contentChanges": changes})  # fmt: skip
        applied = doc.apply(changes, version)
        note(f"  the shadow {'applied' if applied else 'refused'} it")

    @precondition(lambda self: self.docs)
    @rule(data=st.data())
    def close(self, data: st.DataObject) -> None:
        doc = self.pick(data)
        self.send("textDocument/didClose", {"textDocument": {"uri": doc.uri}})
        del self.docs[doc.uri]
        self.closed.add(doc.uri)

    @precondition(lambda self: self.closed)
    @rule(data=st.data())
    def change_closed(self, data: st.DataObject) -> None:
        """A change for a closed document is ignored (and reported to the user)."""
        uri = data.draw(st.sampled_from(sorted(self.closed)))
        rng = {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}
        self.send("textDocument/didChange", {"textDocument": {"uri": uri, "version": 99},
                                             "contentChanges": [{"range": rng, "text": "lost"}]})  # fmt: skip

    @precondition(lambda self: self.docs)
    @rule(data=st.data(), method=st.sampled_from(["textDocument/inlineCompletion", "textDocument/completion"]))
    def complete(self, data: st.DataObject, method: str) -> None:
        """A completion at a position (valid or not): a result whose ranges lie inside the document, or
        InvalidParams exactly when the position is not in the document."""
        doc = self.pick(data)
        pos, ok = draw_position(data.draw, doc)
        params: dict[str, Any] = {"textDocument": {"uri": doc.uri}, "position": pos}
        if method == "textDocument/inlineCompletion":
            params["context"] = {"triggerKind": 1}
        answer = self.request(method, params)
        if not ok:
            assert answer.get("error", {}).get("code") == INVALID_PARAMS, answer
            return
        assert "result" in answer, answer
        items = (answer["result"] or {}).get("items", [])
        for item in items:
            rng = item.get("range") or (item.get("textEdit") or {}).get("range")
            assert rng is None or range_inside(rng, doc), f"a shown range outside the document: {rng}"

    # -- invariants ---------------------------------------------------------------------------------------------------
    @invariant()
    def server_agrees(self) -> None:
        assert self.client.alive(), "the server exited"
        for doc in self.docs.values():
            problems = state_problems(self.request("waferline/document", {"uri": doc.uri}), doc)
            assert not problems, problems
        for uri in sorted(self.closed)[:2]:
            answer = self.request("waferline/document", {"uri": uri})
            assert answer.get("error", {}).get("code") == INVALID_PARAMS, f"{uri} was closed: {answer}"


class Utf8Documents(Documents):
    encoding = "utf-8"


class Utf32Documents(Documents):
    encoding = "utf-32"


@SEEDS
@pytest.mark.parametrize("machine", [Documents, Utf8Documents, Utf32Documents], ids=["utf-16", "utf-8", "utf-32"])
def test_documents_agree_with_the_shadow(machine: type[Documents], fuzz_seed: int) -> None:
    print(f"fuzz seed {fuzz_seed}")
    examples = 25 if machine is Documents else 10
    test = get_state_machine_test(machine, settings=fuzz_settings(examples, stateful_step_count=20))
    seed(fuzz_seed)(test)()
