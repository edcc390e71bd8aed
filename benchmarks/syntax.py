"""`waferline bench-syntax`: how many milliseconds the syntax work of one keystroke costs on a 2,000-line Python file.

    .venv/bin/waferline bench-syntax [--lines 2000] [--keys 200]    (or python -m waferline.benchmarks.syntax)

Types a function key by key into the middle of the file; each key: `DocumentText.apply_change` + `SyntaxTree.apply`
(edit), the incremental re-parse (parse), `plan_completion` (plan), then `finish_completion` of a two-line answer
(finish). Prints the median, 95th percentile and maximum of each step; asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import time

UNIT = '''

def scale_{i}(points: list[tuple[float, float]], k: float) -> list[tuple[float, float]]:
    """Scale every point by k (unit {i})."""
    out = []
    for x, y in points:
        out.append((x * k, y * k))
    return out
'''
TYPED = "def norm_sq(x, y):\n    return x * x + y * y\n"


def make_file(lines: int) -> str:
    head = "import math\nfrom dataclasses import dataclass\n"
    units = [UNIT.format(i=i) for i in range(lines // UNIT.count("\n") + 1)]
    return head + "".join(units)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lines", type=int, default=2000, help="lines of the generated file (default: 2000)")
    parser.add_argument("--keys", type=int, default=200, help="keystrokes to type (default: 200)")


def run(opts: argparse.Namespace) -> int:
    from waferline.syntax.plan import plan_completion
    from waferline.syntax.postprocess import finish_completion
    from waferline.syntax.text import DocumentText
    from waferline.syntax.tree import SyntaxTree

    for flag in ("lines", "keys"):
        if getattr(opts, flag) < 1:
            raise ValueError(f"--{flag} must be at least 1, got {getattr(opts, flag)}")
    text = make_file(opts.lines)
    doc = DocumentText(text, language_id="python")
    t0 = time.perf_counter()
    tree = SyntaxTree.for_document(doc)
    assert tree.root is not None
    first_parse_ms = (time.perf_counter() - t0) * 1e3
    line = doc.line_count // 2
    while doc.line_text(line).strip():  # a blank line between two functions
        line += 1
    timings: dict[str, list[float]] = {"edit": [], "parse": [], "plan": [], "finish": []}
    typed = (TYPED * (opts.keys // len(TYPED) + 1))[: opts.keys]
    for ch in typed:
        offset = doc.offset_at(line, 10**6)
        t0 = time.perf_counter()
        tree.apply(doc.apply_change((doc.position_at(offset), doc.position_at(offset)), ch))
        t1 = time.perf_counter()
        assert tree.root is not None  # the incremental re-parse, which plan_completion would otherwise do
        t2 = time.perf_counter()
        if ch == "\n":
            line += 1
        offset = doc.offset_at(line, 10**6)
        plan = plan_completion(doc.text, offset, "python", tree)
        t3 = time.perf_counter()
        finish_completion(doc.text, offset, "python", "x + 1)\n    return 2", plan)
        t4 = time.perf_counter()
        for name, ms in zip(timings, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
            timings[name].append(ms * 1e3)
    print(f"{doc.line_count} lines, {len(doc.text)} chars; first full parse {first_parse_ms:.1f} ms")
    print(f"{len(typed)} keystrokes; {tree.parses} parses of the document")
    for name, values in timings.items():
        values.sort()
        p95 = values[int(0.95 * (len(values) - 1))]
        print(f"{name:>7}: median {statistics.median(values):6.2f} ms   p95 {p95:6.2f} ms   max {values[-1]:6.2f} ms")
    return 0


if __name__ == "__main__":
    import sys

    _parser = argparse.ArgumentParser(prog="waferline bench-syntax", description=__doc__.splitlines()[0])
    add_arguments(_parser)
    sys.exit(run(_parser.parse_args()))
