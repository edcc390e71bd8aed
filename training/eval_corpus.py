"""The evaluation corpus: third-party code never trained on, in a part that choices are made on and a part kept aside.

Six distributions (the first list, `eval.txt`) were too few: a threshold chosen on them did not carry to other code
(issue 26: 40% right when shown there, 23% on other packages). So the evaluation reads two lists, both copied into
the project from the steering's folder (docs/corpus.md): `eval.txt` and `eval-more.txt`, each pinned as it was first
fetched (`eval-pins.txt`, `eval-more-pins.txt`, by training/corpus.py's own `fetch` and `write_pins`: `pip download
--no-deps`, the licence read from each distribution's metadata). `eval-parts.txt` puts every distribution in one
part, by whole distribution:

- `choose`: thresholds, the confidence calibration, finishing rules and option defaults are chosen on these;
- `kept-aside`: only reported on, so that a figure on them says how a choice carries to code nobody looked at.

Built once into a folder (`waferline eval-editor --corpus DIR`, default runs/eval-corpus) at evaluation time, never
at run time or in tests (they build from archives they make).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

from waferline.training.corpus import (
    BuildReport,
    CorpusFile,
    build,
    canonical,
    fetch,
    read_corpus,
    read_list,
    read_pins,
    write_pins,
)

log = logging.getLogger("waferline.training")

HERE = Path(__file__).parent
PARTS_FILE = HERE / "eval-parts.txt"
PARTS = ("choose", "kept-aside")


@dataclass(frozen=True)
class EvalList:
    name: str  # "eval" or "eval-more": what the reports call the cases of its distributions
    names: Path  # the list of distribution names
    pins: Path  # the versions read, written on the first build


LISTS = (
    EvalList("eval", HERE / "eval.txt", HERE / "eval-pins.txt"),
    EvalList("eval-more", HERE / "eval-more.txt", HERE / "eval-more-pins.txt"),
)


def read_parts(path: Path | None = None) -> dict[str, str]:
    """canonical distribution name -> part, from lines `name part` ('#' comments) of `path` (PARTS_FILE)."""
    path = PARTS_FILE if path is None else path
    parts: dict[str, str] = {}
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.split("#", 1)[0].split()
        if not line:
            continue
        if len(line) != 2 or line[1] not in PARTS:
            raise ValueError(f"{path}:{number}: expected 'distribution part' with part one of {PARTS}, got {raw!r}")
        parts[canonical(line[0])] = line[1]
    return parts


def list_of(lists: tuple[EvalList, ...] | None = None) -> dict[str, str]:
    """canonical distribution name -> the name of the list (of `lists`, LISTS) it comes from."""
    return {canonical(n): lst.name for lst in (LISTS if lists is None else lists) for n in read_list(lst.names)}


def fetch_and_build_eval(out: Path, lists: tuple[EvalList, ...] | None = None) -> BuildReport:
    """Fetch every list's distributions (pinned when its pins file exists) into out/archives and build one corpus of
    them all in out (deduplicated together, licence-checked); pin a list whose pins file did not exist yet."""
    from waferline.training.data import load_corpus

    lists = LISTS if lists is None else lists
    names: list[str] = []
    unpinned: list[EvalList] = []
    for lst in lists:
        pins = read_pins(lst.pins)
        listed = sorted(pins) if pins else read_list(lst.names)
        if not pins:
            unpinned.append(lst)
        fetch(listed, out / "archives", pins)
        names += listed
    stdlib = load_corpus()
    report = build(names, out / "archives", out, stdlib=[(f.rel_path, f.text) for f in stdlib.files])
    for lst in unpinned:
        mine = {canonical(n) for n in read_list(lst.names)}
        part = BuildReport({k: v for k, v in report.distributions.items() if canonical(k) in mine})
        write_pins(part, lst.pins)
    log.info("evaluation corpus in %s: kept %s, skipped %s", out, dict(report.kept), dict(report.skipped))
    return report


def eval_files(out: Path, *, part: str = "", source: str = "") -> list[CorpusFile]:
    """The corpus files of `out` (built first if missing) of one part ("choose", "kept-aside"; "" for both) and one
    list ("eval", "eval-more"; "" for both). A distribution the parts file does not name is an error: a new one
    must be put on one side before it is used."""
    if part and part not in PARTS:
        raise ValueError(f"unknown part {part!r}: choose from {', '.join(PARTS)}")
    sources = {lst.name for lst in LISTS}
    if source and source not in sources:
        raise ValueError(f"unknown list {source!r}: choose from {', '.join(sorted(sources))}")
    if not (out / "corpus.jsonl").is_file():
        fetch_and_build_eval(out)
    parts, lists = read_parts(), list_of()
    built = json.loads((out / "licences.json").read_text(encoding="utf-8")).get("distributions", {})
    absent = sorted(set(lists) - {canonical(n) for n in built})
    if absent:
        raise ValueError(f"{out} was built without {', '.join(absent)} (an older corpus of fewer lists): remove the "
                         "folder and it is built again with every list")  # fmt: skip
    files = read_corpus(out)
    missing = sorted({f.dist for f in files if canonical(f.dist) not in parts})
    if missing:
        raise ValueError(f"{PARTS_FILE} puts no part to {', '.join(missing)}")
    return [
        f for f in files
        if (not part or parts[canonical(f.dist)] == part) and (not source or lists.get(canonical(f.dist)) == source)
    ]  # fmt: skip
