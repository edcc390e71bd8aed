"""The last check before a code action's edit goes out: the document with the edit applied may not gain a syntax
error. Errors are compared by place: none may touch the new text, and the rest of the document may not have more
than it had outside the replaced span. The whole document is parsed (on a helper thread), not a region: an edit
that closes a bracket or a block can change how everything after it parses.
"""

from __future__ import annotations

from waferline.server.syntax.languages import parser_for
from waferline.server.syntax.tree import SyntaxError_, collect_errors
from waferline.server.text import utf8_len


def _touches(e: SyntaxError_, lo: int, hi: int) -> bool:
    if e.start_byte == e.end_byte:  # a zero-width MISSING token
        return lo <= e.start_byte <= hi
    return e.start_byte < hi and e.end_byte > lo


def _errors(language_id: str, source: bytes) -> list[SyntaxError_]:
    parser = parser_for(language_id)
    assert parser is not None, f"no parser for {language_id}"
    return collect_errors(parser.parse(source).root_node, source)


def new_syntax_error(language_id: str, text: str, start: int, end: int, new_text: str) -> str | None:
    """Why replacing text[start:end] with `new_text` is refused (the line of the syntax error it would leave), or
    None when the result has no syntax error the document did not already have elsewhere."""
    old_source = text.encode("utf-8", "surrogatepass")
    new_source = (text[:start] + new_text + text[end:]).encode("utf-8", "surrogatepass")
    lo = utf8_len(text[:start])
    old_hi, new_hi = lo + utf8_len(text[start:end]), lo + utf8_len(new_text)
    after = _errors(language_id, new_source)
    inside = [e for e in after if _touches(e, lo, new_hi)]
    if inside:
        line = new_source.count(b"\n", 0, inside[0].start_byte) + 1
        return f"the result would leave a syntax error at line {line}"
    before_outside = sum(1 for e in _errors(language_id, old_source) if not _touches(e, lo, old_hi))
    if len(after) > before_outside:
        first = after[0]
        line = new_source.count(b"\n", 0, first.start_byte) + 1
        return f"the result would add a syntax error at line {line}"
    return None
