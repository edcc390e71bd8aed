"""The words the index keeps, without a parser: comments and docstrings as prose, identifiers as search terms.

Tag extraction (tags.py) cleans comments and docstrings here; search documents, queries and question evidence split
identifiers into terms here. Kept apart from the tree-sitter code so that both can be tested without a parser.
"""

from __future__ import annotations

import inspect
import re
from functools import lru_cache

_COMMENT_MARKER = re.compile(r"^\s*(?:/\*+!?|\*+/|\*(?!/)|//[/!]?|--+(?:\[=*\[)?|#+!?|;+)\s?")
_COMMENT_CLOSE = re.compile(r"\s*(?:\*+/|\]=*\])\s*$")
_STRING_PREFIX = re.compile(r"^[rRbBuUfF]{0,2}")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CAMEL_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z]|[0-9]|$)|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")

MAX_DOC_CHARS = 4000


def clean_comment(lines: list[str]) -> str:
    """The prose of a run of comment lines (`//`, `///`, `#`, `--`, `/* ... */`, `/** * ... */`), markers removed."""
    out = []
    for line in lines:
        for raw in line.splitlines() or [""]:
            text = _COMMENT_CLOSE.sub("", raw)
            text = _COMMENT_MARKER.sub("", text, count=1)
            out.append(text.rstrip())
    return _trim("\n".join(out).strip("\n"))


def clean_python_string(literal: str) -> str:
    """The value of a Python docstring literal as `inspect.cleandoc` shows it (prefix and quotes removed)."""
    body = _STRING_PREFIX.sub("", literal, count=1)
    for quote in ('"""', "'''", '"', "'"):
        if body.startswith(quote) and body.endswith(quote) and len(body) >= 2 * len(quote):
            body = body[len(quote) : -len(quote)]
            break
    return _trim(inspect.cleandoc(body))


def _trim(text: str) -> str:
    return text if len(text) <= MAX_DOC_CHARS else text[:MAX_DOC_CHARS].rstrip() + " …"


@lru_cache(maxsize=65536)
def identifier_terms(name: str) -> tuple[str, ...]:
    """Lower-case search terms for one identifier: its parts and, when it has several, the parts joined.

    `parseConfig` and `parse_config` both give ("parse", "config", "parseconfig"), so a question that says
    "parse config" finds either spelling and an exact identifier scores above a partial one.
    """
    parts = [p.lower() for chunk in name.split("_") for p in _CAMEL_PART.findall(chunk)]
    parts = [p for p in parts if p]
    if len(parts) > 1:
        parts.append("".join(parts))
    return tuple(dict.fromkeys(parts))


def identifiers(text: str) -> list[str]:
    """Identifier-shaped words of a text, in order of appearance, without repeats."""
    return list(dict.fromkeys(_IDENTIFIER.findall(text)))


def text_terms(text: str) -> str:
    """A text as space-separated search terms (identifiers split into their parts), for the full-text index."""
    return " ".join(term for word in _IDENTIFIER.findall(text) for term in identifier_terms(word))


# Words of a question that say nothing about the code it is asking about.
STOP_WORDS = frozenset(
    {
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "could",
        "do",
        "does",
        "did",
        "for",
        "from",
        "has",
        "have",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "should",
        "so",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "this",
        "those",
        "to",
        "us",
        "was",
        "we",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "use",
        "used",
        "uses",
        "using",
        "work",
        "works",
        "get",
        "gets",
        "find",
        "show",
        "tell",
        "explain",
        "about",
        "self",
        "cls",
    }
)  # fmt: skip
MAX_QUERY_TERMS = 24


def query_terms(query: str) -> list[str]:
    """The search terms of a question or identifier, most specific first (whole identifiers before their parts)."""
    terms: list[str] = []
    for word in identifiers(query):
        parts = identifier_terms(word)
        terms.extend((parts[-1], *parts[:-1]) if len(parts) > 1 else parts)
    kept = [t for t in dict.fromkeys(terms) if t not in STOP_WORDS and (len(t) > 1 or t.isdigit())]
    return kept[:MAX_QUERY_TERMS]


def match_expression(query: str) -> str | None:
    """An FTS5 MATCH expression that ORs the query's terms (quoted, so no term is read as an operator)."""
    terms = query_terms(query)
    return " OR ".join(f'"{t}"' for t in terms) if terms else None
