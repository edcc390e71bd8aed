"""Everything waferline knows per language, in one table, and the one loader of its tree-sitter queries.

A row of `LANGUAGES` is an LSP language id: its grammar (from the official per-language wheels), the name of its
query files, and its comment markers. Queries are data: `queries/<name>.<kind>.scm`, one file per grammar and kind,
where `kind` is what the query is for:

- `context` (CONTEXT): what a completion needs to know around the cursor: `@import`, `@definition.*`, `@comment`,
  `@string`, `@code` (read by syntax/plan.py and syntax/context.py);
- `tags` (TAGS): definitions and references for the repository index: `@definition.*` with `@name`,
  `@reference.*` (read by repository/tags.py).

A query file may start with `; inherits: a,b`: the files of the same kind for a and b come first (TSX is
TypeScript's queries plus its own).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import PurePath

from tree_sitter import Language, Parser, Query

CONTEXT = "context"
TAGS = "tags"
QUERY_PACKAGE = "waferline.syntax.queries"


@dataclass(frozen=True)
class LanguageSpec:
    grammar: str  # the tree-sitter wheel's module
    queries: str  # the query files' name: queries/<queries>.<kind>.scm
    function: str = "language"  # the function in the module that returns the language pointer
    line_comment: str = "//"
    doc_comment: str = ""  # the marker of a comment that documents the definition below it; "": line_comment


LANGUAGES: dict[str, LanguageSpec] = {
    "python": LanguageSpec("tree_sitter_python", "python", line_comment="#"),
    "javascript": LanguageSpec("tree_sitter_javascript", "javascript"),
    "javascriptreact": LanguageSpec("tree_sitter_javascript", "javascript"),
    "typescript": LanguageSpec("tree_sitter_typescript", "typescript", "language_typescript"),
    "typescriptreact": LanguageSpec("tree_sitter_typescript", "tsx", "language_tsx"),
    "go": LanguageSpec("tree_sitter_go", "go"),
    "rust": LanguageSpec("tree_sitter_rust", "rust", doc_comment="///"),
    "lua": LanguageSpec("tree_sitter_lua", "lua", line_comment="--"),
    "c": LanguageSpec("tree_sitter_c", "c"),
    "cpp": LanguageSpec("tree_sitter_cpp", "cpp"),
    "java": LanguageSpec("tree_sitter_java", "java"),
}

EXTENSIONS: dict[str, str] = {
    ".py": "python", ".pyi": "python", ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript",
    ".jsx": "javascriptreact", ".ts": "typescript", ".mts": "typescript", ".tsx": "typescriptreact",
    ".go": "go", ".rs": "rust", ".lua": "lua", ".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp",
    ".cxx": "cpp", ".hpp": "cpp", ".hh": "cpp", ".java": "java",
}  # fmt: skip


def language_for_path(path: str) -> str | None:
    """The LSP language id for a file name, or None when no grammar covers it."""
    return EXTENSIONS.get(PurePath(path).suffix.lower())


def line_comment(language_id: str | None) -> str:
    """The line comment marker of a language (`//` for one without a grammar)."""
    spec = LANGUAGES.get(language_id or "")
    return spec.line_comment if spec is not None else "//"


def doc_comment(language_id: str | None) -> str:
    """The marker of a comment line that documents a definition (Rust's `///`; else the line comment)."""
    spec = LANGUAGES.get(language_id or "")
    return (spec.doc_comment or spec.line_comment) if spec is not None else "//"


@cache
def language(language_id: str) -> Language | None:
    """The tree-sitter Language for an LSP language id, or None for a language without a grammar (plain text)."""
    spec = LANGUAGES.get(language_id)
    if spec is None:
        return None
    return Language(getattr(importlib.import_module(spec.grammar), spec.function)())


def parser_for(language_id: str) -> Parser | None:
    """A new parser for the language (parsers hold state; give each document its own), or None."""
    lang = language(language_id)
    return Parser(lang) if lang is not None else None


def query_source(name: str, kind: str) -> str | None:
    """The text of `queries/<name>.<kind>.scm`, the files it inherits placed first; None when there is none."""
    file = resources.files(QUERY_PACKAGE).joinpath(f"{name}.{kind}.scm")
    if not file.is_file():
        return None
    text = file.read_text(encoding="utf-8")
    first = text.split("\n", 1)[0]
    if first.startswith("; inherits:"):
        parents = [p.strip() for p in first.split(":", 1)[1].split(",") if p.strip()]
        text = "\n".join(query_source(p, kind) or "" for p in parents) + "\n" + text
    return text


@cache
def load_query(language_id: str, kind: str, captures: tuple[str, ...] = ()) -> Query | None:
    """The compiled `kind` query of a language (CONTEXT or TAGS), or None without a grammar or a query file.

    With `captures`, only the captures whose names start with one of them stay enabled (a context query read for
    its imports alone visits fewer nodes). Compiled once per arguments and shared."""
    spec = LANGUAGES.get(language_id)
    lang = language(language_id)
    source = query_source(spec.queries, kind) if spec is not None else None
    if lang is None or source is None:
        return None
    query = Query(lang, source)
    if captures:
        for name in {query.capture_name(i) for i in range(query.capture_count)}:
            if not name.startswith(captures):
                query.disable_capture(name)
    return query
