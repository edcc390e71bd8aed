"""How many milliseconds a structural next edit costs in Rust, Java, C and C++ on a ~1,000-line file.

    python -m waferline.benchmarks.nes_declared [--lines 1000] [--repeat 20]

In process (no LSP framing): the document is opened, a parameter of a function in the middle of the file is renamed
as a user would (the name selected, the new one typed key by key), then `NextEdits.answer` is asked and its edit
applied and accepted until it is silent (the chain; its first --chain answers), timing each answer; then the same
after the function's second parameter is deleted (its call sites). Two shapes per language: many small functions
(`units`), and one function of the whole length (`long`: the rename's scope is the whole file). Prints the median
and maximum of the answers of each chain, how many edits it made, the candidate alone (`declared_edits` on the
document as the user's edit left it, median of 10, on a document of its own) and a full parse of the file beside it;
asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import time

from waferline.benchmarks.next_edit_session import Session
from waferline.server.features.next_edit.signature_declared import declared_edits
from waferline.server.features.next_edit.source import Source
from waferline.syntax.edit_history import EditEvent
from waferline.syntax.languages import parser_for

UNITS = {
    "rust": ("fn unit_{i}(w: i32, h: i32) -> i32 {{\n    let total = w * h;\n    let p = Point {{ x: w, y: h }};\n"
             "    if total > 10 {{\n        return total + w;\n    }}\n    total + p.x + unit_{j}(w, h)\n}}\n\n"),
    "java": ("  int unit{i}(int w, int h) {{\n    int total = w * h;\n    for (int k = 0; k < h; k++) {{\n"
             "      total += k * w;\n    }}\n    return total + this.w + unit{j}(w, h);\n  }}\n\n"),
    "c": ("static int unit_{i}(int w, int h) {{\n  int total = w * h;\n  for (int k = 0; k < h; k++) {{\n"
          "    total += k * w;\n  }}\n  return total + unit_{j}(w, h);\n}}\n\n"),
}  # fmt: skip
LONG_LINE = {"rust": "    total += w * {i};\n", "java": "    total += w * {i};\n", "c": "  total += w * {i};\n"}
LONG_HEAD = {"rust": "fn long(w: i32, h: i32) -> i32 {\n    let mut total = h;\n",
             "java": "  int longOne(int w, int h) {\n    int total = h;\n",
             "c": "static int long_one(int w, int h) {\n  int total = h;\n"}  # fmt: skip
LONG_TAIL = {"rust": "    total\n}\n", "java": "    return total;\n  }\n", "c": "  return total;\n}\n"}


def make_file(language: str, lines: int, shape: str) -> tuple[str, str]:
    """The file's text and the needle of the parameter list to edit."""
    base = "c" if language == "cpp" else language
    if shape == "units":
        unit = UNITS[base]
        n = lines // unit.format(i=0, j=1).count("\n")
        body = "".join(unit.format(i=i, j=(i + 1) % n) for i in range(n))
        middle = n // 2
        needle = {"rust": f"fn unit_{middle}(w", "java": f"unit{middle}(int w", "c": f"unit_{middle}(int w"}[base]
    else:
        body = LONG_HEAD[base] + "".join(LONG_LINE[base].format(i=i) for i in range(lines - 4)) + LONG_TAIL[base]
        needle = {"rust": "long(w", "java": "longOne(int w", "c": "long_one(int w"}[base]
    if base == "java":
        body = "class Units {\n  int w;\n\n" + body + "}\n"
    return body, needle


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lines", type=int, default=1000, help="lines of each generated file (default: 1000)")
    parser.add_argument("--repeat", type=int, default=3, help="chains timed per language and shape (default: 3)")
    parser.add_argument("--chain", type=int, default=50, help="answers timed per chain at most (default: 50)")


def user_edit(text: str, language: str, needle: str, candidate: str) -> tuple[Session, int, int, EditEvent]:
    """The document after the user's edit, where its new text is and the edit: `w` renamed `width` (rename), the
    second parameter deleted (signature: its callers' second argument follows)."""
    d = Session(text, language, uri=f"file:///bench/units.{language}")
    if candidate == "rename":
        at = text.index(needle) + needle.index("w")
        d.edit(needle, "w", "width")
        return d, at, at + len("width"), EditEvent(at, "w", "width", 0.0)
    at = text.index(", ", text.index(needle))
    close = text.index(")", at)
    d.replace(at, close, "")
    return d, at, at, EditEvent(at, text[at:close], "", 0.0)


def candidate_ms(d: Session, start: int, end: int, event: EditEvent) -> tuple[float, float]:
    """(the candidate alone: `declared_edits` on the document as the user's edit left it, a full parse of its
    text), medians of 10 runs in ms."""
    root = d.doc.syntax.root
    parser = parser_for(d.doc.language_id)
    assert root is not None and parser is not None
    src, data, alone, parse = Source(d.doc.text.text, root), d.doc.text.text.encode(), [], []
    for _ in range(10):
        t0 = time.perf_counter()
        declared_edits(src, d.doc.language_id, start, end, event, frozenset())
        t1 = time.perf_counter()
        parser.parse(data)
        alone.append((t1 - t0) * 1000)
        parse.append((time.perf_counter() - t1) * 1000)
    return statistics.median(alone), statistics.median(parse)


def run(opts: argparse.Namespace) -> int:
    print(f"{'language':<8} {'shape':<6} {'candidate':<10} {'lines':>5} {'edits':>5} {'p50 ms':>8} {'max ms':>8} "
          f"{'alone ms':>8} {'parse ms':>8}")  # fmt: skip
    for language in ("rust", "java", "c", "cpp"):
        for shape in ("units", "long"):
            text, needle = make_file(language, opts.lines, shape)
            for candidate in ("rename", "signature"):
                times: list[float] = []
                made = 0
                for _ in range(opts.repeat):
                    t, made = user_edit(text, language, needle, candidate)[0].chain(opts.chain)
                    times.extend(t)
                alone, parse = candidate_ms(*user_edit(text, language, needle, candidate))
                print(f"{language:<8} {shape:<6} {candidate:<10} {text.count(chr(10)):>5} {made:>5} "
                      f"{statistics.median(times):>8.2f} {max(times):>8.2f} {alone:>8.2f} {parse:>8.2f}",
                      flush=True)  # fmt: skip
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_arguments(parser)
    return run(parser.parse_args())


if __name__ == "__main__":
    raise SystemExit(main())
