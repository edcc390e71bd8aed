"""The user's edit repeated elsewhere in the file, beyond the sibling lines (features/next_edit/substitution.py),
where what it changed is distinctive enough that the same change is all but certain to be meant there too.

Three shapes, each text-exact (the same text, the same change) and each gated; the gates were chosen on the commit
cases of the `choose` part only (docs/next-edit.md, "Repeated edits"):

- **Lines** (`line_edits`): the user changed or deleted whole lines (`.. versionchanged:: 20.2.0 See toplevel note`
  in one docstring, an `assertEqual(...)` line deleted from one test); where the very same lines (the same
  indentation) stand elsewhere, the same change. Only when the lines are distinctive (at least DISTINCT_LENGTH
  characters besides indentation) and either prose (every line inside one string or comment: a docstring's) or
  deleted from code in another function than the one the other occurrence is in (a line deleted from one of two
  places of the same list or function is a duplicate removed, not a change to repeat; a line of code changed
  elsewhere is most often changed differently).
- **Unbound name** (`unbound_name_edits`, Python): the user replaced a name that the file no longer binds anywhere
  (no definition, assignment, parameter or import of it, no `import *`, not a builtin): its other uses would fail,
  so each is replaced the same way (the definition of `_is_attrs_class` deleted, a use changed to `has`).
- **Dotted chain** (`dotted_edits`): the user changed the attribute at the end of a chain of at least two dots
  (`e.value.message` -> `e.value.args[0]`); the same whole chain elsewhere gets the same change (a bare
  `self.value` is left alone: which attribute a method reads changes often, one place at a time).

The nearest occurrence below the edit is proposed first, then from the top; after one is accepted the next
request proposes the next.
"""

from __future__ import annotations

import builtins
import re
from collections.abc import Iterator

from waferline.server.features.next_edit.scopes import is_binding, is_name
from waferline.server.features.next_edit.source import FUNCTION_TYPES, Edit, Source, walk
from waferline.server.features.next_edit.substitution import substitution
from waferline.syntax.edit_history import EditEvent

DISTINCT_LENGTH = 30  # characters (indentation aside) of the lines, for their change to be repeated elsewhere
CHAIN_DOTS = 2  # dots a chain has at least before the changed attribute (`e.value.` in `e.value.message`)
PROSE_TYPES = ("string", "comment", "concatenated_string")
_NAME = re.compile(r"[^\W\d]\w*")
_BUILTINS = frozenset(dir(builtins))


def edited_lines(text: str, start: int, end: int, event: EditEvent) -> tuple[list[str], list[str], int] | None:
    """(the lines before the event, the same lines after it, where they start now) for the whole lines an event
    changed (its new text is `[start, end)` of `text`), less the lines that stayed the same at either end; None
    for an insertion of lines or a change of whitespace only."""
    first = text.rfind("\n", 0, start) + 1
    last = text.find("\n", end)
    last = len(text) if last < 0 else last
    before = (text[first:start] + event.old + text[end:last]).split("\n")
    after = text[first:last].split("\n")
    at = first
    while before and after and before[0] == after[0]:
        at += len(after[0]) + 1
        before, after = before[1:], after[1:]
    while before and after and before[-1] == after[-1]:
        before, after = before[:-1], after[:-1]
    if not before or "".join("".join(before).split()) == "".join("".join(after).split()):
        return None
    return before, after, min(at, len(text))


def line_edits(src: Source, start: int, end: int, event: EditEvent) -> Iterator[Edit]:
    found = edited_lines(src.text, start, end, event)
    if found is None:
        return
    old, new, at = found
    if len("".join(line.strip() for line in old)) < DISTINCT_LENGTH:
        return
    text, block = src.text, "\n".join(old)
    here = _function(src, at)
    for i in _ordered(_whole_lines(text, block), at):
        if _prose(src, i, old):
            pass
        elif new or _function(src, i) == here:
            continue  # code: only a deletion, and not from the same function (a duplicate removed)
        yield Edit(i, i + len(block), "\n".join(new)) if new else Edit(i, min(len(text), i + len(block) + 1), "")


def word_edits(src: Source, language_id: str, start: int, end: int, event: EditEvent) -> Iterator[Edit]:
    """The unbound name's (Python only) and the dotted chain's edits, from the user's one substitution."""
    found = substitution(src, start, end, event)
    if found is None:
        return
    if language_id == "python":
        yield from unbound_name_edits(src, found)
    yield from dotted_edits(src, found)


def unbound_name_edits(src: Source, found: tuple[str, str, int]) -> Iterator[Edit]:
    old, new, at = found
    if _NAME.fullmatch(old) is None or old in _BUILTINS or "import *" in src.text:
        return
    node = src.node_at(at, at + len(new))
    if node is None or not is_name(node):
        return
    uses = []
    for n in walk(src.root):
        if n.type == "identifier" and src.node_text(n) == old:
            if is_binding(n):
                return  # the file still binds the name: its uses may well be right
            if is_name(n):
                uses.append(src.offset(n.start_byte))
    for i in _ordered(uses, at):
        yield Edit(i, i + len(old), new)


def dotted_edits(src: Source, found: tuple[str, str, int]) -> Iterator[Edit]:
    old, new, at = found
    if _NAME.fullmatch(old) is None:
        return
    text = src.text
    a = at
    while a > 0 and (text[a - 1] == "." or text[a - 1].isalnum() or text[a - 1] == "_"):
        a -= 1
    chain = text[a:at]
    if not chain.endswith(".") or chain.count(".") < CHAIN_DOTS or ".." in chain or not _NAME.match(chain):
        return
    pattern = re.compile(r"(?<![\w.])" + re.escape(chain + old) + r"(?!\w)")
    for i in _ordered([m.start() for m in pattern.finditer(text) if m.start() != a], a):
        yield Edit(i, i + len(chain) + len(old), chain + new)


def _whole_lines(text: str, block: str) -> list[int]:
    """Where `block` stands as whole lines of `text`."""
    out = []
    i = text.find(block)
    while i >= 0:
        after = i + len(block)
        if (i == 0 or text[i - 1] == "\n") and (after == len(text) or text[after] == "\n"):
            out.append(i)
        i = text.find(block, i + 1)
    return out


def _ordered(starts: list[int], at: int) -> list[int]:
    """The nearest below `at` first, then from the top."""
    starts = sorted(starts)
    return [i for i in starts if i > at] + [i for i in starts if i < at]


def _function(src: Source, at: int) -> int | None:
    """The start of the function `at` lies in (None: module level)."""
    node = src.node_at(at, at)
    while node is not None and node.type not in FUNCTION_TYPES:
        node = node.parent
    return None if node is None else node.start_byte


def _prose(src: Source, at: int, lines: list[str]) -> bool:
    """Whether each of `lines` (at `at`) lies inside one string or comment, its quotes not on it: text, not code."""
    pos = at
    for line in lines:
        a, b = pos + len(line) - len(line.lstrip()), pos + len(line.rstrip())
        pos += len(line) + 1
        if a >= b:
            continue
        node = src.node_at(a, b)
        while node is not None and node.type not in PROSE_TYPES:
            node = node.parent
        if node is None:
            return False
        s, e = src.span(node)
        if node.type != "comment" and not (s < a and b < e):
            return False
    return True
