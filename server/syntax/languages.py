"""tree-sitter grammars by LSP language id, from the official per-language wheels."""

from __future__ import annotations

import importlib
from functools import cache
from pathlib import PurePath

from tree_sitter import Language, Parser

# LSP language id -> (grammar module, function in it that returns the language pointer)
GRAMMARS: dict[str, tuple[str, str]] = {
    "python": ("tree_sitter_python", "language"),
    "javascript": ("tree_sitter_javascript", "language"),
    "javascriptreact": ("tree_sitter_javascript", "language"),
    "typescript": ("tree_sitter_typescript", "language_typescript"),
    "typescriptreact": ("tree_sitter_typescript", "language_tsx"),
    "go": ("tree_sitter_go", "language"),
    "rust": ("tree_sitter_rust", "language"),
    "lua": ("tree_sitter_lua", "language"),
    "c": ("tree_sitter_c", "language"),
    "cpp": ("tree_sitter_cpp", "language"),
    "java": ("tree_sitter_java", "language"),
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


@cache
def language(language_id: str) -> Language | None:
    """The tree-sitter Language for an LSP language id, or None for a language without a grammar (plain text)."""
    if language_id not in GRAMMARS:
        return None
    module_name, func = GRAMMARS[language_id]
    module = importlib.import_module(module_name)
    return Language(getattr(module, func)())


def parser_for(language_id: str) -> Parser | None:
    """A new parser for the language (parsers hold state; give each document its own), or None."""
    lang = language(language_id)
    return Parser(lang) if lang is not None else None
