"""What the index answers with: definitions, references and search hits, located by absolute path and LSP range.

Ranges are ((line, column), (line, column)), zero-based, columns in UTF-16 code units (LSP's default encoding), end
exclusive, so a handler turns them into `lsprotocol` types without arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from waferline.server.repository.tags import Range


@dataclass(frozen=True, slots=True)
class Definition:
    name: str
    kind: str  # function, method, class, struct, interface, enum, type, constant, variable, module, macro
    path: Path
    range: Range  # the whole definition
    selection_range: Range  # its name
    signature: str  # the definition up to its body: `def load(path: str) -> Config`
    docstring: str  # the docstring, or the comment right above the definition; "" when it has neither
    container: str  # enclosing definitions, dotted (`Config`, `ns.Point`); "" at top level
    language: str

    @property
    def qualified_name(self) -> str:
        return f"{self.container}.{self.name}" if self.container else self.name


@dataclass(frozen=True, slots=True)
class Reference:
    name: str
    kind: str  # call, class (inheritance, construction), type (annotation), import
    path: Path
    range: Range  # the name at the place of use
    enclosing: str | None  # qualified name of the innermost definition around the use; None at top level


@dataclass(frozen=True, slots=True)
class Hit:
    """A ranked search result: a definition, or a chunk of top-level code (then `name` is "")."""

    path: Path
    range: Range
    kind: str  # a definition kind, or "chunk"
    name: str
    container: str
    signature: str
    docstring: str
    snippet: str  # the first lines of the code the hit covers
    score: float  # BM25, higher is better; comparable only within one search
