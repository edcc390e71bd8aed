"""The repeated-substitution candidate: the user changed a fragment of one line, and the sibling lines that hold the
same fragment get the same change (`.iteritems()` -> `.items()`, `assertEquals(` -> `assertEqual(`, `np.float` ->
`np.float64` down a block of similar lines).

The fragment is the user's edit widened to whole words on both sides, so `iter` deleted from `.iteritems()` is
`iteritems` -> `items`; a sibling line is one of the block around the edited line (same indentation, no blank line
between, at most MAX_DISTANCE lines away) that holds the old fragment as whole words. The nearest sibling below is
proposed first, then above; after it is accepted the next request proposes the next one. Text only, so any language;
in a language whose variables are named (NAMED_VARIABLES) a fragment that is a bare variable name is left to the
rename candidate, which knows its scope. A word is letters, digits and `_`, and in JavaScript and TypeScript `$`
too (the unused parameter `$0` renamed `$0Obj` is a rename, not `0` -> `0Obj` on the lines around).

A misspelling fixed (one word of at least MISSPELT_LENGTH letters for a word at most two letters away:
`bookeeping` -> `bookkeeping`) is also proposed for the word's other occurrences anywhere in the file, after the
siblings, the nearest below first and then from the top, but only in text that is not a name in code (comments,
strings, documentation), and only when the fixed word is not one either: renaming a function or an attribute across a
file is the rename candidates' task, which know where the name is declared.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator

from waferline.server.features.next_edit.scopes import is_name
from waferline.server.features.next_edit.source import Edit, Source
from waferline.syntax.edit_history import EditEvent

NAMED_VARIABLES = ("python", "javascript", "javascriptreact", "typescript", "typescriptreact", "go")
MAX_DISTANCE = 30  # lines: a substitution further away is a different task
MISSPELT_LENGTH = 5  # letters a misspelt word has at least, for its fix to be proposed across the file
_ONE_WORD = re.compile(r"[^\W\d_]\w*")
_WORD = re.compile(r"\w")
_JS_WORD = re.compile(r"[\w$]")
DOLLAR_NAMES = ("javascript", "javascriptreact", "typescript", "typescriptreact")


def substitution(
    src: Source, start: int, end: int, event: EditEvent, word: re.Pattern[str] = _WORD
) -> tuple[str, str, int] | None:
    """(old fragment, new fragment, where the new one starts) of a one-line edit whose new text is `[start, end)`,
    widened to whole words (a word character: `word`)."""
    text = src.text
    if "\n" in event.old or "\n" in event.new or "\n" in text[start:end]:
        return None
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end
    a, b = start, end
    while a > line_start and word.match(text[a - 1]):
        a -= 1
    while b < line_end and word.match(text[b]):
        b += 1
    old = text[a:start] + event.old + text[end:b]
    new = text[a:b]
    if not old.strip() or old == new or old.strip() == new.strip():
        return None
    return old, new, a


def substitution_edits(src: Source, language_id: str, start: int, end: int, event: EditEvent) -> Iterator[Edit]:
    word = _JS_WORD if language_id in DOLLAR_NAMES else _WORD
    found = substitution(src, start, end, event, word)
    if found is None:
        return
    old, new, fragment_at = found
    line_start = src.text.rfind("\n", 0, fragment_at) + 1
    bare = re.fullmatch(r"(?:[^\W\d]|\$)[\w$]*" if word is _JS_WORD else r"[^\W\d]\w*", old) is not None
    if bare and language_id in NAMED_VARIABLES:
        node = src.node_at(fragment_at, fragment_at + len(new))  # the new word (an edit may be a deletion)
        if node is not None and (is_name(node) if language_id == "python" else node.type == "identifier"):
            return  # a variable: the rename candidate knows its scope
    dotted = bare and fragment_at > 0 and src.text[fragment_at - 1] == "."
    lines = src.text.split("\n")
    here = src.text.count("\n", 0, line_start)
    indent = _indent(lines[here])
    edge = r"\w$" if word is _JS_WORD else r"\w"
    pattern = re.compile(("" if not word.match(old[0]) else rf"(?<![{edge}])") + re.escape(old) +
                         ("" if not word.match(old[-1]) else rf"(?![{edge}])"))  # fmt: skip
    starts = [0]
    for ln in lines[:-1]:
        starts.append(starts[-1] + len(ln) + 1)
    siblings: set[int] = set()
    for direction in (1, -1):
        i = here + direction
        while 0 <= i < len(lines) and abs(i - here) <= MAX_DISTANCE:
            if not lines[i].strip() or _indent(lines[i]) != indent:
                break
            for m in pattern.finditer(lines[i]):
                if not bare or (m.start() > 0 and lines[i][m.start() - 1] == ".") == dotted:
                    siblings.add(i)
                    yield Edit(starts[i] + m.start(), starts[i] + m.end(), new)
                    break
            i += direction
    if misspelling(old, new) and not _in_code(src, fragment_at, fragment_at + len(new)):
        far = [m for m in pattern.finditer(src.text) if bisect.bisect_right(starts, m.start()) - 1 not in siblings]
        for m in [m for m in far if m.start() > fragment_at] + [m for m in far if m.start() < fragment_at]:
            if not _in_code(src, m.start(), m.end()):
                yield Edit(m.start(), m.end(), new)


def misspelling(old: str, new: str) -> bool:
    """Whether `old` -> `new` fixes a misspelt word: one word each, `old` at least MISSPELT_LENGTH long, at most two
    letters apart (an insertion, a deletion or a change each), not only in case."""
    if _ONE_WORD.fullmatch(old) is None or _ONE_WORD.fullmatch(new) is None or len(old) < MISSPELT_LENGTH:
        return False
    if old.lower() == new.lower() or abs(len(old) - len(new)) > 2:
        return False
    previous = list(range(len(new) + 1))
    for i, a in enumerate(old, 1):
        row = [i]
        for j, b in enumerate(new, 1):
            row.append(min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + (a != b)))
        previous = row
    return previous[-1] <= 2


def _in_code(src: Source, start: int, end: int) -> bool:
    """Whether `[start, end)` is a name in code (an identifier of any kind), not text in a comment or a string."""
    node = src.node_at(start, end)
    return node is not None and node.type.endswith("identifier")


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]
