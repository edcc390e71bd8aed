"""plan_completion and finish_completion: when to complete, how much, the prompt window, stop rules, plain text."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from waferline.syntax.plan import CompletionPlan, plan_completion
from waferline.syntax.postprocess import enforce_stop_rules, finish_completion, should_stop
from waferline.syntax.text import DocumentText
from waferline.syntax.tree import SyntaxTree, collect_errors

SAMPLE = (Path(__file__).parents[1] / "server" / "fixtures" / "sample.py").read_text(encoding="utf-8")


def plan_at(marked: str, language_id: str | None = "python", **kwargs) -> tuple[str, int, CompletionPlan]:
    """Plan at the `|` of `marked`; returns (text, cursor, plan)."""
    cursor = marked.index("|")
    text = marked[:cursor] + marked[cursor + 1 :]
    return text, cursor, plan_completion(text, cursor, language_id, SyntaxTree(language_id, text), **kwargs)


@pytest.mark.parametrize(
    ("language_id", "marked", "reason"),
    [
        ("python", "x = 1  # a comm|ent\n", "inside a comment"),
        ("python", "x = 1  # at the end of a comment|\ny = 2\n", "inside a comment"),
        ("python", 'def f():\n    """Docs |here."""\n', "inside a string"),
        ("python", "x = 'unterminated|\n", "inside a string"),
        ("python", "x = fo|o(1)\n", "cursor before an identifier character"),
        ("javascript", "const s = `a ${b} |`;\n", "inside a string"),
        ("c", "int x; /* block | */\n", "inside a comment"),
        ("rust", "// doc|\nfn main() {}\n", "inside a comment"),
        ("lua", 'local s = "x|"\n', "inside a string"),
        (None, "plain wor|d\n", "cursor before an identifier character"),
        ("python", "data = b'\\x00|'\x00\n", "binary content"),
    ],
)
def test_where_not_to_complete(language_id: str | None, marked: str, reason: str) -> None:
    _, _, plan = plan_at(marked, language_id)
    assert not plan.complete and plan.reason == reason


@pytest.mark.parametrize(
    ("language_id", "marked"),
    [
        ("python", "x = f'{a + |}'\n"),  # code inside an f-string
        ("javascript", "const s = `a ${|}`;\n"),  # code inside a template literal
        ("c", "int x; /* done */ |\n"),  # after a block comment
        ("python", "x = 'done' + |\n"),  # after a string
    ],
)
def test_code_next_to_literals_completes(language_id: str, marked: str) -> None:
    assert plan_at(marked, language_id)[2].complete


@pytest.mark.parametrize(
    ("language_id", "marked"),
    [
        ("python", "x = 'unterminated|\n"),
        ("python", 'd["ke|\n'),
        ("javascript", "const s = `a ${b} |`;\n"),
        ("lua", 'local s = "x|"\n'),
    ],
)
def test_in_strings_completes_inside_a_string_but_not_a_comment(language_id: str, marked: str) -> None:
    plan = plan_at(marked, language_id, in_strings=True)[2]
    assert plan.complete and plan.reason == "ok"
    comment = plan_at("x = 1  # a comm|\n", "python", in_strings=True)[2]
    assert not comment.complete and comment.reason == "inside a comment"


def test_explicit_request_completes_inside_a_comment() -> None:
    plan = plan_at("# TODO: |\n", explicit=True)[2]
    assert plan.complete and plan.reason == "explicit"


@pytest.mark.parametrize(
    ("language_id", "marked", "multiline"),
    [
        ("python", "def f(x):|\n", True),
        ("python", "def f(x):\n    y = 1\n    |\n", True),  # a blank line inside a body
        ("python", "d = {'a':|\n", False),  # a dict entry is not a block header
        ("python", "x = foo(|)\n", False),
        ("go", "func f() {|}\n", True),
        ("lua", "if x then|\nend\n", True),
        ("lua", "local t = f(|)\n", False),
        (None, "anything {|}\n", True),
    ],
)
def test_single_or_multi_line(language_id: str | None, marked: str, multiline: bool) -> None:
    plan = plan_at(marked, language_id)[2]
    assert plan.multiline == multiline
    assert plan.stop.stop == (("\n\n\n",) if multiline else ("\n",))


def test_prefix_window_is_stable_while_typing() -> None:
    """Typing appends to the prefix and leaves the suffix and the context alone, so the engine's KV cache holds."""
    text = SAMPLE * 8
    doc = DocumentText(text, language_id="python")
    tree = SyntaxTree.for_document(doc)
    line = doc.line_count // 2
    while doc.line_text(line).strip():
        line += 1
    plans = []
    for ch in "value = distance(a, b)":
        offset = doc.offset_at(line, 10**6)
        tree.apply(doc.apply_change((doc.position_at(offset), doc.position_at(offset)), ch))
        plans.append(plan_completion(doc.text, offset + 1, "python", tree, max_context_chars=2000))
    starts = {p.prefix_start for p in plans}
    assert len(starts) <= 2, "the window start moves at most once over 22 keystrokes"
    for before, after in itertools.pairwise(plans):
        if before.prefix_start == after.prefix_start:
            assert after.prefix.startswith(before.prefix) and after.context == before.context
        assert after.suffix == before.suffix
    assert all(len(p.prefix) + len(p.suffix) <= 2000 for p in plans)


@pytest.mark.parametrize("steady", [False, True])
def test_window_and_its_room_for_snippets_hold_while_typing(steady: bool) -> None:
    """The window's start moves only every eighth of the prefix budget of typed characters (half of it with
    `steady_window`, under load), and the room left for snippets from other files does not shrink with each key (a
    snippet dropped at the prompt's start is a full prefill): it changes only when the window moves."""
    text = SAMPLE * 8
    doc = DocumentText(text, language_id="python")
    tree = SyntaxTree.for_document(doc)
    offset = len(doc.text)
    plans = []
    for ch in ("x = compute(a, b)\n" * 60)[:600]:  # typing at the end of a long file, 600 characters
        tree.apply(doc.apply_change((doc.position_at(offset), doc.position_at(offset)), ch))
        offset += 1
        plans.append(plan_completion(doc.text, offset, "python", tree, max_context_chars=2000, steady_window=steady))
    starts = [p.prefix_start for p in plans]
    moves = sum(1 for a, b in itertools.pairwise(starts) if a != b)
    quantum = 500 if steady else 125  # of a prefix budget of 1,000 characters
    assert 600 // quantum - 1 <= moves <= 600 // quantum + 1
    low = 1000 - quantum - max(map(len, SAMPLE.splitlines())) - 1  # less a line at most: the window starts a line
    assert all(low <= len(p.prefix) <= 1000 for p in plans[1:])
    rooms = {(p.prefix_start, p.context_budget) for p in plans}
    assert len(rooms) == len(set(starts)), "the room for snippets changes only when the window moves"
    assert min(p.context_budget for p in plans) >= 2000 * 20 // 100 - 1, "at least the fifth the shares leave"


def test_stop_rules_on_a_stream() -> None:
    text, cursor, plan = plan_at("def f(x):|\n\nprint(f(1))\n", max_lines=3)
    assert plan.stop.parent_indent == 0 and plan.stop.max_lines == 3
    stream = "\n    y = x + 1\n    return y\nprint"
    stops = [i for i in range(len(stream) + 1) if should_stop(stream[:i], plan)]
    assert stops[0] == len("\n    y = x + 1\n    return y\np"), "stops once a line starts back at the parent level"
    body = "\n    a = 1\n    b = 2\n    c = 3"
    assert enforce_stop_rules(body + "\n    d = 4", plan) == body
    finished = finish_completion(text, cursor, "python", stream, plan)
    assert finished is not None and finished.insert_text == "\n    y = x + 1\n    return y"
    single = plan_at("x = |\n")[2]
    assert not should_stop("foo(1, ", single) and should_stop("foo(1)\n", single)
    assert should_stop("a]", single), "a bracket closing what nothing opened"


def test_repeats_of_the_suffix_are_dropped() -> None:
    text, cursor, plan = plan_at("def f(x):\n    |\n    return y\n")
    assert finish_completion(text, cursor, "python", "return y", plan) is None
    kept = finish_completion(text, cursor, "python", "y = x * 2\n    return y", plan)
    assert kept is not None and kept.insert_text == "y = x * 2"
    text, cursor, plan = plan_at("print(|)\n")
    assert finish_completion(text, cursor, "python", ")", plan) is None


def test_unknown_language_completes_as_plain_text() -> None:
    text, cursor, plan = plan_at("call(a, |)\nnext line\n", "cobol")
    assert plan.complete and plan.snapshot is None and plan.context == []
    assert plan.stop.open_brackets == "(" and plan.stop.suffix_closers == 1
    finished = finish_completion(text, cursor, "cobol", "b)\nmore", plan)
    assert finished is not None and (finished.insert_text, finished.replace_end_offset) == ("b)", cursor + 1)
    assert finish_completion(text, cursor, "cobol", "\nnext line", plan) is None


def test_stale_tree_is_not_trusted() -> None:
    tree = SyntaxTree("python", "x = 1\n")
    plan = plan_completion("x = 12345\n", 9, "python", tree)
    assert plan.snapshot is None and plan.complete
    finished = finish_completion("x = 12345\n", 9, "python", " + 1", plan)  # parses the text afresh instead
    assert finished is not None and finished.insert_text == " + 1"


def test_completing_at_the_very_end_of_the_document() -> None:
    # a regression: looking for a child after the last byte once crashed the interpreter (SIGSEGV in tree-sitter)
    plan = plan_completion(SAMPLE, len(SAMPLE), "python", SyntaxTree("python", SAMPLE))
    finished = finish_completion(SAMPLE, len(SAMPLE), "python", "\n\ndef area(w, h):\n    return w * h", plan)
    assert finished is not None and finished.insert_text.endswith("return w * h")


FIXTURES = {
    "python": SAMPLE,
    "javascript": (Path(__file__).parents[1] / "server" / "fixtures" / "sample.js").read_text("utf-8"),
}
fragments = st.sampled_from(
    ["x", " ", "\n", "    ", "(", ")", "[", "]", "{", "}", ":", ";", "return ", "'", ",", "=", "1"]
)


@pytest.mark.parametrize("language_id", FIXTURES)
@settings(max_examples=100, deadline=None)
@given(at=st.integers(0, 10**6), completion=st.lists(fragments, max_size=12).map("".join))
def test_a_shown_completion_never_adds_a_syntax_error(language_id: str, at: int, completion: str) -> None:
    """Whatever the model writes, what is shown leaves no syntax error the document did not have (checked with a
    fresh parse of the whole document, independent of the check's own shortcuts)."""
    text = FIXTURES[language_id]
    cursor = at % (len(text) + 1)
    plan = plan_completion(text, cursor, language_id, SyntaxTree(language_id, text))
    if not plan.complete:  # the server does not ask the model then
        return
    finished = finish_completion(text, cursor, language_id, completion, plan)
    if finished is None:
        return
    shown = text[:cursor] + finished.insert_text + text[finished.replace_end_offset :]
    tree = SyntaxTree(language_id, shown).tree
    assert tree is not None
    errors = collect_errors(tree.root_node, shown.encode())
    assert not errors, (completion, finished, errors)
