"""The figures of `waferline eval-nes` (benchmarks/nes_eval.py) from its cases and the server's answers."""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Sequence
from typing import Any

from waferline.benchmarks.nes_eval import after_user, apply, intended, mean, repeat_baseline
from waferline.server.stats import percentile
from waferline.training.bootstrap import Resampler


def diff_lines(before: str, after: str) -> Counter[tuple[str, int, str]]:
    """The lines a change removes and adds, each anchored at its line in `before`."""
    a, b = before.splitlines(), after.splitlines()
    out: Counter[tuple[str, int, str]] = Counter()
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag != "equal":
            out.update(("-", i, a[i]) for i in range(i1, i2))
            out.update(("+", i1, line) for line in b[j1:j2])
    return out


def lines_f1(before: str, predicted: str, gold: str) -> float:
    p, g = diff_lines(before, predicted), diff_lines(before, gold)
    if not p and not g:
        return 1.0
    common = sum((p & g).values())
    return 2 * common / (sum(p.values()) + sum(g.values()))


def _pct(values: Sequence[float], q: float) -> float | None:
    v = percentile(list(values), q)
    return None if v is None else round(v, 2)


def _rate(hits: int, n: int) -> float | None:
    return round(hits / n, 4) if n else None


def _interval(resampler: Resampler | None, values: Sequence[float]) -> list[float] | None:
    """The 95% bootstrap interval of the mean of `values` (one per case), or None without cases."""
    if resampler is None:
        return None
    _, low, high = resampler.ratio(values)
    return [round(low, 4), round(high, 4)]


def structural_figures(cases: Sequence[dict[str, Any]], answers: Sequence[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    rows = list(zip(cases, answers, strict=True))
    for category in [*sorted({c["category"] for c in cases}), "all"]:
        chosen = [(c, a) for c, a in rows if category in ("all", c["category"])]
        right = [a["final"] == intended(c) for c, a in chosen]
        silent = [c for c, _ in chosen if not c["expected"]]
        latencies = [ms for _, a in chosen for ms in a["latencies_ms"]]
        baseline_right = [repeat_baseline(c)[0] == intended(c) for c, _ in chosen]
        out[category] = {
            "cases": len(chosen),
            "whole_file_exact": _rate(sum(right), len(chosen)),
            "silent_cases": len(silent),
            "suggestions_accepted": sum(len(a["suggested"]) for _, a in chosen),
            "requests": len(latencies),
            "latency_ms_p50": _pct(latencies, 50),
            "latency_ms_p95": _pct(latencies, 95),
            "baseline_no_edit_exact": _rate(len(silent), len(chosen)),
            "baseline_repeat_exact": _rate(sum(baseline_right), len(chosen)),
        }
    return out


def model_figures(cases: Sequence[dict[str, Any]], answers: Sequence[dict[str, Any]]) -> dict[str, Any]:
    rows = list(zip(cases, answers, strict=True))
    goes_on = [(c, a) for c, a in rows if c["next"] is not None]
    ends = [(c, a) for c, a in rows if c["next"] is None]

    def predicted(c: dict[str, Any], a: dict[str, Any]) -> str:
        text = after_user(c)
        return apply(text, a["suggested"][0]) if a["suggested"] else text

    on_goes = Resampler(len(goes_on)) if goes_on else None
    on_ends = Resampler(len(ends)) if ends else None
    per_case: dict[str, list[float]] = {}

    def figures(name: str, pred: Any) -> dict[str, Any]:
        exact = [float(pred(c, a) == intended(c)) for c, a in goes_on]
        f1 = [lines_f1(after_user(c), pred(c, a), intended(c)) for c, a in goes_on]
        silent_right = [float(pred(c, a) == after_user(c)) for c, a in ends]
        silent_wrong = [float(pred(c, a) == after_user(c)) for c, a in goes_on]
        per_case[name] = exact
        return {"exact_next_hunk": _rate(int(sum(exact)), len(goes_on)),
                "exact_lines_f1": None if not f1 else round(mean(f1) or 0.0, 4),
                "silent_when_should": _rate(int(sum(silent_right)), len(ends)),
                "silent_when_should_not": _rate(int(sum(silent_wrong)), len(goes_on)),
                "intervals": {"exact_next_hunk": _interval(on_goes, exact), "exact_lines_f1": _interval(on_goes, f1),
                              "silent_when_should": _interval(on_ends, silent_right),
                              "silent_when_should_not": _interval(on_goes, silent_wrong)}}  # fmt: skip

    latencies = [ms for _, a in rows for ms in a["latencies_ms"]]
    server = figures("server", predicted)
    no_edit = figures("no_edit", lambda c, a: after_user(c))
    repeat = figures("repeat", lambda c, a: repeat_baseline(c)[0])
    versus = {}
    if on_goes is not None:  # paired over the same cases: the server's exact next hunk minus each baseline's
        for name in ("no_edit", "repeat"):
            d, low, high = on_goes.difference(per_case["server"], per_case[name])
            versus[f"exact_next_hunk_minus_{name}"] = [round(d, 4), round(low, 4), round(high, 4)]
    return {
        "cases": len(rows), "with_next_hunk": len(goes_on), "silent_cases": len(ends),
        "server": server, "baseline_no_edit": no_edit, "baseline_repeat": repeat, "server_versus_baselines": versus,
        "suggested_by_kind": dict(Counter(s["kind"] for _, a in rows for s in a["suggested"][:1])),
        "latency_ms_p50": _pct(latencies, 50), "latency_ms_p95": _pct(latencies, 95),
    }  # fmt: skip


STRUCTURAL = (("structural", "Python"), ("structural-js", "JavaScript and TypeScript"), ("structural-go", "Go"),
              ("structural-rust", "Rust"), ("structural-java", "Java"), ("structural-c", "C"),
              ("structural-cpp", "C++"))  # fmt: skip
_KIND = {"python": "structural", "javascript": "structural-js", "typescript": "structural-js", "go": "structural-go",
         "rust": "structural-rust", "java": "structural-java", "c": "structural-c",
         "cpp": "structural-cpp"}  # fmt: skip


def summarize(
    cases: Sequence[dict[str, Any]], answers: Sequence[dict[str, Any]], stats: dict[str, Any]
) -> dict[str, Any]:
    rows = list(zip(cases, answers, strict=True))
    model = [(c, a) for c, a in rows if c["kind"] == "model"]
    out: dict[str, Any] = {}
    for kind, _ in STRUCTURAL:
        chosen = [(c, a) for c, a in rows if c["kind"] == "structural" and _KIND[c.get("language", "python")] == kind]
        if not chosen:
            continue
        figures = structural_figures([c for c, _ in chosen], [a for _, a in chosen])
        languages = sorted({c.get("language", "python") for c, _ in chosen})
        if kind == "structural-js":  # JavaScript and TypeScript: each language's whole too
            total = figures.pop("all")
            for language in languages:
                one = [(c, a) for c, a in chosen if c["language"] == language]
                figures[f"all-{language}"] = structural_figures([c for c, _ in one], [a for _, a in one])["all"]
            figures["all"] = total
        out[kind] = figures
    if model:
        out["model"] = model_figures([c for c, _ in model], [a for _, a in model])
    inline_edit = stats.get("inlineEdit", {})
    out["server"] = {"inlineEdit": inline_edit, "tokens_per_step": stats.get("tokens_per_step"),
                     "generations": stats.get("generations")}  # fmt: skip
    return out


def print_table(figures: dict[str, Any]) -> None:
    for kind, title in STRUCTURAL:
        if kind not in figures:
            continue
        print(f"{title} structural cases (whole file exact after accepting every suggestion)")
        print(f"  {'category':<28}{'cases':>6}{'exact':>8}{'repeat':>8}{'no edit':>9}{'p50 ms':>8}{'p95 ms':>8}")
        for category, f in figures[kind].items():
            print(
                f"  {category:<28}{f['cases']:>6}{_fmt(f['whole_file_exact']):>8}{_fmt(f['baseline_repeat_exact']):>8}"
                f"{_fmt(f['baseline_no_edit_exact']):>9}{_fmt(f['latency_ms_p50']):>8}{_fmt(f['latency_ms_p95']):>8}"
            )
    if "model" in figures:
        m = figures["model"]
        print(f"commit cases: {m['cases']} ({m['with_next_hunk']} with a next hunk, {m['silent_cases']} silent)")
        print(f"  {'':<18}{'exact hunk':>11}{'lines F1':>10}{'silent ok':>11}{'silent bad':>12}")
        for name in ("server", "baseline_no_edit", "baseline_repeat"):
            f = m[name]
            ci = f["intervals"]["exact_next_hunk"]
            print(
                f"  {name:<18}{_fmt(f['exact_next_hunk']):>11}{_fmt(f['exact_lines_f1']):>10}"
                f"{_fmt(f['silent_when_should']):>11}{_fmt(f['silent_when_should_not']):>12}"
                f"   exact 95% [{_fmt(ci[0]) if ci else '-'}, {_fmt(ci[1]) if ci else '-'}]"
            )
        for name, (d, low, high) in m["server_versus_baselines"].items():
            print(f"  {name}: {d:+.4f} [{low:+.4f}, {high:+.4f}]")
        print(f"  latency p50 {_fmt(m['latency_ms_p50'])} ms, p95 {_fmt(m['latency_ms_p95'])} ms")
    s = figures["server"]
    print(f"server: tokens per model step {_fmt(s['tokens_per_step'])}, inlineEdit {s['inlineEdit']}")


def _fmt(v: Any) -> str:
    return "-" if v is None else f"{v:.3g}" if isinstance(v, float) else str(v)
