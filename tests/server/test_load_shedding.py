"""Load shedding and bounded memory: a newer change or request for a document makes the older work on it free
before it is parsed, looked up or queued for the engine (server/shedding.py); queued index updates coalesce per
document; closing a document leaves no copy of it behind (server/app.py `close_document`)."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import shutil
import threading
import time
import weakref
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from fixed_engine import FixedEngine
from lsprotocol import types

from waferline.engine.api import EditRequest
from waferline.server.background import Background
from waferline.server.document import Document
from waferline.server.features.inline import InlineCompletions
from waferline.server.features.recent_edits import RecentEdit
from waferline.server.handlers import create_server
from waferline.server.options import Options
from waferline.server.repository.index import IndexOptions, WorkspaceIndex
from waferline.server.repository.workspace import Indexing
from waferline.server.stats import Stats
from waferline.server.worker import Worker

FIXTURE = Path(__file__).parent / "fixtures" / "repos" / "polyglot"
TEXT = "def area(radius):\n    return 3.14 * radius * radius\n\n\ndef total(values):\n    return "
OPTIONS = Options(precompute=False, min_confidence=0.0)


def test_changes_queued_behind_a_busy_index_thread_make_one_update(tmp_path: Path) -> None:
    root = (tmp_path / "polyglot").resolve()
    shutil.copytree(FIXTURE, root)
    index = WorkspaceIndex(root, persist=False, options=IndexOptions(use_git=False, workers=0))
    index.build()
    path = root / "shop" / "checkout.py"
    base = path.read_text()
    doc = Document.open(path.as_uri(), "python", base)
    ls = SimpleNamespace(options=Options(), stats=Stats(), documents={doc.uri: doc})
    ing = Indexing(ls)  # type: ignore[arg-type]
    ing.indexes[root] = index
    busy = threading.Event()

    async def type_while_the_index_thread_is_busy() -> None:
        ing.updates.loop = asyncio.get_running_loop()
        ing.updates._thread.submit(busy.wait)
        for i in range(100):
            doc.text.apply_change(None, base + f"\n\ndef typed_{i}():\n    pass\n", i + 2)
            ing.updates.document_changed(doc.uri, delay=0.0)
            await asyncio.sleep(0.002)  # its timer fires: the previous text still waits for the busy thread
        assert len(ing.updates._waiting) == 1, "one text waits per document, never one per keystroke"
        busy.set()
        await asyncio.to_thread(ing.updates._thread.submit(lambda: None).result)

    asyncio.run(type_while_the_index_thread_is_busy())
    assert ls.stats.index_updates == 1 and ls.stats.index_coalesced == 99
    assert index.definitions("typed_99") and not index.definitions("typed_98"), "the latest text won"
    assert not ing.updates._waiting and not ing.updates._timers and not ing.updates._due
    ing.close()


class Gate:
    """A repository context that holds its first caller until released."""

    def __init__(self) -> None:
        self.entered, self.release = threading.Event(), threading.Event()
        self.calls = 0

    def __call__(self, text: str, plan: Any) -> list[Any]:
        self.calls += 1
        if self.calls == 1:
            self.entered.set()
            self.release.wait(10)
        return []


def setup_inline() -> tuple[InlineCompletions, Worker, Document, dict[str, Document]]:
    stats = Stats()
    worker = Worker(stats)
    doc = Document.open("file:///work/shapes.py", "python", TEXT, version=1)
    documents = {doc.uri: doc}
    return InlineCompletions(worker, stats, documents, Background()), worker, doc, documents


def type_key(doc: Document, ch: str) -> None:
    edit = doc.text.apply_change(((5, 11 + doc.text.version - 1), (5, 11 + doc.text.version - 1)), ch, None)
    doc.syntax.apply(edit)
    doc.text.version += 1


def test_a_request_stale_on_arrival_is_answered_empty_before_planning() -> None:
    inline, worker, doc, _ = setup_inline()
    engine = FixedEngine("values")

    async def main() -> list[Any]:
        await worker.load(lambda: engine)
        older = asyncio.ensure_future(inline.answer(doc, len(doc.text.text), OPTIONS, explicit=False))
        type_key(doc, "s")  # the next keystroke arrives before the older request's turn came
        newer = asyncio.ensure_future(inline.answer(doc, len(doc.text.text), OPTIONS, explicit=False))
        return list(await asyncio.gather(older, newer))

    older, newer = asyncio.run(main())
    worker.close()
    assert older is None and newer is not None, "both answered: the stale one empty"
    st = inline.stats
    assert (st.shed_before_plan, st.shed_before_engine, st.generations) == (1, 0, 1), (
        "only the newer one reached the engine"
    )
    assert st.requests == 2 and st.cancelled == 1
    assert doc.syntax.parses == 1, "the stale request parsed nothing"
    assert not inline.tickets.latest, "answered requests leave no ticket behind"


def test_a_request_superseded_during_its_lookup_never_reaches_the_engine() -> None:
    inline, worker, doc, _ = setup_inline()
    gate = Gate()
    inline.context_for = lambda snapshot: gate  # type: ignore[method-assign]

    async def main() -> list[Any]:
        await worker.load(lambda: FixedEngine("values"))
        older = asyncio.ensure_future(inline.answer(doc, len(doc.text.text), OPTIONS, explicit=False))
        await asyncio.to_thread(gate.entered.wait, 10)  # the older request's repository lookup is running
        type_key(doc, "s")
        newer = asyncio.ensure_future(inline.answer(doc, len(doc.text.text), OPTIONS, explicit=False))
        await asyncio.sleep(0)
        gate.release.set()
        return list(await asyncio.gather(older, newer))

    older, newer = asyncio.run(main())
    worker.close()
    assert older is None and newer is not None
    assert (inline.stats.shed_before_engine, inline.stats.generations) == (1, 1)


def test_a_lookup_whose_request_went_stale_in_the_queue_is_skipped() -> None:
    inline, _, doc, _ = setup_inline()
    gate = Gate()
    stale = inline.tickets.issue(doc)
    inline.tickets.issue(doc)  # a newer request for the same document
    assert inline._context_unless_stale(gate, doc.text.text, None, stale) == []  # type: ignore[arg-type]
    assert gate.calls == 0 and inline.stats.context_skipped == 1


def test_recent_edits_snapshot_only_the_most_recent_settled_documents() -> None:
    inline, _, doc, documents = setup_inline()
    for i in range(50):
        other = Document.open(f"file:///work/m{i}.py", "python", f"x_{i} = {i}\n")
        other.edited_line, other.edited_at = 0, float(i)
        documents[other.uri] = other
    hot = Document.open("file:///work/hot.py", "python", "y = 1\n")
    hot.edited_line, hot.edited_at = 0, time.monotonic()  # still being typed in: it would churn every prompt
    documents[hot.uri] = hot
    taken: list[RecentEdit] = []
    original = RecentEdit.__init__

    def record(self: RecentEdit, *args: Any) -> None:
        original(self, *args)
        taken.append(self)

    RecentEdit.__init__ = record  # type: ignore[method-assign]
    try:
        inline.context_for(doc.snapshot())
    finally:
        RecentEdit.__init__ = original  # type: ignore[method-assign]
    assert [e.path for e in taken] == ["m49.py", "m48.py", "m47.py", "m46.py"]


def test_closing_a_large_document_leaves_no_copy_behind() -> None:
    server = create_server(engine_factory=lambda options: FixedEngine(" = 1"))
    big = "value_0 = 0\n" * (5_000_000 // 12)
    uri = "file:///work/big.py"

    async def main() -> None:
        await server.worker.load(lambda: server._engine_factory(server.options))
        item = types.TextDocumentItem(uri=uri, language_id="python", version=1, text=big)
        doc = server.open_document(item)
        small = server.open_document(
            types.TextDocumentItem(uri="file:///work/s.py", language_id="python", version=1, text=TEXT)
        )
        await server.inline.answer(small, len(TEXT), OPTIONS, explicit=False)
        await server.inline.answer(doc, len(big), OPTIONS, explicit=False)
        refs = [weakref.ref(doc), weakref.ref(doc.text), weakref.ref(doc.syntax)]
        del doc
        server.close_document(uri)
        await asyncio.to_thread(server.worker._jobs.submit("probe", lambda cancel: None).future.result)
        gc.collect()
        assert [r() for r in refs] == [None, None, None], "nothing holds the closed document"

    asyncio.run(main())
    engine = server.worker._engine
    assert isinstance(engine, FixedEngine) and uri not in engine._prompts, "its KV session was dropped"
    assert uri not in server.documents and uri not in server.inline._caches and uri not in server.inline.tickets.latest
    server.worker.close()


def test_a_job_superseded_in_the_queue_never_prepares_its_request() -> None:
    worker = Worker(Stats())
    prepared: list[str] = []
    busy = threading.Event()

    def prepare(name: str) -> Any:
        def add_candidates(request: EditRequest) -> EditRequest:
            prepared.append(name)
            return dataclasses.replace(request, candidates=("x",))

        return add_candidates

    async def main() -> list[Any]:
        await worker.load(lambda: FixedEngine("1"))
        worker._jobs.submit("other", lambda cancel: busy.wait(10))  # the engine is busy with another document
        older = asyncio.ensure_future(
            worker.complete(EditRequest(session_id="d", prefix="a", suffix=""), prepare=prepare("older"))
        )
        await asyncio.sleep(0.05)
        newer = asyncio.ensure_future(
            worker.complete(EditRequest(session_id="d", prefix="ab", suffix=""), prepare=prepare("newer"))
        )
        await asyncio.sleep(0.05)
        busy.set()
        return list(await asyncio.gather(older, newer))

    older, newer = asyncio.run(main())
    worker.close()
    assert older is None and newer is not None and prepared == ["newer"]


def test_plans_hold_their_window_longer_while_several_documents_are_typed_in(monkeypatch: Any) -> None:
    """One typist: the prefix window's start moves every eighth of its budget (a long prefix); requests for more
    than one document within a second: every half budget, so each document's prompt and KV session hold."""
    import waferline.server.features.inline as inline_module

    inline, worker, doc, documents = setup_inline()
    other = Document.open("file:///work/other.py", "python", TEXT, version=1)
    documents[other.uri] = other
    steady: list[bool] = []
    real = inline_module.plan_completion

    def plan(*args: Any, **kwargs: Any) -> Any:
        steady.append(kwargs["steady_window"])
        return real(*args, **kwargs)

    monkeypatch.setattr(inline_module, "plan_completion", plan)

    async def main() -> None:
        await worker.load(lambda: FixedEngine("values"))
        await inline.answer(doc, len(doc.text.text), OPTIONS, explicit=False)
        await inline.answer(other, len(other.text.text), OPTIONS, explicit=False)

    asyncio.run(main())
    worker.close()
    assert steady == [False, True]


def test_a_multi_line_request_gets_single_line_tokens_while_several_documents_are_typed_in() -> None:
    from waferline.server.features.engine_request import edit_request
    from waferline.syntax.plan import plan_completion

    text = "def area(radius):\n    "
    plan = plan_completion(text, len(text), "python", None)
    assert plan.multiline
    options = Options(max_tokens=32, max_multiline_tokens=64)
    assert edit_request("s", plan, options)[0].max_new_tokens == 64
    assert edit_request("s", plan, options, busy=True)[0].max_new_tokens == 32


def test_no_previous_text_draft_while_several_documents_are_typed_in() -> None:
    """The model's previous text is a draft for one typist; under load its k-token steps cost more than they save."""
    from waferline.engine.api import Completion

    inline, worker, doc, documents = setup_inline()
    other = Document.open("file:///work/other.py", "python", TEXT, version=1)
    documents[other.uri] = other
    drafts: list[str] = []

    async def complete(request: EditRequest, prepare: Any = None) -> Completion:
        drafts.append(request.draft)
        return Completion(text="", stop_reason="stop_token")

    inline.worker.complete = complete  # type: ignore[method-assign]
    end = len(doc.text.text)
    inline.cache(doc.uri).remember_output(doc.text.text, end, "values)")

    async def main() -> None:
        await inline.answer(doc, end, OPTIONS, explicit=False)
        inline.tickets.issue(other)  # another document typed in within the last second
        await inline.answer(doc, end, OPTIONS, explicit=False)

    asyncio.run(main())
    worker.close()
    assert drafts == ["values)", ""]
