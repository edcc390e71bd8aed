"""Evidence for a free-form question about the repository (`waferline/ask`), taken only from the index.

Every location an answer shows comes from here: identifiers the question names that the index defines (their
definition and two uses each), then the best BM25 matches for the question's words. The server either shows this
evidence as the answer (a completion-only model) or puts `evidence_prompt` in front of an instruction-following model
and shows the evidence under its answer; locations are never taken from the model's text.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from waferline.server.repository.discovery import file_language
from waferline.server.repository.index import WorkspaceIndex
from waferline.server.repository.lookup import FENCE_LANGUAGES, definition_key, location_link, rank_call_sites
from waferline.server.repository.symbols import Definition
from waferline.server.repository.tags import Range
from waferline.server.repository.terms import STOP_WORDS, identifiers

MAX_NAMES = 3  # identifiers of the question looked up by name
USAGES_PER_NAME = 2
AMBIGUOUS_WORD = 3
SNIPPET_LINES = 12


@dataclass(frozen=True)
class Evidence:
    kind: str  # "definition" (of a name in the question), "usage" (of such a name), "match" (a search hit)
    path: Path
    range: Range
    title: str  # what it is: "function urlparse", "use of urlparse in main"
    text: str  # signature and docstring, the line of a use, or the matching code
    language: str
    score: float  # order within one answer only


def _definition_text(d: Definition) -> str:
    return f"{d.signature or d.name}\n{d.docstring}".strip()


def _named_identifiers(question: str) -> list[tuple[str, bool]]:
    """(word, looks like code) for the words of the question, `quoted`, snake_case and camelCase words first."""
    quoted = {w for part in question.split("`")[1::2] for w in identifiers(part)}

    def rank(w: str) -> int:
        return 0 if w in quoted else 1 if ("_" in w or any(c.isupper() for c in w[1:])) else 2

    words = [w for w in identifiers(question) if w.lower() not in STOP_WORDS]
    return [(w, rank(w) < 2) for w in sorted(words, key=rank)]


def gather_evidence(
    index: WorkspaceIndex, question: str, k: int = 8, at_path: Path | str | None = None
) -> list[Evidence]:
    """At most k pieces of evidence, most useful first; every location in them comes from the index."""
    here = Path(at_path).resolve() if at_path is not None else None
    out: list[Evidence] = []
    seen: set[tuple[Path, int]] = set()

    def add(e: Evidence) -> None:
        if (e.path, e.range[0][0]) not in seen:
            seen.add((e.path, e.range[0][0]))
            out.append(e)

    named = 0
    for word, code_like in _named_identifiers(question):
        if named >= MAX_NAMES or len(out) >= k:
            break
        definitions, count = index.definitions_ranked(word, definition_key(here), 1)
        # A plain word ("open", "run") that names many things says little about which one the question means.
        if not definitions or (count >= AMBIGUOUS_WORD and not code_like):
            continue
        named += 1
        best = definitions[0]
        title = f"{best.kind} {best.qualified_name}"
        add(Evidence("definition", best.path, best.range, title, _definition_text(best), best.language, 1e9 - named))
        for ref in rank_call_sites(index.references(word, 400, calls_first=True), best, here)[:USAGES_PER_NAME]:
            lines = index.source_lines(ref.path, ref.range[0][0], ref.range[0][0])
            where = f" in {ref.enclosing}" if ref.enclosing else ""
            text = lines[0].strip() if lines else ""
            add(Evidence("usage", ref.path, ref.range, f"use of {word}{where}", text, best.language, 1e8 - named))
    for hit in index.search(question, 2 * k):
        if len(out) >= k:
            break
        if hit.name:
            title = f"{hit.kind} {hit.container + '.' if hit.container else ''}{hit.name}"
            text = f"{hit.signature}\n{hit.docstring}".strip() or hit.snippet
        else:
            title, text = "code", hit.snippet
        text = "\n".join(text.splitlines()[:SNIPPET_LINES])
        add(Evidence("match", hit.path, hit.range, title, text, _language_of(index, hit.path), hit.score))
    return out[:k]


def _language_of(index: WorkspaceIndex, path: Path) -> str:
    rel = index.relative(path)
    return (file_language(rel) if rel else None) or ""


def render_evidence_markdown(evidence: list[Evidence], workspace_root: Path) -> str:
    """The evidence as a Markdown list with links: the whole answer when no model can write one."""
    if not evidence:
        return "The index has nothing that matches this question."
    root = Path(workspace_root).resolve()
    items = []
    for i, e in enumerate(evidence, 1):
        fence = FENCE_LANGUAGES.get(e.language, e.language)
        body = (
            f"\n\n   ```{fence}\n" + "\n".join(f"   {line}" for line in e.text.splitlines()) + "\n   ```"
            if e.text
            else ""
        )
        items.append(f"{i}. {e.title} — {location_link(e.path, e.range[0][0], root)}{body}")
    return "\n".join(items)


def evidence_prompt(evidence: list[Evidence], workspace_root: Path) -> str:
    """The evidence as plain numbered text for a model's prompt ([1], [2], ... so that an answer can cite it)."""
    root = Path(workspace_root).resolve()
    blocks = []
    for i, e in enumerate(evidence, 1):
        try:
            shown = e.path.relative_to(root).as_posix()
        except ValueError:
            shown = e.path.as_posix()
        blocks.append(f"[{i}] {e.title} ({shown}:{e.range[0][0] + 1})\n{e.text}")
    return "\n\n".join(blocks)


EvidenceKey = tuple[Path, int]  # what tells one piece of evidence from another: its file and first line


def evidence_key(e: Evidence) -> EvidenceKey:
    return (e.path, e.range[0][0])


def order_for_reuse(evidence: list[Evidence], previous: list[EvidenceKey]) -> list[Evidence]:
    """`evidence` with the pieces the previous prompt held first, in that prompt's order, then the rest in their own.

    The chat model's KV session keeps the longest start the new prompt shares with the one before it (engine/kvcache.py
    `Session.reuse_prefix`), and the evidence comes right after the constant system prompt: a question about the
    same code (a follow-up, another question about one module) then prefills only the pieces that are new and the
    question. It changes which number a piece has, never which pieces there are."""
    now = {evidence_key(e): e for e in evidence}
    kept = [now[k] for k in previous if k in now]
    held = {evidence_key(e) for e in kept}
    return kept + [e for e in evidence if evidence_key(e) not in held]
