from pathlib import Path

from waferline.training.data import MAX_FILE_BYTES, is_held_out, load_corpus


def test_bad_files_are_skipped_with_counts(tmp_path: Path) -> None:
    (tmp_path / "good.py").write_text("x = 1\n")
    (tmp_path / "copy.py").write_text("x = 1\n")  # same content: a duplicate
    (tmp_path / "empty.py").write_text("  \n")
    (tmp_path / "latin1.py").write_bytes("s = 'caf\xe9'\n".encode("latin-1"))
    (tmp_path / "giant.py").write_text("x = 1\n" * (MAX_FILE_BYTES // 6 + 1))
    (tmp_path / "broken.py").write_text("def f(:\n    return\n")
    (tmp_path / "site-packages").mkdir()
    (tmp_path / "site-packages" / "third.py").write_text("y = 2\n")  # not the standard library: never visited
    corpus = load_corpus(tmp_path, percent=0)
    assert [f.rel_path for f in corpus.train] == ["copy.py"]  # sorted order: copy.py is seen before good.py
    assert dict(corpus.skipped) == {"duplicate": 1, "empty": 1, "not_utf8": 1, "giant": 1, "unparseable": 1}


def test_split_is_by_path_and_stable(corpus_dir: Path) -> None:
    a = load_corpus(corpus_dir, percent=50)
    b = load_corpus(corpus_dir, percent=50)
    assert [f.rel_path for f in a.held_out] == [f.rel_path for f in b.held_out]
    assert all(is_held_out(f.rel_path, 50) for f in a.held_out)
    assert not {f.rel_path for f in a.held_out} & {f.rel_path for f in a.train}
    assert a.held_out and a.train
