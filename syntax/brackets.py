"""Brackets in a short piece of code, outside its strings and comments, without a parser.

The stop rules run on every streamed token of a completion, which is a fragment that does not parse on its own, so
they need a small lexer: quotes and comment markers per language, enough to tell a `)` that closes something from one
inside `")"` or `# )`. Documents themselves are read through their tree (see plan.py); this is for fragments and for
plain-text documents.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

from waferline.syntax.languages import line_comment

OPENERS = {"(": ")", "[": "]", "{": "}"}
CLOSERS = {")": "(", "]": "[", "}": "{"}


@dataclass(frozen=True)
class Lexis:
    """What a lexer needs to know to skip a language's strings and comments."""

    line_comment: tuple[str, ...] = ("//",)
    block_comment: tuple[str, str] | None = ("/*", "*/")
    quotes: str = "\"'"
    multiline_quotes: str = ""  # quotes whose strings may span lines (JavaScript template literals, Go raw strings)
    triple_quotes: bool = False  # Python's \"\"\" and '''


def _lexis(language_id: str, lexis: Lexis | None = None) -> Lexis:
    """A language's Lexis: its line comment marker from the language table (languages.py), the rest as given."""
    return replace(lexis or Lexis(), line_comment=(line_comment(language_id),))


_TEMPLATES = Lexis(quotes="\"'`", multiline_quotes="`")  # JavaScript's template literals, Go's raw strings
LEXIS: dict[str | None, Lexis] = {
    "python": _lexis("python", Lexis(block_comment=None, triple_quotes=True)),
    "javascript": _lexis("javascript", _TEMPLATES),
    "javascriptreact": _lexis("javascriptreact", _TEMPLATES),
    "typescript": _lexis("typescript", _TEMPLATES),
    "typescriptreact": _lexis("typescriptreact", _TEMPLATES),
    "go": _lexis("go", _TEMPLATES),
    "rust": _lexis("rust", Lexis(quotes='"')),  # ' also starts lifetimes ('a), which never close
    "lua": _lexis("lua", Lexis(block_comment=("--[[", "]]"))),
    "c": _lexis("c"),
    "cpp": _lexis("cpp"),
    "java": _lexis("java"),
    None: Lexis((), None, "\"'`", "`"),  # plain text: only quotes are a safe guess
}


def lexis_for(language_id: str | None) -> Lexis:
    return LEXIS.get(language_id, LEXIS[None])


def scan_brackets(text: str, language_id: str | None, start: int = 0) -> Iterator[tuple[int, str]]:
    """(index, bracket) for every bracket of `text` outside strings and comments, in order."""
    for i, token in _scan(text, language_id, start):
        if token in OPENERS or token in CLOSERS:
            yield i, token


def state_at_end(text: str, language_id: str | None) -> str | None:
    """ "string" or "comment" when `text` ends inside an unterminated one, else None (code)."""
    last = None
    for _, token in _scan(text, language_id, 0):
        last = token
    return last.removeprefix("open-") if last in ("open-string", "open-comment") else None


def _scan(text: str, language_id: str | None, start: int) -> Iterator[tuple[int, str]]:
    """Brackets, and a final "open-string" / "open-comment" token when the text ends inside one."""
    lx = lexis_for(language_id)
    i, n = start, len(text)
    while i < n:
        ch = text[i]
        if ch in OPENERS or ch in CLOSERS:
            yield i, ch
            i += 1
            continue
        if lx.block_comment is not None and text.startswith(lx.block_comment[0], i):
            end = text.find(lx.block_comment[1], i + len(lx.block_comment[0]))
            if end < 0:
                yield i, "open-comment"
                return
            i = end + len(lx.block_comment[1])
            continue
        if any(text.startswith(marker, i) for marker in lx.line_comment):
            end = text.find("\n", i)
            if end < 0:
                yield i, "open-comment"
                return
            i = end
            continue
        if ch in lx.quotes:
            i, closed = _string_end(text, i, lx)
            if not closed and i == n:
                yield i, "open-string"
                return
            continue
        i += 1


def _string_end(text: str, i: int, lx: Lexis) -> tuple[int, bool]:
    """(index just past the string that starts at i, whether it was closed); an unterminated string ends at the
    end of its line (or of the text)."""
    quote = text[i]
    if lx.triple_quotes and text.startswith(quote * 3, i):
        end = text.find(quote * 3, i + 3)
        return (len(text), False) if end < 0 else (end + 3, True)
    j = i + 1
    while j < len(text):
        c = text[j]
        if c == "\\":
            j += 2
            continue
        if c == quote:
            return j + 1, True
        if c == "\n" and quote not in lx.multiline_quotes:
            return j, False
        j += 1
    return min(j, len(text)), False


def open_brackets(text: str, language_id: str | None) -> str:
    """The brackets still open at the end of `text`, outermost first (a mismatched closer is ignored)."""
    stack: list[str] = []
    for _, ch in scan_brackets(text, language_id):
        if ch in OPENERS:
            stack.append(ch)
        elif stack and stack[-1] == CLOSERS[ch]:
            stack.pop()
    return "".join(stack)
