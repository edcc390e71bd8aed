"""The deterministic part of hover: what the index knows about a name, and that knowledge as Markdown.

`describe_symbol` picks the definition the user most likely means (the hovered file's own first, then its folder's,
then classes and functions before variables, non-test code before tests), counts the uses of the name, and picks two
or three call sites worth reading (in other files than the definition, calls before imports, one per file).
`render_hover_markdown` writes it with links to the locations. Both read only the index (SQLite lookups by name and
a few source lines), which keeps a hover well under 50 ms; the model-written summary for a definition without a
docstring is the server's to add (pass it as `generated_summary` and it is marked as generated).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from waferline.server.repository.discovery import is_test_path
from waferline.server.repository.index import WorkspaceIndex
from waferline.server.repository.symbols import Definition, Reference
from waferline.server.repository.tags import Point

KIND_ORDER = ("class", "struct", "interface", "enum", "type", "function", "method", "macro", "module")
REFERENCE_KIND_ORDER = ("call", "class", "type", "import")
REFERENCES_CONSIDERED = 400  # uses ranked for the call sites (fetched calls first, non-test first)
MAX_OTHER_DEFINITIONS = 3
MAX_DOC_LINES = 15
MAX_LINE_CHARS = 120
FENCE_LANGUAGES = {"typescriptreact": "tsx", "javascriptreact": "jsx"}


@dataclass(frozen=True)
class CallSite:
    reference: Reference
    line: str  # the source line of the use, stripped


@dataclass(frozen=True)
class SymbolInfo:
    name: str
    definition: Definition | None  # the most relevant definition, None when the name is only used
    other_definitions: list[Definition] = field(default_factory=list)  # the next best few
    other_definition_count: int = 0  # all of them
    usage_count: int = 0  # uses of the name anywhere in the folder (matched by name, not resolved by type)
    usage_files: int = 0
    call_sites: list[CallSite] = field(default_factory=list)

    @property
    def needs_summary(self) -> bool:
        """True when a generated one-line summary would help: there is a definition and it has no docstring."""
        return self.definition is not None and not self.definition.docstring


def _closeness(a: Path, b: Path) -> int:
    """How many leading folders two paths share (more is closer)."""
    shared = 0
    for x, y in zip(a.parent.parts, b.parent.parts, strict=False):
        if x != y:
            break
        shared += 1
    return shared


def _path_rank(paths: set[Path], at_path: Path | None, home: set[Path]) -> dict[Path, tuple]:
    """Per distinct file (a name's thousands of uses sit in far fewer files): in `home` last, tests last, near first."""
    return {
        p: (p in home, is_test_path(p), -_closeness(p, at_path) if at_path is not None else 0, str(p)) for p in paths
    }


def definition_key(at_path: Path | None) -> Callable[[Path, str, Point], tuple]:
    """Sort key for definitions, best first for someone reading `at_path`: its own, then non-test, near, types and
    functions before variables."""
    files: dict[Path, tuple] = {}
    kinds = {kind: i for i, kind in enumerate(KIND_ORDER)}

    def key(path: Path, kind: str, start: Point) -> tuple:
        if path not in files:
            files.update(_path_rank({path}, at_path, set()))
        _, test, near, shown = files[path]
        return (path != at_path, test, near, kinds.get(kind, len(kinds)), shown, start)

    return key


def rank_definitions(definitions: list[Definition], at_path: Path | None) -> list[Definition]:
    key = definition_key(at_path)
    return sorted(definitions, key=lambda d: key(d.path, d.kind, d.range[0]))


def rank_call_sites(
    references: list[Reference], definition: Definition | None, at_path: Path | None
) -> list[Reference]:
    """Uses best first: other files than the definition's and the reader's, calls first, non-test, near, one per
    file before any file gets a second."""
    home = {p for p in (definition.path if definition else None, at_path) if p is not None}
    files = _path_rank({r.path for r in references}, at_path, home)
    kinds = {kind: i for i, kind in enumerate(REFERENCE_KIND_ORDER)}

    def key(r: Reference) -> tuple:
        in_home, test, near, path = files[r.path]
        return (in_home, kinds.get(r.kind, len(kinds)), test, near, path, r.range)

    ordered = sorted(references, key=key)
    seen: set[Path] = set()
    first: list[Reference] = []
    rest: list[Reference] = []
    for r in ordered:
        (first if r.path not in seen else rest).append(r)
        seen.add(r.path)
    return first + rest


def describe_symbol(
    index: WorkspaceIndex, name: str, at_path: Path | str | None, max_sites: int = 3
) -> SymbolInfo | None:
    """What the index knows about `name` as seen from `at_path`; None when it knows nothing."""
    here = Path(at_path).resolve() if at_path is not None else None
    definitions, count = index.definitions_ranked(name, definition_key(here), 1 + MAX_OTHER_DEFINITIONS)
    uses, files = index.reference_count(name)
    if not definitions and uses == 0:
        return None
    best = definitions[0] if definitions else None
    sites = []
    references = index.references(name, REFERENCES_CONSIDERED, calls_first=True)
    for ref in rank_call_sites(references, best, here)[:max_sites]:
        lines = index.source_lines(ref.path, ref.range[0][0], ref.range[0][0])
        sites.append(CallSite(ref, lines[0].strip()[:MAX_LINE_CHARS] if lines else ""))
    return SymbolInfo(name, best, definitions[1:], max(count - 1, 0), uses, files, sites)


def location_link(path: Path, line: int, workspace_root: Path) -> str:
    """A Markdown link `[rel/path.py:12](file:///abs/rel/path.py#L12)` (line shown 1-based)."""
    try:
        shown = PurePosixPath(path.relative_to(workspace_root)).as_posix()
    except ValueError:
        shown = path.as_posix()
    return f"[{shown}:{line + 1}]({path.as_uri()}#L{line + 1})"


def inline_code(text: str) -> str:
    """`text` as a Markdown code span, whatever backticks it contains."""
    fence = "`"
    while fence in text:
        fence += "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _doc_markdown(doc: str) -> str:
    lines = doc.splitlines()
    if len(lines) > MAX_DOC_LINES:
        lines = [*lines[:MAX_DOC_LINES], "…"]
    # Keep a docstring's own line breaks, and stop a line that starts with # or > from becoming a heading or quote.
    return "  \n".join("\\" + line if line.lstrip().startswith(("#", ">")) else line for line in lines)


def render_hover_markdown(info: SymbolInfo, workspace_root: Path, generated_summary: str | None = None) -> str:
    """Hover text: signature, docstring (or the generated summary, marked as such), where it is defined, how often
    it is used and where."""
    root = Path(workspace_root).resolve()
    parts: list[str] = []
    d = info.definition
    if d is not None:
        fence = FENCE_LANGUAGES.get(d.language, d.language)
        parts.append(f"```{fence}\n{d.signature or d.name}\n```")
        if d.docstring:
            parts.append(_doc_markdown(d.docstring))
        elif generated_summary:
            parts.append(f"*Generated summary (not from the source):* {generated_summary.strip()}")
        owner = f" in {inline_code(d.container)}" if d.container else ""
        parts.append(f"{d.kind} {inline_code(d.name)}{owner}, defined at {location_link(d.path, d.range[0][0], root)}")
        if info.other_definitions:
            others = ", ".join(location_link(o.path, o.range[0][0], root) for o in info.other_definitions)
            hidden = info.other_definition_count - len(info.other_definitions)
            more = f" and {hidden} more" if hidden > 0 else ""
            parts.append(f"Also defined at {others}{more}")
    if info.usage_count == 0:
        parts.append(f"No uses of {inline_code(info.name)} found in the workspace.")
    else:
        times = "once" if info.usage_count == 1 else f"{info.usage_count} times"
        files = "1 file" if info.usage_files == 1 else f"{info.usage_files} files"
        lines = [f"Used {times} in {files}" + (", for example:" if info.call_sites else ".")]
        for site in info.call_sites:
            where = f" in {inline_code(site.reference.enclosing)}" if site.reference.enclosing else ""
            code = f": {inline_code(site.line)}" if site.line else ""
            lines.append(f"- {location_link(site.reference.path, site.reference.range[0][0], root)}{where}{code}")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)
