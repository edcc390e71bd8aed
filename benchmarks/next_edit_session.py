"""An in-process next-edit session: a document edited as a user would (a selection typed over key by key), the
chain of suggestions followed to its end and timed, other documents open beside it. For the candidate tests and
the structural next-edit benchmarks (benchmarks/nes_declared.py, nes_declared_check.py)."""

from __future__ import annotations

import asyncio
import time

from waferline.server.document import Document, readable_change
from waferline.server.features.next_edit.elsewhere import IndexedFiles
from waferline.server.features.next_edit.feature import NextEdits
from waferline.server.features.next_edit.source import Edit

URI = "file:///p/shapes.py"


class Session:
    def __init__(
        self, text: str, language_id: str = "python", others: dict[str, str] | None = None, *,
        uri: str = URI, indexed: IndexedFiles | None = None,
    ) -> None:  # fmt: skip
        self.doc = Document.open(uri, language_id, text, version=1)
        self.documents = {uri: self.doc}
        for other_uri, other in (others or {}).items():
            self.documents[other_uri] = Document.open(other_uri, language_id, other, version=1)
        self.next_edits = NextEdits(self.documents, indexed=indexed)

    def replace(self, start: int, end: int, new: str) -> None:
        d = self.doc
        before, version = d.text.text, d.text.version
        change = d.text.apply_change((d.text.position_at(start), d.text.position_at(end)), new)
        d.syntax.apply(readable_change(change))
        d.text.version = version + 1
        self.next_edits.changed(d, version, [(before, change)])

    def edit(self, needle: str, old: str, new: str) -> None:
        """Replace `old` inside the first `needle` of the text, one character typed at a time over a selection."""
        at = self.doc.text.text.index(needle) + needle.index(old)
        self.replace(at, at + len(old), new[:1])
        for i, ch in enumerate(new[1:]):
            self.replace(at + 1 + i, at + 1 + i, ch)

    def ask(self) -> Edit | None:
        proposals = asyncio.run(self.next_edits.answer(self.doc, self.doc.text.version, 0))
        return proposals[0].edit if proposals else None

    def chain(self, limit: int = 30) -> tuple[list[float], int]:
        """Follow the suggestions, each applied and accepted, until one is silent (at most `limit` answers): the ms
        of each answer (the last is the silent one) and the edits made."""
        times, made = [], 0
        for _ in range(limit):
            t0 = time.perf_counter()
            proposals = asyncio.run(self.next_edits.answer(self.doc, self.doc.text.version, 0))
            times.append((time.perf_counter() - t0) * 1000)
            if not proposals:
                break
            p = proposals[0]
            self.replace(p.edit.start, p.edit.end, p.edit.new)
            self.next_edits.accept(p.id)
            made += 1
        return times, made

    def follow(self, limit: int = 30) -> str:
        """The text after the chain of suggestions (chain)."""
        self.chain(limit)
        return self.doc.text.text
