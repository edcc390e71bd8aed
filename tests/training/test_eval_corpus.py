"""The evaluation corpus: two lists fetched (archives made here, nothing downloads), pinned, built together and
split into the choosing and kept-aside parts by whole distribution; the project's own lists and parts file."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from waferline.training import data, eval_corpus
from waferline.training.corpus import canonical, read_list, read_pins
from waferline.training.eval_corpus import EvalList, eval_files, fetch_and_build_eval, read_parts

CODE = "def f{n}(x):\n    total = x + {n}\n    return total * {n}\n"


def wheel(folder: Path, name: str, version: str, licence: str, files: dict[str, str]) -> None:
    stem = f"{name.replace('-', '_')}-{version}"
    with zipfile.ZipFile(folder / f"{stem}-py3-none-any.whl", "w") as z:
        meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nLicense-Expression: {licence}\n\nText.\n"
        z.writestr(f"{stem}.dist-info/METADATA", meta)
        for rel, text in files.items():
            z.writestr(rel, text)


@pytest.fixture
def two_lists(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[EvalList, EvalList]:
    archives = tmp_path / "out" / "archives"
    archives.mkdir(parents=True)
    for i, (name, licence) in enumerate([("alpha", "MIT"), ("beta", "BSD-3-Clause"), ("gamma", "GPL-3.0-only")]):
        wheel(
            archives,
            name,
            f"1.{i}",
            licence,
            {f"{name}/core.py": CODE.format(n=i), f"{name}/b.py": CODE.format(n=i + 10)},
        )
    (tmp_path / "one.txt").write_text("# comment\nalpha\ngamma\n")
    (tmp_path / "two.txt").write_text("beta\n")
    (tmp_path / "parts.txt").write_text("alpha choose\nbeta kept-aside   # aside\ngamma choose\n")
    lists = (EvalList("eval", tmp_path / "one.txt", tmp_path / "one-pins.txt"),
             EvalList("eval-more", tmp_path / "two.txt", tmp_path / "two-pins.txt"))  # fmt: skip
    monkeypatch.setattr(eval_corpus, "LISTS", lists)
    monkeypatch.setattr(eval_corpus, "PARTS_FILE", tmp_path / "parts.txt")
    monkeypatch.setattr(data, "load_corpus", lambda: data.Corpus())  # the stdlib is not needed here
    return lists


def test_both_lists_are_built_pinned_and_split(tmp_path: Path, two_lists: tuple[EvalList, EvalList]) -> None:
    out = tmp_path / "out"
    files = eval_files(out)  # builds on first use
    assert {f.rel_path for f in files} == {
        "alpha/alpha/core.py",
        "alpha/alpha/b.py",
        "beta/beta/core.py",
        "beta/beta/b.py",
    }  # fmt: skip  (gamma refused: GPL)
    assert read_pins(two_lists[0].pins) == {"alpha": "1.0", "gamma": "1.2"}  # each list pinned on its own
    assert read_pins(two_lists[1].pins) == {"beta": "1.1"}
    assert {f.dist for f in eval_files(out, part="kept-aside")} == {"beta"}
    assert {f.dist for f in eval_files(out, part="choose")} == {"alpha"}
    assert {f.dist for f in eval_files(out, source="eval-more")} == {"beta"}
    assert eval_files(out, part="choose", source="eval-more") == []
    with pytest.raises(ValueError, match="unknown part"):
        eval_files(out, part="test")
    with pytest.raises(ValueError, match="unknown list"):
        eval_files(out, source="train")


def test_a_distribution_without_a_part_is_refused(tmp_path: Path, two_lists: tuple[EvalList, EvalList]) -> None:
    fetch_and_build_eval(tmp_path / "out", two_lists[:1])  # an older corpus, of one list
    with pytest.raises(ValueError, match="built without beta"):
        eval_files(tmp_path / "out")
    fetch_and_build_eval(tmp_path / "out")
    (tmp_path / "parts.txt").write_text("alpha choose\n")
    with pytest.raises(ValueError, match="no part to beta"):
        eval_files(tmp_path / "out")
    (tmp_path / "parts.txt").write_text("alpha elsewhere\n")
    with pytest.raises(ValueError, match=r"parts\.txt:1"):
        read_parts(tmp_path / "parts.txt")


def test_the_projects_lists_and_parts() -> None:
    """Every evaluation distribution is in exactly one part, and none of them is in the training list."""
    parts = read_parts()
    listed = [canonical(n) for lst in eval_corpus.LISTS for n in read_list(lst.names)]
    assert len(listed) == 18 and set(listed) == set(parts)
    assert not set(listed) & {canonical(n) for n in read_list(eval_corpus.HERE / "train.txt")}
    more = {canonical(n) for n in read_list(eval_corpus.HERE / "eval-more.txt")}
    aside = {n for n, p in parts.items() if p == "kept-aside"}
    assert aside <= more and len(aside) == 6
    for lst in eval_corpus.LISTS:  # pinned: a rebuild reads the same archives
        assert set(read_pins(lst.pins)) == {canonical(n) for n in read_list(lst.names)}
