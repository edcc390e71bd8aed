"""What the ranked search sees of a file: one document per definition and one per stretch of top-level code.

A definition's document holds its name (split into terms), signature, docstring and the first lines of its code; the
code between top-level definitions (imports, constants, scripts) is cut into chunks of at most CHUNK_LINES lines, so
that every line of the file can be found. Files without tag queries (Markdown) are chunks only.
"""

from __future__ import annotations

from dataclasses import dataclass

from waferline.server.repository.tags import FileTags
from waferline.server.repository.terms import text_terms

BODY_LINES = 30  # lines of a definition's code that go into its document
BODY_CHARS = 1500
CHUNK_LINES = 40


@dataclass(frozen=True, slots=True)
class SearchDoc:
    """One searchable unit. `definition` indexes FileTags.definitions (-1: a chunk); lines zero-based, inclusive."""

    kind: str
    definition: int
    start_line: int
    end_line: int
    name: str
    signature: str
    doc: str
    body: str


def build_documents(lines: list[str], tags: FileTags) -> list[SearchDoc]:
    docs = []
    covered = bytearray(len(lines))  # 1 where a top-level definition owns the line
    for i, d in enumerate(tags.definitions):
        (start, _), (end, _) = d.range
        if d.parent < 0:  # its comment and decorators too: they are in the definition's document
            covered[d.head_line : end + 1] = b"\x01" * len(covered[d.head_line : end + 1])
        body = "\n".join(lines[start : min(end + 1, start + BODY_LINES)])[:BODY_CHARS]
        name = text_terms(f"{d.name} {d.container}")
        docs.append(SearchDoc(d.kind, i, start, end, name, d.signature, d.doc, body))
    start = -1
    for line_no in range(len(lines) + 1):
        free = line_no < len(lines) and not covered[line_no]
        if free and start < 0:
            start = line_no
        if start >= 0 and (not free or line_no - start == CHUNK_LINES):
            docs.extend(_chunk(lines, start, line_no - 1))
            start = line_no if free else -1
    return docs


def _chunk(lines: list[str], start: int, end: int) -> list[SearchDoc]:
    while start <= end and not lines[start].strip():
        start += 1
    while end >= start and not lines[end].strip():
        end -= 1
    if start > end:
        return []
    return [SearchDoc("chunk", -1, start, end, "", "", "", "\n".join(lines[start : end + 1]))]
