"""Reading what a client sent: the one layer that turns request params into documents, offsets and ranges.

Typed params (hover, completion, code actions...) are read by pygls with `converter()`, lsprotocol's converter
made strict about integers: an LSP `integer` or `uinteger` is a JSON integer, so `1.5`, `"3"` or `true` where a
line, character or version belongs make the message unreadable (InvalidParams) instead of being truncated. Params
that LSP leaves free (custom requests, `data` of a code action, command arguments) are read with `field` and
`position`. Every problem becomes `JsonRpcInvalidParams` with a message for the client, never an internal error:
a position must be two unsigned integers, its line must be in the document (or be the line just past the last,
at character 0: the document's end), and a character past the end of its line means the end of the line.
"""

from __future__ import annotations

from typing import Any

import cattrs
from lsprotocol import converters, types
from pygls.exceptions import JsonRpcInvalidParams

from waferline.server.document import Document
from waferline.syntax.text import PositionError

UINTEGER_MAX = 2**31 - 1  # LSP's uinteger


def _strict_int(value: Any, _type: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected an integer, got {value!r}")
    return value


def converter() -> cattrs.Converter:
    """lsprotocol's converter, with integers that must be integers (pygls' `converter_factory`)."""
    c = converters.get_converter()
    c.register_structure_hook(int, _strict_int)
    c.register_structure_hook(bool, lambda value, _type: bool(value))  # as before: `bool` would follow `int`
    return c


def field(params: Any, name: str) -> Any:
    """A field of free-form params: pygls hands them over as a dict, or as a namedtuple-like Object."""
    if isinstance(params, dict):
        return params.get(name)
    return getattr(params, name, None) if params is not None and not isinstance(params, (str, list)) else None


def uinteger(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= UINTEGER_MAX:
        raise JsonRpcInvalidParams(f"{what} must be an unsigned integer, got {value!r}")
    return value


def position(value: Any, what: str = "a position") -> types.Position:
    """An LSP Position from free-form JSON; InvalidParams unless line and character are unsigned integers."""
    return types.Position(
        line=uinteger(field(value, "line"), f"{what}'s line"),
        character=uinteger(field(value, "character"), f"{what}'s character"),
    )


def offset(doc: Document, pos: types.Position) -> int:
    """The `str` offset of a position in the document; InvalidParams when the document cannot contain it."""
    try:
        return doc.text.offset_at(pos.line, pos.character)
    except PositionError as e:
        raise JsonRpcInvalidParams(f"position ({pos.line}, {pos.character}) in {doc.uri}: {e}") from None


def span(doc: Document, start: Any, end: Any) -> tuple[int, int]:
    """`[start, end)` as `str` offsets into the document's text (what an offered code action carries)."""
    for name, n in (("start", start), ("end", end)):
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= len(doc.text.text):
            raise JsonRpcInvalidParams(f"{name} {n!r} is not an offset in {doc.uri} (length {len(doc.text.text)})")
    if end < start:
        raise JsonRpcInvalidParams(f"end {end} is before start {start}")
    return start, end
