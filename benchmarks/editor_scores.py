"""How `waferline eval-editor` scores answers: per case, then each figure with its 95% bootstrap interval.

A case's answer is shown when its scored text (the first line of a single-line case's suggestion, the whole of a
multi-line one) is not blank, and right when that text is exactly the expected one. What a user keeps of a shown
suggestion is counted two ways: `kept_per_shown`, characters kept per shown suggestion by a client accepting it
word by word (training/editor_cases.py `kept_words`, VS Code's accept-next-word pieces, up to the first wrong one:
what the gate should maximise per thing put on screen), and `kept_chars_per_100`, the longest correct start to the
character, per 100 requests (what the user gets per request, the older figure). Every figure is a ratio of sums over
cases, so one set of bootstrap draws (training/bootstrap.py) gives all their intervals, paired across the systems
that answered the same cases: `vs_copy_line` (exact over all against copy-line's) and, with two models, the
difference between them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from waferline.training.bootstrap import Resampler

# figure -> (per-case numerator column, denominator column or None for all cases, scale)
FIGURES: dict[str, tuple[str, str | None, float]] = {
    "shown_rate": ("shown", None, 1.0),
    "exact_when_shown": ("exact", "shown", 1.0),
    "exact_over_all": ("exact", None, 1.0),
    "edit_similarity": ("similarity", None, 1.0),
    "kept_per_shown": ("kept_words", "shown", 1.0),
    "kept_chars_per_100": ("kept_chars", None, 100.0),
    "pass_at_1": ("passed", None, 1.0),
}


def baselines(case: Any, tokenizer: Any) -> dict[str, str]:
    """The copy-line and document n-gram suggestions for one case (single line)."""
    from waferline.training.baselines import NGramModel, copy_similar_line

    before, after = case.document[: case.offset], case.document[case.offset :]
    copy = copy_similar_line(before)
    ids_before, ids_after = tokenizer.encode(before), tokenizer.encode(after)
    model = NGramModel([ids_before, ids_after], tokenizer.vocab_size, 4)

    def one_line(out: list[int]) -> bool:
        return "\n" in tokenizer.decode(out)

    ngram = tokenizer.decode(model.complete(ids_before, 24, one_line)).split("\n", 1)[0]
    return {"copy_line": copy, "ngram": ngram}


def shown_text(case: Any, suggestion: str | None) -> str:
    """What is scored: the first line of a single-line case's suggestion, the whole of a multi-line one."""
    from waferline.training.editor_cases import first_line

    return (suggestion or "").rstrip() if case.kind == "he-multi" else first_line(suggestion or "").rstrip()


def right(case: Any, suggestion: str | None) -> bool:
    text = shown_text(case, suggestion)
    return bool(text.strip()) and text == case.expected


def columns(cases: Sequence[Any], suggestions: Sequence[str | None], *, tests: bool) -> dict[str, np.ndarray]:
    """Per case: shown, exact, similarity, kept_words, kept_chars, loops (and passed, with `tests`)."""
    from waferline.syntax.repetition import is_loop
    from waferline.training.cases import edit_similarity
    from waferline.training.editor_cases import kept_chars, kept_words, passes_tests

    rows: dict[str, list[float]] = {k: [] for k in ("shown", "exact", "similarity", "kept_words", "kept_chars",
                                                    "loops", "passed")}  # fmt: skip
    for case, s in zip(cases, suggestions, strict=True):
        text = shown_text(case, s)
        shown = bool(text.strip())
        rows["similarity"].append(edit_similarity(text, case.expected))
        rows["shown"].append(float(shown))
        rows["exact"].append(float(shown and text == case.expected))
        rows["kept_words"].append(float(kept_words(text, case.expected)) if shown else 0.0)
        rows["kept_chars"].append(float(kept_chars(text, case.expected)) if shown else 0.0)
        rows["loops"].append(float(shown and is_loop(s or "")))
        rows["passed"].append(float(shown and tests and passes_tests(case, text)))
    return {k: np.array(v, dtype=np.float64) for k, v in rows.items()}


def figures_of(cols: Mapping[str, np.ndarray], boot: Resampler, *, tests: bool) -> dict[str, Any]:
    """Each figure of FIGURES (pass@1 only with `tests`) and `<figure>_ci`, its 95% interval; loops as a count."""
    out: dict[str, Any] = {"cases": boot.n}
    for name, (num, den, scale) in FIGURES.items():
        if name == "pass_at_1" and not tests:
            continue
        point, low, high = boot.ratio(cols[num], cols[den] if den else None)
        out[name] = scale * point if point == point else 0.0  # nan (nothing shown): 0, as before
        out[name + "_ci"] = [scale * low, scale * high]
    out["loops_shown"] = int(cols["loops"].sum())
    return out


def score(cases: Sequence[Any], suggestions: Sequence[str | None], *, tests: bool, seed: int = 0) -> dict[str, Any]:
    """Figures of one system over cases; a None or empty suggestion is not shown."""
    return figures_of(columns(cases, suggestions, tests=tests), Resampler(len(cases), seed=seed), tests=tests)


def summarize(
    cases: Sequence[Any], answers: Mapping[str, Sequence[dict[str, Any]]], tokenizer: Any, *, seed: int = 0
) -> dict[str, Any]:
    """kind -> system -> figures, for each model's answers (label -> answers) and the baselines, plus each model's
    `vs_copy_line` and, with two models, `second_minus_first` (paired differences over the same cases)."""
    from waferline.benchmarks.editor_eval import KINDS

    figures: dict[str, Any] = {}
    for kind in KINDS:
        idx = [i for i, c in enumerate(cases) if c.kind == kind]
        if not idx:
            continue
        sub = [cases[i] for i in idx]
        tests = kind.startswith("he-")
        boot = Resampler(len(sub), seed=seed)
        base = [baselines(c, tokenizer) for c in sub]
        cols = {label: columns(sub, [got[i]["suggestion"] for i in idx], tests=tests) for label, got in answers.items()}
        base_cols = {name: columns(sub, [b[name] for b in base], tests=tests) for name in ("copy_line", "ngram")}
        row: dict[str, Any] = {}
        for label, got in answers.items():
            row[label] = figures_of(cols[label], boot, tests=tests)
            lat = sorted(got[i]["latency_ms"] for i in idx)
            row[label]["latency_ms_p50"] = lat[len(lat) // 2]
            row[label]["latency_ms_p95"] = lat[min(len(lat) - 1, int(len(lat) * 0.95))]
            point, low, high = boot.ratio(cols[label]["exact"], base_cols["copy_line"]["exact"])
            row[label]["vs_copy_line"], row[label]["vs_copy_line_ci"] = point, [low, high]
        for name, c in base_cols.items():
            row[name] = figures_of(c, boot, tests=tests)
        labels = list(answers)
        if len(labels) == 2:
            a, b = cols[labels[0]], cols[labels[1]]
            diff: dict[str, Any] = {}
            pairs = (("exact_over_all", "exact"), ("shown_rate", "shown"), ("kept_chars_per_100", "kept_chars"))
            for name, col in pairs:
                scale = 100.0 if name == "kept_chars_per_100" else 1.0
                point, low, high = boot.difference(b[col], a[col])
                diff[name], diff[name + "_ci"] = scale * point, [scale * low, scale * high]
            row["second_minus_first"] = diff
        figures[kind] = row
    return figures


def _cell(f: Mapping[str, Any], name: str) -> str:
    value, (low, high) = f[name], f[name + "_ci"]
    if name in ("kept_per_shown", "kept_chars_per_100"):
        return f"{value:.1f} [{low:.1f}, {high:.1f}]"
    return f"{value:.1%} [{low:.1%}, {high:.1%}]"


def print_table(figures: Mapping[str, Any]) -> None:
    """One row per kind and system: each figure with its 95% interval."""
    cols = ("shown_rate", "exact_when_shown", "exact_over_all", "kept_per_shown", "kept_chars_per_100")
    print("kind      system               " + "  ".join(f"{c:>24}" for c in cols) + "  loops  vs copy-line  p50 ms")
    for kind, row in figures.items():
        for system, f in row.items():
            if system == "second_minus_first":
                cells = "  ".join(f"{_cell(f, c):>24}" if c in f else " " * 24 for c in cols)
                print(f"{kind:9} {'second - first':20} {cells}")
                continue
            cells = "  ".join(f"{_cell(f, c):>24}" for c in cols)
            ratio = f"{f['vs_copy_line']:.2f}x" if "vs_copy_line" in f else ""
            lat = f"{f['latency_ms_p50']:7.1f}" if "latency_ms_p50" in f else ""
            print(f"{kind:9} {system[:20]:20} {cells}  {f['loops_shown']:5d}  {ratio:>11}  {lat}")
