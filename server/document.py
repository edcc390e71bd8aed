"""One open document as the server keeps it, and the snapshot of it that a request works on.

`Document` is the server's state for an open document (server/app.py holds them all): its text, the only copy (a
`DocumentText`), its syntax tree (edited with every change, parsed when read) and where it was last edited.
`DocumentSnapshot` is what a feature reads: the text and version at the moment its request arrived, taken once per
request, so that the document can move on while the model runs; `DocumentSnapshot.current` says whether an answer
computed on it still fits the document (no edit since, and the server's text still the client's).

The text is kept exactly as the client sent it, for position arithmetic and `waferline/document`; what every other
consumer reads (the tokenizer, tree-sitter, the repository index, other documents' prompts) is `readable_text`, the
same text with each lone surrogate (JSON can carry "\\ud800") as U+FFFD, normalised here once. Both have the same
length in `str` offsets, UTF-16 units and UTF-8 bytes (a lone surrogate counts as its 3-byte encoding), so an
offset or position means the same in either.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from waferline.syntax.text import DocumentText, TextChange
from waferline.syntax.tree import SyntaxTree

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # in a Python str every such code point stands alone


def readable(text: str) -> str:
    """`text` with each lone surrogate as U+FFFD (the text itself when it has none), as the tokenizer reads it."""
    return text if text.isascii() else _LONE_SURROGATE.sub("\ufffd", text)


def readable_change(change: TextChange) -> TextChange:
    """A change as the syntax tree takes it: its inserted text readable (its byte offsets are the same)."""
    new_text = readable(change.new_text)
    return change if new_text is change.new_text else dataclasses.replace(change, new_text=new_text)


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
    revision: int = 0  # the text's `DocumentText.revision`: it differs from the document's once any edit applied

    def current(self, doc: Document) -> bool:
        """Whether `doc` still holds this snapshot's text and still agrees with the client (see `Document.out_of_sync`):
        an answer computed on the snapshot may be shown only then."""
        return doc.text.revision == self.revision and doc.out_of_sync is None

    @property
    def session_id(self) -> str:
        """The document's KV session in the engine: one per document, named by its URI."""
        return self.uri


@dataclass(eq=False)
class Document:
    uri: str
    language_id: str
    text: DocumentText
    syntax: SyntaxTree
    edited_line: int | None = None  # where the last change started, and when: for other documents' prompts
    edited_at: float = 0.0
    # Where the user was last seen, a `str` offset (the end of the last edit, a request's position, the client's
    # `waferline/didFocus`): where a warm-up prefills the next request's prompt (features/warm.py). None: unknown.
    cursor: int | None = None
    # Why the server's text is known to differ from the client's (a change that could not apply, docs/reliability.md,
    # "Text sync"), or None while they agree. Nothing is completed against such a text; a whole-text change or a
    # didOpen makes them agree again.
    out_of_sync: str | None = None
    _readable: tuple[str, str] = ("", "")  # (text, its readable form): computed once per change, when first read

    @classmethod
    def open(cls, uri: str, language_id: str, text: str, *, version: int = 0, encoding: str = "utf-16") -> Document:
        document = DocumentText(text, version=version, encoding=encoding, language_id=language_id)
        return cls(uri, language_id, document, SyntaxTree(language_id, readable(text)))

    @property
    def readable_text(self) -> str:
        """The text as consumers read it (see the module docstring)."""
        text = self.text.text
        if self._readable[0] is not text:
            self._readable = (text, readable(text))
        return self._readable[1]

    def snapshot(self) -> DocumentSnapshot:
        return DocumentSnapshot(
            self.uri,
            self.language_id,
            self.readable_text,
            self.text.version,
            self.text.encoding,
            self.syntax,
            self.text.revision,
        )
