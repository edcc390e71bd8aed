"""The training corpus: Python sources of the interpreter's own standard library, filtered, deduplicated, split.

Why the standard library: it is on every machine that runs waferline (no download), it is permissively licensed
(PSF License), and it is idiomatic, reviewed Python. Files are skipped, never fatal, when they are not UTF-8, empty,
giant (usually generated tables) or do not parse; the counts are logged so a user sees what was left out.
The held-out split is a hash of the relative path, so it is stable across machines and runs and whole files never
leak between the splits.
"""

from __future__ import annotations

import hashlib
import logging
import sysconfig
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from waferline.syntax.languages import parser_for

log = logging.getLogger("waferline.training")

MAX_FILE_BYTES = 200_000  # larger files in the stdlib are generated tables (e.g. _pydecimal is 230 KB, still code)
HELD_OUT_PERCENT = 2
# Third-party packages installed into the interpreter are not the standard library and carry other licences.
EXCLUDED_DIRS = frozenset({"site-packages", "dist-packages", "__pycache__"})


@dataclass(frozen=True)
class SourceFile:
    rel_path: str  # relative to the corpus root, '/'-separated: the split and the logs name files by it
    text: str


@dataclass
class Corpus:
    train: list[SourceFile] = field(default_factory=list)
    held_out: list[SourceFile] = field(default_factory=list)
    held_out_dists: list[SourceFile] = field(default_factory=list)  # whole third-party distributions never trained on
    skipped: Counter[str] = field(default_factory=Counter)  # reason -> count

    @property
    def files(self) -> list[SourceFile]:
        return self.train + self.held_out + self.held_out_dists

    def add_third_party(self, folder: Path, max_dist_chars: int | None = None) -> None:
        """Add the corpus `waferline.training.corpus.build` wrote to folder, keeping its splits.

        `max_dist_chars` caps each distribution's training text (files drawn in a fixed hashed order), so that a
        few giants (sympy, pandas, scipy: a third of the text) do not make the model a specialist of their style.
        """
        from waferline.training.corpus import read_corpus

        split = {"train": self.train, "held_out_file": self.held_out, "held_out_dist": self.held_out_dists}
        files = sorted(read_corpus(folder), key=lambda f: hashlib.sha256(f.rel_path.encode()).digest())
        taken: Counter[str] = Counter()
        for f in files:
            if f.split == "train" and max_dist_chars is not None:
                if taken[f.dist] >= max_dist_chars:
                    self.skipped["over_distribution_cap"] += 1
                    continue
                taken[f.dist] += len(f.text)
            split[f.split].append(SourceFile(f.rel_path, f.text))
        log.info(
            "third-party corpus %s: %d train files (%.1f MB), %d held-out files, %d files of held-out distributions",
            folder, len(self.train), sum(len(f.text) for f in self.train) / 1e6, len(self.held_out),
            len(self.held_out_dists),
        )  # fmt: skip


def stdlib_root() -> Path:
    """The standard library directory of the running interpreter."""
    return Path(sysconfig.get_paths()["stdlib"])


def is_held_out(rel_path: str, percent: int = HELD_OUT_PERCENT) -> bool:
    """Deterministic split of whole files: the first bytes of sha256(path) decide, independent of the machine."""
    h = int.from_bytes(hashlib.sha256(rel_path.encode("utf-8")).digest()[:4], "big")
    return h % 100 < percent


def check_source(data: bytes, parser: object | None = None) -> tuple[str | None, str]:
    """(text, "") for a usable file, or (None, reason) for one to skip."""
    if not data.strip():
        return None, "empty"
    if len(data) > MAX_FILE_BYTES:
        return None, "giant"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None, "not_utf8"
    if "\x00" in text:
        return None, "binary"
    p = parser if parser is not None else parser_for("python")
    assert p is not None, "the tree-sitter Python grammar is not installed"
    tree = p.parse(data)  # type: ignore[attr-defined]
    if tree.root_node.has_error:
        return None, "unparseable"
    return text.replace("\r\n", "\n"), ""


def load_corpus(root: Path | None = None, *, max_files: int | None = None, percent: int = HELD_OUT_PERCENT) -> Corpus:
    """Every usable .py file under root (default: the stdlib), deduplicated by content, split train / held-out.

    Files are visited in sorted order so that the corpus, and so the training run, is the same on every call.
    """
    root = root if root is not None else stdlib_root()
    if not root.is_dir():
        raise OSError(f"corpus root {root} is not a directory")
    parser = parser_for("python")
    corpus = Corpus()
    seen: set[str] = set()
    paths = sorted(p for p in root.rglob("*.py") if not EXCLUDED_DIRS.intersection(p.relative_to(root).parts))
    for path in paths:
        if max_files is not None and len(corpus.train) + len(corpus.held_out) >= max_files:
            break
        rel = path.relative_to(root).as_posix()
        try:
            data = path.read_bytes()
        except OSError as e:
            log.debug("skip %s: %s", rel, e)
            corpus.skipped["unreadable"] += 1
            continue
        text, reason = check_source(data, parser)
        if text is None:
            log.debug("skip %s: %s", rel, reason)
            corpus.skipped[reason] += 1
            continue
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        if digest in seen:
            corpus.skipped["duplicate"] += 1
            continue
        seen.add(digest)
        (corpus.held_out if is_held_out(rel, percent) else corpus.train).append(SourceFile(rel, text))
    log.info(
        "corpus %s: %d train files (%.1f MB), %d held-out files; skipped %s",
        root,
        len(corpus.train),
        sum(len(f.text) for f in corpus.train) / 1e6,
        len(corpus.held_out),
        dict(sorted(corpus.skipped.items())) or "none",
    )
    return corpus
