"""Definitions from other files for a completion prompt: the names the prompt's window uses, and the first lines of
their definitions elsewhere in the index, within a budget. server/repository/workspace.py caches the result."""

from __future__ import annotations

import re
from pathlib import Path

from waferline.server.repository.index import WorkspaceIndex
from waferline.syntax.context import Snippet
from waferline.syntax.languages import line_comment
from waferline.syntax.plan import CompletionPlan, line_bounds

CONTEXT_SNIPPET_LINES = 8  # lines of a definition from another file shown to the model
CONTEXT_MAX_DEFINITIONS = 6
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def window_names(text: str, plan: CompletionPlan) -> tuple[str, ...]:
    """The names of the prompt's window without the cursor's line, in document order: what the user is typing does
    not change them, so the snippets they bring stay the same keystroke after keystroke."""
    line_start, line_end = line_bounds(text, plan.offset)
    window = text[plan.prefix_start : line_start] + "\n" + text[line_end : plan.suffix_end]
    return tuple(dict.fromkeys(_WORD.findall(window)))


def definition_snippets(
    index: WorkspaceIndex, path: Path, names: tuple[str, ...], budget: int, language_id: str | None
) -> list[Snippet]:
    """Definitions of `names` from files other than `path`, each its first CONTEXT_SNIPPET_LINES lines under a
    comment naming its file, as many as fit `budget` characters."""
    snippets = []
    comment = line_comment(language_id)
    for d in index.definitions_for_names(names, exclude_path=path, limit=CONTEXT_MAX_DEFINITIONS):
        (start, _), (end, _) = d.range
        lines = index.source_lines(d.path, start, min(end, start + CONTEXT_SNIPPET_LINES - 1))
        rel = index.relative(d.path) or d.path.name
        body = "\n".join(lines).rstrip()
        snippet = f"{comment} {rel}\n{body}" + ("\n..." if end >= start + CONTEXT_SNIPPET_LINES else "")
        if not body or len(snippet) + 1 > budget:
            continue
        budget -= len(snippet) + 1
        snippets.append(Snippet("definition", snippet, path=str(d.path), start_line=start))
    return snippets
