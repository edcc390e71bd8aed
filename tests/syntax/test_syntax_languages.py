"""One real completion per language on its fixture file: context selection, stop rules, truncation, the parse check.

Each case inserts a new definition into the fixture (at `anchor`, or at the end) with the cursor at `|`, the way an
editor would hold it after auto-closing a bracket, then runs plan_completion and finish_completion on a model answer
that runs past the end of what should be shown.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from waferline.syntax.languages import language_for_path
from waferline.syntax.plan import CompletionPlan, plan_completion
from waferline.syntax.postprocess import finish_completion, should_stop
from waferline.syntax.tree import SyntaxTree

FIXTURES = Path(__file__).parents[1] / "server" / "fixtures"


@dataclass(frozen=True)
class Case:
    fixture: str
    block: str  # a definition opening a block, cursor at |
    answer: str  # what the model writes there: the body, then more than should be shown
    shown: str  # what finish_completion must show
    call: str  # a definition with a call whose brackets the editor auto-closed, cursor at |
    call_answer: str
    call_shown: str  # the completion replaces the auto-closed brackets it writes itself
    imports: str  # the imports snippet
    indent: str = "    "
    anchor: str | None = None  # insert before the last occurrence of this text (default: at the end)


CASES = {
    "python": Case(
        "sample.py",
        "\n\ndef area(w: float, h: float) -> float:|\n",
        "\n    return w * h\n\n\ndef volume(w, h, d):\n    return w * h * d\n",
        "\n    return w * h",
        "\n\ndef shout(p):\n    print(describe(|))\n",
        "p), end='!')\n    return p",
        "p), end='!')",
        "import math\nfrom dataclasses import dataclass",
    ),
    "javascript": Case(
        "sample.js",
        "\nfunction area(w, h) {|}\n",
        "\n  return w * h;\n}\n\nfunction volume(w, h, d) {\n  return w * h * d;\n}\n",
        "\n  return w * h;\n}",
        "\nfunction shout(p) {\n  console.log(describe(|));\n}\n",
        'p), "!");\n  return p;',
        'p), "!")',
        'import { hypot } from "./math.js";\nconst assert = require("assert");',
        indent="  ",
    ),
    "typescript": Case(
        "sample.ts",
        "\nexport function area(w: number, h: number): number {|}\n",
        "\n  return w * h;\n}\n\nexport function volume(): number {\n  return 0;\n}\n",
        "\n  return w * h;\n}",
        "\nfunction shout(p: Point): void {\n  console.log(describe(|));\n}\n",
        'p), "!");\n  return;',
        'p), "!")',
        'import { hypot } from "./math";',
        indent="  ",
    ),
    "go": Case(
        "sample.go",
        "\nfunc Area(w, h float64) float64 {|}\n",
        "\n\treturn w * h\n}\n\nfunc Volume() float64 {\n\treturn 0\n}\n",
        "\n\treturn w * h\n}",
        "\nfunc Shout(p Point) {\n\tfmt.Println(Describe(|))\n}\n",
        'p), "!")\n\treturn',
        'p), "!")',
        'package geometry\nimport (\n\t"fmt"\n\t"math"\n)',
        indent="\t",
    ),
    "rust": Case(
        "sample.rs",
        "\npub fn area(w: f64, h: f64) -> f64 {|}\n",
        "\n    w * h\n}\n\npub fn volume() -> f64 {\n    0.0\n}\n",
        "\n    w * h\n}",
        "\npub fn shout(p: Point) -> f64 {\n    f64::max(distance(|))\n}\n",  # not in a macro: anything parses there
        "p, p), 1.0)\n}",
        "p, p), 1.0)",
        "use std::fmt;",
    ),
    "lua": Case(
        "sample.lua",
        "function M.area(w, h)|\nend\n\n",
        "\n  return w * h\nend\n\nfunction M.volume(w, h, d)\n  return w * h * d\nend\n",
        "\n  return w * h",
        "function M.shout(p)\n  print(M.describe(|))\nend\n\n",
        'p), "!")\n  return p',
        'p), "!")',
        'local util = require("util")',
        indent="  ",
        anchor="return M",
    ),
    "c": Case(
        "sample.c",
        "\ndouble area(double w, double h) {|}\n",
        "\n    return w * h;\n}\n\nint volume(void) {\n    return 0;\n}\n",
        "\n    return w * h;\n}",
        '\nvoid shout(Point p) {\n    printf("%f\\n", distance(|));\n}\n',
        "p, p));\n    return;",
        "p, p))",
        "#include <math.h>\n#include <stdio.h>",
    ),
    "cpp": Case(
        "sample.cpp",
        "double area(double w, double h) {|}\n\n",
        "\n    return w * h;\n}\n\ndouble volume() {\n    return 0;\n}\n",
        "\n    return w * h;\n}",
        'void shout(const Point& p) {\n    std::printf("%f\\n", distance(|));\n}\n\n',
        "p, p));\n    return;",
        "p, p))",
        "#include <cmath>\n#include <string>\n#include <vector>",
        anchor="}  // namespace geometry",
    ),
    "java": Case(
        "Sample.java",
        "\n    static double area(double w, double h) {|}\n",
        "\n        return w * h;\n    }\n\n    static double volume() {\n        return 0;\n    }\n",
        "\n        return w * h;\n    }",
        "\n    static void shout(Point p) {\n        System.out.println(describe(|));\n    }\n",
        'p), "!");\n        return;',
        'p), "!")',
        "package geometry;\nimport java.util.List;",
        indent="        ",
        anchor="}\n",
    ),
}


def document(case: Case, snippet: str) -> tuple[str, int]:
    """The fixture with `snippet` inserted; returns (text, cursor offset)."""
    base = (FIXTURES / case.fixture).read_text(encoding="utf-8")
    at = base.rfind(case.anchor) if case.anchor else len(base)
    text = base[:at] + snippet + base[at:]
    cursor = text.index("|", at)
    return text[:cursor] + text[cursor + 1 :], cursor


def plan_for(language_id: str, text: str, cursor: int, **kwargs) -> CompletionPlan:
    tree = SyntaxTree(language_id, text)
    assert not tree.errors() or language_id == "python", "a block opened with its closer parses"
    return plan_completion(text, cursor, language_id, tree, max_context_chars=600, **kwargs)


@pytest.mark.parametrize("language_id", CASES)
def test_block_completion(language_id: str) -> None:
    case = CASES[language_id]
    assert language_for_path(case.fixture) == language_id
    text, cursor = document(case, case.block)
    plan = plan_for(language_id, text, cursor)
    assert plan.complete and plan.multiline, plan.reason
    assert text[plan.prefix_start : cursor] == plan.prefix and text[cursor : plan.suffix_end] == plan.suffix
    assert plan.prefix_start > 0 and text[plan.prefix_start - 1] == "\n", "the window starts at a line start"
    kinds = {s.kind: s.text for s in plan.context}
    assert kinds.get("imports") == case.imports, plan.context
    # the nearest definitions before the window (or the header of the one it is in), each as the fixture has it
    others = [s for s in plan.context if s.kind in ("sibling", "scope")]
    assert others, plan.context
    for snippet in others:
        at = text.find(snippet.text)
        assert 0 <= at < plan.prefix_start and text[:at].count("\n") == snippet.start_line, snippet
    assert [s.start_line for s in others] == sorted(s.start_line for s in others)
    if language_id in ("cpp", "java"):  # the window cut off the enclosing namespace / class: its header is kept
        assert kinds["scope"] in ("namespace geometry", "public class Sample")
    assert plan.context_budget > 0
    # stop rules: the stream is stopped once the block being written is over, not before
    assert not should_stop(case.shown[:-1], plan)
    assert should_stop(case.answer, plan)
    finished = finish_completion(text, cursor, language_id, case.answer, plan)
    assert finished is not None
    assert finished.insert_text == case.shown
    shown = text[:cursor] + finished.insert_text + text[finished.replace_end_offset :]
    assert not SyntaxTree(language_id, shown).has_errors, shown
    # the parse check: an answer that no cut can make parse is not shown
    assert finish_completion(text, cursor, language_id, f"\n{case.indent}= = = ;", plan) is None


@pytest.mark.parametrize("language_id", CASES)
def test_call_completion_replaces_auto_closed_brackets(language_id: str) -> None:
    case = CASES[language_id]
    text, cursor = document(case, case.call)
    plan = plan_for(language_id, text, cursor)
    assert plan.complete and not plan.multiline, plan.reason
    assert plan.stop.suffix_closers == 2 and plan.stop.stop == ("\n",)
    finished = finish_completion(text, cursor, language_id, case.call_answer, plan)
    assert finished is not None and finished.insert_text == case.call_shown
    assert text[cursor : finished.replace_end_offset] == "))"
    shown = text[:cursor] + finished.insert_text + text[finished.replace_end_offset :]
    assert not SyntaxTree(language_id, shown).has_errors, shown
    # truncation: junk after a good start is cut at the last point that parses
    junk = finish_completion(text, cursor, language_id, "p) + + *", plan)
    assert junk is not None and junk.insert_text in ("p)", "p"), junk
