"""One open document as the server keeps it, and the snapshot of it that a request works on.

`Document` is the server's state for an open document (server/app.py holds them all): its text, the only copy (a
`TextDocument`), its syntax tree (edited with every change, parsed when read) and where it was last edited.
`DocumentSnapshot` is what a feature reads: the text and version at the moment its request arrived, taken once per
request, so that the document can move on while the model runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from waferline.server.syntax.tree import SyntaxTree
from waferline.server.text import TextDocument


@dataclass(frozen=True)
class DocumentSnapshot:
    uri: str
    language_id: str
    text: str
    version: int
    encoding: str  # of LSP positions: "utf-16", "utf-8" or "utf-32"
    # The document's tree, which follows the document: read it before the first await (plan_completion does), or
    # check that its `source` is this text (code actions do).
    syntax: SyntaxTree

    @property
    def session_id(self) -> str:
        """The document's KV session in the engine: one per document, named by its URI."""
        return self.uri


@dataclass(eq=False)
class Document:
    uri: str
    language_id: str
    text: TextDocument
    syntax: SyntaxTree
    edited_line: int | None = None  # where the last change started, and when: for other documents' prompts
    edited_at: float = 0.0

    @classmethod
    def open(cls, uri: str, language_id: str, text: str, *, version: int = 0, encoding: str = "utf-16") -> Document:
        document = TextDocument(text, version=version, encoding=encoding, language_id=language_id)
        return cls(uri, language_id, document, SyntaxTree(language_id, text))

    def snapshot(self) -> DocumentSnapshot:
        return DocumentSnapshot(
            self.uri, self.language_id, self.text.text, self.text.version, self.text.encoding, self.syntax
        )
