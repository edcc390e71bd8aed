"""WorkspaceIndex over the polyglot fixture repository: lookups, search, incremental updates, the persisted cache."""

from __future__ import annotations

import shutil
import sqlite3
import threading
from pathlib import Path

import pytest

from waferline.server.repository.index import IndexOptions, WorkspaceIndex, cache_path, default_cache_dir, name_bonus
from waferline.server.repository.store import FORMAT_VERSION

FIXTURE = Path(__file__).parent / "fixtures" / "repos" / "polyglot"
OPTIONS = IndexOptions(use_git=False, workers=0)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "polyglot"
    shutil.copytree(FIXTURE, root)
    return root.resolve()


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


def open_index(repo: Path, cache: Path) -> WorkspaceIndex:
    return WorkspaceIndex(repo, cache, options=OPTIONS)


def test_cross_file_definitions_and_references(repo: Path, cache: Path) -> None:
    index = open_index(repo, cache)
    report = index.build()
    assert report.files == 13 and report.parsed == 13 and index.ready
    (d,) = index.definitions("apply_tax")
    assert d.path == repo / "shop" / "pricing.py"
    assert d.signature == "def apply_tax(amount: float) -> float"
    assert d.docstring == "Add value-added tax to an amount."
    assert d.selection_range == ((19, 4), (19, 13))
    refs = index.references("apply_tax")
    where = {(r.path.relative_to(repo).as_posix(), r.kind, r.enclosing) for r in refs}
    assert ("shop/checkout.py", "call", "quote") in where
    assert ("shop/pricing.py", "call", "Basket.total") in where
    assert ("tests/check_pricing.py", "import", None) in where
    assert index.reference_count("apply_tax") == (len(refs), 3)
    (reserve,) = index.definitions("Reserve")
    assert (reserve.kind, reserve.container, reserve.qualified_name) == ("method", "Stock", "Stock.Reserve")
    assert [d.name for d in index.definitions_in_file(repo / "web" / "cart.js")] == [
        "formatPrice",
        "CartView",
        "render",
    ]


@pytest.mark.parametrize(
    ("query", "path", "name"),
    [
        ("add value-added tax to an amount", "shop/pricing.py", "apply_tax"),
        ("apply_tax", "shop/pricing.py", "apply_tax"),
        ("reserve units of a product", "inventory/stock.go", "Reserve"),
        ("checksum of a buffer", "native/checksum.c", "adler32"),
        ("how are prices formatted as euros for display?", "web/cart.js", "formatPrice"),
        ("transpose matrix", "native/matrix.cpp", "transpose"),
        ("fetch a product from the catalogue", "web/api.ts", "fetchProduct"),
        ("when are refunds paid back", "docs/guide.md", ""),
    ],
)
def test_search_ranks_the_obvious_match_first(repo: Path, cache: Path, query: str, path: str, name: str) -> None:
    index = open_index(repo, cache)
    index.build()
    hits = index.search(query, k=5)
    assert hits, query
    assert (hits[0].path.relative_to(repo).as_posix(), hits[0].name) == (path, name), hits[:3]
    assert hits == sorted(hits, key=lambda h: -h.score)


def test_search_with_nothing_to_match(repo: Path, cache: Path) -> None:
    index = open_index(repo, cache)
    index.build()
    assert index.search("how does it work?") == []
    assert index.search("zzyzx") == []


def test_incremental_update_remove_and_close(repo: Path, cache: Path) -> None:
    index = open_index(repo, cache)
    index.build()
    checkout = repo / "shop" / "checkout.py"
    edited = (
        checkout.read_text() + "\n\ndef refund(amount):\n    '''Give money back.'''\n    return -apply_tax(amount)\n"
    )
    assert index.update_file(checkout, edited)
    (refund,) = index.definitions("refund")
    assert refund.docstring == "Give money back." and refund.path == checkout
    assert any(r.enclosing == "refund" for r in index.references("apply_tax"))
    # A build while the file is open keeps the editor's text, not the disk's.
    index.build()
    assert index.definitions("refund")
    # Closing the file goes back to what is on disk.
    assert index.close_file(checkout)
    assert index.definitions("refund") == []
    assert index.remove_file(checkout)
    assert index.definitions("checkout") == []
    assert not any(r.path == checkout for r in index.references("round_cents"))
    # A file created on disk appears on refresh (didChangeWatchedFiles) and on the next build.
    (repo / "shop" / "refunds.py").write_text("def refund_all():\n    pass\n")
    assert index.refresh_file(repo / "shop" / "refunds.py")
    assert index.definitions("refund_all")
    (repo / "shop" / "refunds.py").unlink()
    report = index.build()
    assert index.definitions("refund_all") == []
    assert report.removed == 1
    assert index.definitions("checkout"), "a build restores what remove_file dropped while it is still on disk"


def test_new_file_from_editor_and_files_outside(repo: Path, cache: Path, tmp_path: Path) -> None:
    index = open_index(repo, cache)
    index.build()
    assert index.update_file(repo / "shop" / "draft.py", "def draft():\n    pass\n")
    assert index.definitions("draft")
    assert not index.update_file(tmp_path / "elsewhere.py", "def elsewhere():\n    pass\n")
    assert not index.update_file(repo / "notes.txt", "plain text")
    assert index.definitions("elsewhere") == []


def test_warm_start_reuses_the_persisted_index(repo: Path, cache: Path) -> None:
    first = open_index(repo, cache)
    first.build()
    expected = first.definitions("Basket") + first.definitions("greet")
    first.close()
    second = open_index(repo, cache)
    report = second.build()
    assert (report.parsed, report.reused, report.cache_discarded) == (0, 13, None)
    assert second.definitions("Basket") + second.definitions("greet") == expected
    # One changed file on disk is the only one parsed again.
    pricing = repo / "shop" / "pricing.py"
    pricing.write_text(pricing.read_text().replace("TAX_RATE = 0.2", "TAX_RATE = 0.25"))
    second.close()
    third = open_index(repo, cache)
    report = third.build()
    assert (report.parsed, report.reused) == (1, 12)
    assert third.definitions("TAX_RATE")[0].signature == "TAX_RATE = 0.25"


def corrupt_garbage(db: Path) -> None:
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    db.write_bytes(b"this is not a database" * 100)


def corrupt_truncated(db: Path) -> None:
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 3])


def corrupt_version(db: Path) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute(f"PRAGMA user_version = {FORMAT_VERSION + 1}")


def corrupt_root(db: Path) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE meta SET value = '/somewhere/else' WHERE key = 'root'")


def corrupt_extractor(db: Path) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE meta SET value = 'older' WHERE key = 'extractor'")


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (corrupt_garbage, "unreadable"),
        (corrupt_truncated, ""),
        (corrupt_version, "format version"),
        (corrupt_root, "built for"),
        (corrupt_extractor, "another version"),
    ],
)
def test_untrustworthy_cache_is_rebuilt(repo: Path, cache: Path, damage, reason: str) -> None:
    first = open_index(repo, cache)
    first.build()
    first.store._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    first.close()
    damage(first.db_path)
    second = open_index(repo, cache)
    assert second.store.discarded is not None and reason in second.store.discarded
    report = second.build()
    assert report.parsed == 13 and report.cache_discarded == second.store.discarded
    assert [d.name for d in second.definitions("apply_tax")] == ["apply_tax"]


def test_cache_location(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "waferline" / "index"
    index = WorkspaceIndex(repo, options=OPTIONS)
    assert index.db_path == cache_path(default_cache_dir(), repo)
    assert index.db_path is not None and index.db_path.parent.parent == default_cache_dir()
    assert cache_path(tmp_path, repo) != cache_path(tmp_path, repo / "shop")


def test_progress_and_cancel(repo: Path, cache: Path) -> None:
    index = open_index(repo, cache)
    calls: list[tuple[int, int]] = []
    report = index.build(progress=lambda done, total: calls.append((done, total)), should_cancel=lambda: True)
    assert report.cancelled and not index.ready
    assert calls[-1][1] == 13 and calls[-1][0] < 13
    calls.clear()
    report = index.build(progress=lambda done, total: calls.append((done, total)))
    assert not report.cancelled and index.ready
    assert calls[-1] == (13, 13)
    assert [c[0] for c in calls] == sorted(c[0] for c in calls)


def test_worker_processes_give_the_same_index(repo: Path, tmp_path: Path) -> None:
    serial = WorkspaceIndex(repo, tmp_path / "a", options=IndexOptions(use_git=False, workers=0))
    serial.build()
    pooled = WorkspaceIndex(repo, tmp_path / "b", options=IndexOptions(use_git=False, workers=1))
    assert pooled.build().parsed == 13
    for name in ("apply_tax", "Reserve", "greet", "transpose"):
        assert pooled.definitions(name) == serial.definitions(name)
        assert pooled.references(name) == serial.references(name)


def test_definitions_for_names(repo: Path, cache: Path) -> None:
    index = open_index(repo, cache)
    index.build()
    checkout = repo / "shop" / "checkout.py"
    got = index.definitions_for_names(["round_cents", "Basket", "checkout", "nope", "apply_tax"], checkout)
    assert [(d.name, d.path.name) for d in got] == [
        ("Basket", "pricing.py"),
        ("apply_tax", "pricing.py"),
        ("round_cents", "pricing.py"),
    ]
    # Names defined in the file being edited are left out; the limit is honoured.
    assert index.definitions_for_names(["apply_tax"], repo / "shop" / "pricing.py") == []
    assert len(index.definitions_for_names(["round_cents", "Basket", "apply_tax"], checkout, limit=2)) == 2


class BrokenConnection:
    """Stands in for a connection whose file went bad while the server was running."""

    def execute(self, *args: object) -> None:
        raise sqlite3.DatabaseError("database disk image is malformed")

    def close(self) -> None:
        pass


def test_failure_while_in_use_starts_again(repo: Path, cache: Path) -> None:
    index = open_index(repo, cache)
    index.build()
    index.store._reader = BrokenConnection()  # type: ignore[assignment]
    assert index.definitions("apply_tax") == []  # answered (empty), not raised
    assert index.store.needs_rebuild and "malformed" in (index.store.discarded or "")
    report = index.build()
    assert report.parsed == 13 and not index.store.needs_rebuild
    assert [d.name for d in index.definitions("apply_tax")] == ["apply_tax"]


def test_lookups_while_a_build_writes(repo: Path, cache: Path) -> None:
    """The server asks while the background build writes: lookups answer (from the last commit) and never fail."""
    for i in range(60):  # enough files for several write batches
        (repo / "shop" / f"gen_{i}.py").write_text(f"def generated_{i}(x):\n    return apply_tax(x)\n")
    index = open_index(repo, cache)
    done = threading.Event()
    seen: list[int] = []
    worker = threading.Thread(target=lambda: (index.build(), done.set()))
    worker.start()
    while not done.is_set():
        seen.append(len(index.references("apply_tax")))
    worker.join()
    assert seen == sorted(seen), "a lookup never sees the index go backwards"
    assert len(index.references("apply_tax")) == 5 + 60


def test_name_bonus() -> None:
    from waferline.server.repository.terms import query_terms

    assert name_bonus("urlparse", set(query_terms("urlparse"))) == 1.0
    assert name_bonus("add_argument", set(query_terms("where is add_argument"))) == 1.0
    assert name_bonus("copy_tree", set(query_terms("copy a directory tree"))) == 0.5
    assert name_bonus("copy_file", set(query_terms("copy a directory tree"))) == 0.25
    assert name_bonus("", {"x"}) == 0.0 and name_bonus("open", {"close"}) == 0.0
