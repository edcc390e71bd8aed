"""The docs name only what exists: every repository path docs/*.md (and the READMEs) cite is a file or folder of the
checkout, and every `name` a doc places in a Python file ("`build_engine` in engine/factory.py", "engine/factory.py's
`build_engine`", "engine/factory.py `build_engine`") is defined there (a function, class, method, assignment or
attribute of it). A doc that falls behind a rename fails here with the doc, line and name."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
TOP = r"(?:server|syntax|engine|hardware|training|cli|benchmarks|tests|editor-clients|docs|\.ci)"
# a path: a top-level folder, then names; not a URL, a glob, a placeholder or a run directory
PATH = re.compile(rf"(?<![\w./<*:-])(?:\.\./)*({TOP}/[\w.+-]+(?:/[\w.+-]+)*/?)(?![\w<*])")
# what a doc may cite that is not in the checkout: files `make` builds, and other projects' files a doc quotes
BUILT = {"editor-clients/vscode/waferline.vsix"}  # make clients
FOREIGN = {
    "remote.md": {"server/routes.go", "docs/api.md"},  # Ollama's repository
    "wafer-validation.md": {"benchmarks/bandwidth-test/run.py"},  # Cerebras' csl-examples
}
P = rf"{TOP}/[\w./-]+\.py"
NAME = r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*"
PLACED = [
    re.compile(rf"`({NAME})(?:\(\))?` (?:in|from|of) `?({P})"),  # `name` in path.py
    re.compile(rf"({P})`?(?:'s)? `({NAME})(?:\(\))?`"),  # path.py's `name`, path.py `name`
]


def cited_paths(text: str) -> list[tuple[int, str]]:
    out = []
    for lineno, line in enumerate(text.splitlines(), 1):
        for m in PATH.finditer(line):
            path = m.group(1).rstrip(".").rstrip("/")
            if not any(part.isupper() for part in path.split("/")):  # engine/models/NAME: a placeholder
                out.append((lineno, path))
    return out


def placed_names(text: str) -> list[tuple[int, str, str]]:
    out = []
    for lineno, line in enumerate(text.splitlines(), 1):
        for pattern in PLACED:
            for m in pattern.finditer(line):
                name, path = m.groups() if pattern is PLACED[0] else reversed(m.groups())
                out.append((lineno, name, path))
    return out


@cache
def defined(path: str) -> frozenset[str]:
    """Every name a module defines at any depth: functions, classes, assigned names and attributes, imports."""
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.ImportFrom | ast.Import):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return frozenset(names)


def stale(doc: Path) -> list[str]:
    text = doc.read_text(encoding="utf-8")
    rel = doc.relative_to(ROOT)
    allowed = BUILT | FOREIGN.get(doc.name, set())
    found = [
        f"{rel}:{n}: {p} does not exist" for n, p in cited_paths(text) if p not in allowed and not (ROOT / p).exists()
    ]
    for n, name, path in placed_names(text):
        if not (ROOT / path).is_file():
            continue  # reported above
        missing = [part for part in name.split(".") if part not in defined(path)]
        if missing:
            found.append(f"{rel}:{n}: `{name}` is not defined in {path}")
    return found


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


LINK = re.compile(r"\]\(((?:[\w.-]+/)*)([\w.-]+\.md)?#([\w-]+)\)")


def broken_anchors(doc: Path) -> list[str]:
    """Links `[...](page.md#anchor)` (or `(#anchor)`) to a doc of docs/ whose headings make no such anchor."""
    found = []
    for lineno, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
        for m in LINK.finditer(line):
            target = doc.parent / m.group(1) / (m.group(2) or doc.name)
            if target.resolve().parent == (ROOT / "docs") and target.is_file():
                heads = re.findall(r"^#+ (.*)$", target.read_text(encoding="utf-8"), re.M)
                if m.group(3) not in {slug(h) for h in heads}:
                    found.append(f"{doc.relative_to(ROOT)}:{lineno}: {target.name}#{m.group(3)} is no heading")
    return found


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: d.name)
def test_every_link_to_a_section_finds_it(doc: Path) -> None:
    problems = broken_anchors(doc)
    assert not problems, "links to sections that are not there:\n" + "\n".join(problems)


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: d.name)
def test_every_path_and_name_a_doc_cites_exists(doc: Path) -> None:
    problems = stale(doc)
    assert not problems, "stale references:\n" + "\n".join(problems)


def test_a_planted_stale_name_or_path_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = ROOT / "docs" / "planted-for-the-test.md"
    monkeypatch.setattr(Path, "read_text", _reader(doc, (
        "The engine is built by `build_engine` in server/worker.py; `build_engine` in engine/factory.py is right.\n"
        "See engine/nowhere.py and engine/factory.py's `make_everything`, and engine/factory.py `EngineOptions`.\n"
    )))  # fmt: skip
    assert stale(doc) == [
        "docs/planted-for-the-test.md:2: engine/nowhere.py does not exist",
        "docs/planted-for-the-test.md:1: `build_engine` is not defined in server/worker.py",
        "docs/planted-for-the-test.md:2: `make_everything` is not defined in engine/factory.py",
    ]


def _reader(doc: Path, text: str):  # type: ignore[no-untyped-def]
    real = Path.read_text

    def read_text(self: Path, *args, **kwargs) -> str:  # type: ignore[no-untyped-def]
        return text if self == doc else real(self, *args, **kwargs)

    return read_text


def test_a_planted_link_to_a_missing_section_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    doc = ROOT / "docs" / "planted-for-the-test.md"
    monkeypatch.setattr(Path, "is_file", lambda self: self == doc or self.exists())
    monkeypatch.setattr(Path, "read_text", _reader(doc, (
        "[kept](benchmarks.md#engine-decode-speculation-llamacpp-waferline-bench) and\n"
        "[moved](benchmarks.md#a-section-that-moved)\n"
    )))  # fmt: skip
    assert broken_anchors(doc) == ["docs/planted-for-the-test.md:2: benchmarks.md#a-section-that-moved is no heading"]
