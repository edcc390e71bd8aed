"""A changed signature's call sites in other files (server/features/next_edit/elsewhere.py), in a temporary
workspace with a real repository index: open documents and files that are not open, both fixed in one code action,
and never for a text that moved on (an open document's version, an unopened file's bytes read again)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from waferline.benchmarks.next_edit_session import Session
from waferline.server.features.next_edit import lsp
from waferline.server.features.next_edit.source import Edit
from waferline.server.repository.index import WorkspaceIndex

SHAPES = "def area(w, h):\n    return w * h\n\n\nprint(area(1, 2))\n"
MAIN = "from pkg.shapes import area\n\nx = area(3, 4)\n"  # open in the editor
USE = "from .shapes import area\n\n\ndef f(w):\n    return area(w, 2) + area(w, h=5)\n"  # on disk only
ALIEN = "def area(w, h):\n    return 0\n\n\ny = area(5, 6)\n"  # its own area(): not a call site


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "pkg").mkdir(parents=True)
    for name, text in {"shapes.py": SHAPES, "main.py": MAIN, "use.py": USE, "alien.py": ALIEN}.items():
        (root / "pkg" / name).write_text(text)
    return root.resolve()


def session(root: Path) -> Session:
    index = WorkspaceIndex(root, persist=False)
    index.build()

    def indexed(uri: str, name: str) -> list[Path]:
        return list(dict.fromkeys(r.path for r in index.references(name)))

    main = (root / "pkg" / "main.py").as_uri()
    return Session(SHAPES, others={main: MAIN}, uri=(root / "pkg" / "shapes.py").as_uri(), indexed=indexed)


def apply(text: str, edits: list[Edit]) -> str:
    for e in sorted(edits, key=lambda e: -e.start):
        text = text[: e.start] + e.new + text[e.end :]
    return text


def fake_server(s: Session) -> SimpleNamespace:
    return SimpleNamespace(documents=s.documents, encoding="utf-16",
                           client_capabilities=SimpleNamespace(workspace=None))  # fmt: skip


def test_open_and_unopened_files_are_fixed_together(workspace: Path) -> None:
    s = session(workspace)
    s.edit("area(w, h)", "w, h", "w")  # h removed
    proposal = s.next_edits.propose(s.doc, 0, for_action=True)
    assert proposal is not None and proposal.edit.uri is None  # this file's own call comes first
    by_uri: dict[str | None, list[Edit]] = {}
    for e in proposal.others:
        by_uri.setdefault(e.uri, []).append(e)
    main, use = (workspace / "pkg" / "main.py").as_uri(), (workspace / "pkg" / "use.py").as_uri()
    assert set(by_uri) == {main, use}, "alien.py defines its own area(): none of its calls is touched"
    assert apply(MAIN, by_uri[main]) == "from pkg.shapes import area\n\nx = area(3)\n"
    assert apply(USE, by_uri[use]) == USE.replace("area(w, 2) + area(w, h=5)", "area(w) + area(w)")
    assert all(e.version == 1 and e.digest is None for e in by_uri[main])
    assert all(e.version is None and e.digest for e in by_uri[use])
    # The request itself proposes only this document's edits.
    assert s.ask() == proposal.edit


def test_the_workspace_edit_covers_unopened_files_and_refuses_stale_texts(workspace: Path) -> None:
    s = session(workspace)
    s.edit("area(w, h)", "w, h", "w")
    proposal = s.next_edits.propose(s.doc, 0, for_action=True)
    assert proposal is not None
    ls = fake_server(s)
    others = [e for e in proposal.others if e.uri is not None]
    by_uri: dict[str, list[Edit]] = {}
    for e in others:
        by_uri.setdefault(e.uri or "", []).append(e)
    edit = lsp._workspace_edit(ls, by_uri)  # type: ignore[arg-type]
    assert edit is not None and edit.changes is not None
    use = (workspace / "pkg" / "use.py").as_uri()
    line = USE.splitlines()[4]
    spans = [(t.range.start.line, t.range.start.character, t.range.end.character, t.new_text)
             for t in edit.changes[use]]  # fmt: skip
    assert spans == [(4, line.index(", 2)"), line.index(")"), ""), (4, line.index(", h=5"), line.rindex(")"), "")]

    # The unopened file changed on disk since: nothing is offered for it, whatever else is still right.
    (workspace / "pkg" / "use.py").write_text(USE.replace("area(w, 2)", "area(w, 3)"))
    assert lsp._workspace_edit(ls, by_uri) is None  # type: ignore[arg-type]
    (workspace / "pkg" / "use.py").write_text(USE)
    assert lsp._workspace_edit(ls, by_uri) is not None  # type: ignore[arg-type]

    # The open document moved on to another version: refused too.
    main = (workspace / "pkg" / "main.py").as_uri()
    s.documents[main].text.version += 1
    assert lsp._workspace_edit(ls, by_uri) is None  # type: ignore[arg-type]


def test_a_file_opened_since_is_not_edited_from_its_disk_text(workspace: Path) -> None:
    s = session(workspace)
    s.edit("area(w, h)", "w, h", "w")
    proposal = s.next_edits.propose(s.doc, 0, for_action=True)
    assert proposal is not None
    use = (workspace / "pkg" / "use.py").as_uri()
    edits = [e for e in proposal.others if e.uri == use]
    assert edits
    s.documents[use] = type(s.doc).open(use, "python", USE, version=3)
    assert lsp._workspace_edit(fake_server(s), {use: edits}) is None  # type: ignore[arg-type]


def test_without_an_index_only_open_documents_are_fixed(workspace: Path) -> None:
    main = (workspace / "pkg" / "main.py").as_uri()
    s = Session(SHAPES, others={main: MAIN}, uri=(workspace / "pkg" / "shapes.py").as_uri())
    s.edit("area(w, h)", "w, h", "w")
    proposal = s.next_edits.propose(s.doc, 0, for_action=True)
    assert proposal is not None
    assert {e.uri for e in proposal.others} == {main}
