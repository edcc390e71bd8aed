"""The server side of the index without a transport: completion-prompt context from other files, URIs, watchers,
and forgetting a deleted folder."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from waferline.server.features.engine_request import prompt_prefix
from waferline.server.options import Options
from waferline.server.repository.index import IndexOptions, WorkspaceIndex
from waferline.server.repository.updates import watched_globs
from waferline.server.repository.workspace import Indexing, uri_to_path
from waferline.syntax.plan import plan_completion
from waferline.syntax.tree import SyntaxTree

FIXTURE = Path(__file__).parent / "fixtures" / "repos" / "polyglot"


@pytest.fixture
def indexed(tmp_path: Path) -> tuple[WorkspaceIndex, Path]:
    root = (tmp_path / "polyglot").resolve()
    shutil.copytree(FIXTURE, root)
    index = WorkspaceIndex(root, persist=False, options=IndexOptions(use_git=False, workers=0))
    index.build()
    return index, root


def indexing() -> Indexing:
    return Indexing(SimpleNamespace(options=Options()))  # type: ignore[arg-type]


def test_completion_context_holds_definitions_from_other_files(indexed: tuple[WorkspaceIndex, Path]) -> None:
    index, root = indexed
    path = root / "shop" / "checkout.py"
    text = path.read_text() + "\n\ndef total_with_tax(basket):\n    return \n"
    cursor = text.rindex("return ") + len("return ")
    plan = plan_completion(text, cursor, "python", SyntaxTree("python", text))
    snippets = indexing().definition_snippets(index, path, text, plan)
    assert [s.kind for s in snippets] == ["definition"] * len(snippets)
    texts = "\n".join(s.text for s in snippets)
    assert "# shop/pricing.py\nclass Basket:" in texts and "def apply_tax(amount: float) -> float:" in texts
    assert "def quote" not in texts and "def checkout" not in texts, "this file's own definitions are in the prompt"
    assert sum(len(s.text) + 1 for s in snippets) <= plan.context_budget

    # Typing on the cursor's line leaves the snippets, and the start of the prompt, as they were.
    typed = text[:cursor] + "apply_t" + text[cursor:]
    plan2 = plan_completion(typed, cursor + 7, "python", SyntaxTree("python", typed))
    again = indexing().definition_snippets(index, path, typed, plan2)
    assert again == snippets
    plan.context[:0], plan2.context[:0] = snippets, again
    assert prompt_prefix(plan2).startswith(prompt_prefix(plan)[: -len(plan.prefix)])


def test_completion_context_respects_the_budget(indexed: tuple[WorkspaceIndex, Path]) -> None:
    index, root = indexed
    path = root / "shop" / "checkout.py"
    text = path.read_text()
    plan = plan_completion(text, len(text), "python", SyntaxTree("python", text), max_context_chars=800)
    snippets = indexing().definition_snippets(index, path, text, plan)
    assert sum(len(s.text) + 1 for s in snippets) <= plan.context_budget


def test_uris_and_watchers(tmp_path: Path) -> None:
    assert uri_to_path(tmp_path.as_uri()) == tmp_path
    assert uri_to_path("untitled:Untitled-1") is None
    globs = watched_globs()
    assert globs[-1] == "**/.gitignore" and all(e in globs[0] for e in (",py,", ",rs,", ",md,"))


def test_a_deleted_folder_is_forgotten(indexed: tuple[WorkspaceIndex, Path]) -> None:
    index, root = indexed
    assert index.definitions("apply_tax")
    shutil.rmtree(root / "shop")
    index.remove_path(root / "shop")
    assert not index.definitions("apply_tax") and index.definitions("formatPrice"), "only that folder's files"
    index.remove_path(root / "web" / "cart.js")
    assert not index.definitions("formatPrice") and index.definitions("fetchProduct"), "a deleted file"


def test_cached_context_survives_edits_of_its_own_file_only(indexed: tuple[WorkspaceIndex, Path]) -> None:
    index, root = indexed
    ing = indexing()
    path, other = root / "shop" / "checkout.py", root / "shop" / "pricing.py"
    text = path.read_text()
    plan = plan_completion(text, len(text), "python", SyntaxTree("python", text))
    first = ing.definition_snippets(index, path, text, plan)
    ing.updates.submit(index.update_file, path, text + "\n", path=path)
    ing.updates._thread.submit(lambda: None).result()  # the index thread has run the update
    assert ing.definition_snippets(index, path, text, plan) is first, "typing in this file: still cached"
    changed = other.read_text().replace(
        "def apply_tax(amount: float) -> float:", "def apply_tax(amount: float, rate: float) -> float:"
    )
    ing.updates.submit(index.update_file, other, changed, path=other)
    ing.updates._thread.submit(lambda: None).result()
    again = ing.definition_snippets(index, path, text, plan)
    assert again is not first and "rate: float" in "\n".join(s.text for s in again), "another file changed"
    ing.close()
