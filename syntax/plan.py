"""Completion planning: from a cursor and the document's tree, decide whether to complete, how much, what the model
sees, and where it must stop.

The prompt parts are chosen so that typing appends: the prefix window starts at a line boundary that only moves
every `budget / 8` typed characters, the suffix is a function of the text after the cursor (which typing does not
change), and the context snippets depend on the document outside the window. A keystroke therefore changes only the
end of the prefix, and the engine's KV cache keeps everything before it.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field

from tree_sitter import Node, QueryCursor

from waferline.syntax.brackets import CLOSERS, OPENERS, open_brackets, state_at_end
from waferline.syntax.context import Snippet, select_context
from waferline.syntax.languages import CONTEXT, load_query
from waferline.syntax.open_at_cursor import distrust_error_line, errors_on_line, tree_brackets
from waferline.syntax.text import utf8_len
from waferline.syntax.tree import SyntaxTree, TreeSnapshot, collect_errors

log = logging.getLogger(__name__)

DEFAULT_CONTEXT_CHARS = 6000  # ~1,500 tokens of code
DEFAULT_MAX_LINES = 16
_EOL = re.compile(r"\r\n|\r|\n")
LITERAL_CAPTURES = ("comment", "string", "code")  # what literal_at reads of the context query
# A Python line that opens a block when it ends with ":" (a dict entry `"a":` does not).
_PY_HEADER = re.compile(r"^\s*(async\s+)?(def|class|if|elif|else|for|while|try|except|finally|with|match|case)\b")
_LUA_OPENER = re.compile(r"(\bthen|\bdo|\belse|\brepeat|\bfunction\b.*\))$")


@dataclass(frozen=True)
class StopRules:
    """Where a completion must end; `postprocess.should_stop` applies them to a streamed partial completion."""

    stop: tuple[str, ...] = ("\n",)  # cut before the first of these
    max_lines: int = 1
    parent_indent: int | None = None  # a later non-blank line indented this much or less ends the completion
    open_brackets: str = ""  # brackets open at the cursor, outermost first
    closed_in_suffix: tuple[bool, ...] = ()  # per open bracket: does the text after the cursor close it?
    suffix_closers: int = 0  # innermost open brackets whose closer follows the cursor on its line (auto-closed)
    block_end: bool = False  # multi-line: end at the line where the completion closes a bracket open at the cursor
    language_id: str | None = None  # for the fragment lexer (strings and comments)


@dataclass
class CompletionPlan:
    """Everything the server needs to build an edit request for one cursor, and to finish its answer."""

    complete: bool
    reason: str  # why (or why not): "ok", "explicit", "inside a comment", "cursor before an identifier character"...
    multiline: bool
    prefix: str  # document[prefix_start:offset]
    suffix: str  # document[offset:suffix_end]
    context: list[Snippet]  # stable document context; the server appends cross-file snippets within context_budget
    stop: StopRules
    offset: int
    language_id: str | None
    prefix_start: int
    suffix_end: int
    context_budget: int  # characters of max_context_chars left for the server's snippets
    snapshot: TreeSnapshot | None = field(default=None, repr=False)  # the tree the plan read, for finish_completion


def plan_completion(
    text: str,
    offset: int,
    language_id: str | None,
    tree: SyntaxTree | None,
    *,
    explicit: bool = False,
    in_strings: bool = False,
    max_context_chars: int = DEFAULT_CONTEXT_CHARS,
    max_lines: int = DEFAULT_MAX_LINES,
    steady_window: bool = False,
) -> CompletionPlan:
    """Plan the completion at `offset` (a `str` offset) of `text`. `tree` None or plain text: text rules only.

    `in_strings`: complete inside a string literal as the user types (inside a comment only when `explicit`).

    `steady_window`: move the prefix window's start every half budget of typed characters instead of every eighth
    (a shorter prefix on average, but a prompt that holds four times longer): for a server answering many documents
    typed in at once, where each gets a model answer only every few dozen characters."""
    if not 0 <= offset <= len(text):
        raise ValueError(f"offset {offset} outside the document (length {len(text)})")
    line_start, line_end = line_bounds(text, offset)
    before, after = text[line_start:offset], text[offset:line_end]
    snap = tree.snapshot() if tree is not None and tree.language_id == language_id else None
    if snap is not None and len(snap.source) != utf8_len(text):
        log.warning("syntax tree out of date with the text: planning as plain text")
        snap = None
    root = snap.tree.root_node if snap is not None else None
    cursor_byte = utf8_len(text[:offset]) if root is not None else 0

    complete, reason = _should_complete(
        text, offset, before, after, root, cursor_byte, language_id, snap, explicit, in_strings
    )
    multiline, parent_indent = _shape(before, after, language_id)
    if root is not None and snap is not None:
        opened, closers = tree_brackets(root, cursor_byte)
        opened, closed = distrust_error_line(opened, closers, root, snap, cursor_byte, text, offset, line_start)
    else:
        opened = open_brackets(text[max(line_start - 2000, 0) : offset], language_id)
        closed = tuple(False for _ in opened)
    stop = StopRules(
        stop=("\n\n\n",) if multiline else ("\n",),
        max_lines=max_lines if multiline else 1,
        parent_indent=parent_indent if multiline else None,
        open_brackets=opened,
        closed_in_suffix=closed,
        suffix_closers=_immediate_closers(after, opened),
        block_end=multiline,
        language_id=language_id,
    )
    # shares of the budget: prefix 50%, suffix 15%, this document's context 15%, the rest (20% or more, whatever
    # the window leaves) for the server's snippets from other documents
    prefix_budget, suffix_budget = max_context_chars // 2, max_context_chars * 15 // 100
    q = _quantum(prefix_budget, steady_window)
    prefix_start = _prefix_start(text, offset, prefix_budget, q)
    suffix_end = _suffix_end(text, offset, line_end, suffix_budget)
    context: list[Snippet] = []
    room = max_context_chars * 15 // 100  # a fixed share: the context must not change while the prefix grows
    if root is not None and snap is not None:
        context = select_context(text, snap, root, offset, cursor_byte, prefix_start, suffix_end, room)
    # What the window leaves for the server's snippets from other files. The prefix counts as its whole budget once
    # the window has started moving (near the start of a file: its length rounded up to the window's quantum), not
    # as what this keystroke's prefix holds: that grows with every typed character, and a room that shrank with it
    # would drop a snippet at the start of the prompt every few keys (a full prefill each time).
    prefix_share = prefix_budget if prefix_start > 0 else min(-(-offset // q) * q, prefix_budget)
    used = prefix_share + (suffix_end - offset) + sum(len(s.text) for s in context)
    return CompletionPlan(
        complete=complete,
        reason=reason,
        multiline=multiline,
        prefix=text[prefix_start:offset],
        suffix=text[offset:suffix_end],
        context=context,
        stop=stop,
        offset=offset,
        language_id=language_id,
        prefix_start=prefix_start,
        suffix_end=suffix_end,
        context_budget=max(max_context_chars - used, 0),
        snapshot=snap,
    )


def line_bounds(text: str, offset: int) -> tuple[int, int]:
    """[start, end) of the line around `offset`, without its line break."""
    start = max(text.rfind("\n", 0, offset), text.rfind("\r", 0, offset)) + 1
    m = _EOL.search(text, offset)
    return start, m.start() if m else len(text)


def is_word_char(ch: str) -> bool:
    return ch.isalnum() or ch in "_$"


def indentation(line: str) -> int:
    """Columns of leading whitespace (a tab counts as one: only comparisons within one file matter)."""
    return len(line) - len(line.lstrip(" \t"))


# -- whether ----------------------------------------------------------------------------------------------------------


def _should_complete(
    text: str,
    offset: int,
    before: str,
    after: str,
    root: Node | None,
    cursor_byte: int,
    language_id: str | None,
    snap: TreeSnapshot | None,
    explicit: bool,
    in_strings: bool = False,
) -> tuple[bool, str]:
    if "\0" in text[max(offset - 4096, 0) : offset + 4096]:
        return False, "binary content"
    if root is not None and snap is not None and language_id is not None:
        literal = literal_at(root, cursor_byte, language_id, snap.source)
        if literal is None and root.has_error:  # an unterminated string parses as an ERROR: read the line instead
            line_byte = cursor_byte - utf8_len(before)
            errors = collect_errors(root, snap.source, 64)
            if errors_on_line(errors, line_byte, cursor_byte):
                literal = state_at_end(before, language_id)
        if (literal == "comment" or (literal == "string" and not in_strings)) and not explicit:
            return False, f"inside a {literal}"
    if after and is_word_char(after[0]):
        return False, "cursor before an identifier character"
    return True, "explicit" if explicit else "ok"


def literal_at(root: Node, cursor_byte: int, language_id: str, source: bytes) -> str | None:
    """ "comment" or "string" when the cursor is inside one (code nested in a string, like an f-string's `{x}`,
    is code again), else None."""
    query = load_query(language_id, CONTEXT, LITERAL_CAPTURES)
    if query is None:
        return None
    cursor = QueryCursor(query)
    cursor.set_byte_range(max(cursor_byte - 1, 0), cursor_byte + 1)
    best: tuple[int, str] | None = None
    for name, nodes in cursor.captures(root).items():
        for node in nodes:
            if _literal_contains(node, cursor_byte, name, source):
                size = node.end_byte - node.start_byte
                if best is None or size < best[0]:
                    best = (size, name)
    return best[1] if best is not None else None


def _literal_contains(node: Node, b: int, name: str, source: bytes) -> bool:
    start, end = node.start_byte, node.end_byte
    if not start < b <= end:
        return False
    if b < end:
        return True
    tail = source[max(end - 2, start) : end]
    if name == "comment":  # at the end of a line comment is still inside it; after `*/` or `]]` is not
        return not (tail.endswith((b"*/", b"]]", b"\n")) and end - start >= 2)
    if name == "string":  # at the end of an unterminated string is inside it
        last = node.child(node.child_count - 1) if node.child_count else None
        return node.has_error or (last is not None and last.is_missing)
    return False


# -- how much ---------------------------------------------------------------------------------------------------------


def _shape(before: str, after: str, language_id: str | None) -> tuple[bool, int | None]:
    """(multiline, parent indentation): multi-line after a block opener or on a blank line; the parent indentation
    is where a line of the completion ends the block being written."""
    rest = after.strip()
    if before.strip() == "" and rest == "":
        indent = indentation(before)
        return True, indent - 1 if indent > 0 else None
    if rest and not all(ch in CLOSERS or ch in ";," for ch in rest):
        return False, None
    head = before.rstrip()
    if language_id == "python":
        opener = head.endswith(":") and _PY_HEADER.match(head) is not None
    elif language_id == "lua":
        opener = _LUA_OPENER.search(head) is not None or head.endswith("{")
    else:
        opener = head.endswith("{")
    return (True, indentation(before)) if opener else (False, None)


def _immediate_closers(after: str, opened: str) -> int:
    """How many of the innermost open brackets the editor already closed right after the cursor (`foo(|)`)."""
    count = 0
    rest = after.lstrip(" \t")
    for opener in reversed(opened):
        if not rest.startswith(OPENERS[opener]):
            break
        count += 1
        rest = rest[1:].lstrip(" \t")
    return count


# -- what the model sees ----------------------------------------------------------------------------------------------


def _prefix_start(text: str, offset: int, budget: int, quantum: int) -> int:
    """A line start at most `budget` characters before the cursor, which moves only every `quantum` typed characters
    (so the cached prompt stays valid while the user types): the prefix is between `budget - quantum` and `budget`.
    Each move makes the next request prefill the whole prefix again, and so does the repository context chosen for
    the window (server/features/context_memo.py keeps it until the window moves)."""
    if offset <= budget:
        return 0
    threshold = -(-(offset - budget) // quantum) * quantum  # round up to a multiple of the quantum
    start = next_line_start(text, threshold)
    return start if start <= offset else threshold


def _quantum(budget: int, steady: bool = False) -> int:
    """How many typed characters the prefix window's start stays put for: an eighth of the budget for one typist
    (a long prefix), half of it under load (a prompt that holds: with 50 documents typed in at once, each answered
    every ~75 characters, an eighth made every other answer a full prefill; docs/benchmarks-load.md)."""
    return max(budget // 2 if steady else budget // 8, 64)


def next_line_start(text: str, pos: int) -> int:
    """The first line start at or after pos."""
    if pos == 0 or text[pos - 1] == "\n" or (text[pos - 1] == "\r" and text[pos : pos + 1] != "\n"):
        return pos
    m = _EOL.search(text, pos)
    return m.end() if m else len(text)


def _suffix_end(text: str, offset: int, line_end: int, budget: int) -> int:
    """The last line end within `budget` characters after the cursor (at least the cursor's own line)."""
    limit = offset + budget
    if limit >= len(text):
        return len(text)
    cut = max(text.rfind("\n", offset, limit), text.rfind("\r", offset, limit))
    return max(cut, line_end)
