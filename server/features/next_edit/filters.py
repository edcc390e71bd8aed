"""What a next edit must never be, checked on every candidate before it is shown (structural and model alike).

Never a no-op; never a change of whitespace only, or of import lines only (an editor's or a formatter's job, and a
model's favourite noise); never an edit that undoes what the user just typed (it would restore the old text of the
last edit's span) or deletes what they just inserted; never one that breaks the parse of a file that parsed.
"""

from __future__ import annotations

import re

from waferline.server.features.next_edit.source import Edit
from waferline.syntax.edit_history import EditEvent
from waferline.syntax.parse_check import parse_errors

_IMPORT = {
    "python": re.compile(r"\s*(import\s|from\s+\S+\s+import\s)"),
    "javascript": re.compile(r"\s*(import\s|export\s.*\sfrom\s|const\s+\w+\s*=\s*require\()"),
    "typescript": re.compile(r"\s*(import\s|export\s.*\sfrom\s)"),
    "go": re.compile(r"\s*(import\s|\"[\w./-]+\"\s*$)"),
    "rust": re.compile(r"\s*(use\s|extern\s+crate\s)"),
    "java": re.compile(r"\s*import\s"),
    "c": re.compile(r"\s*#\s*include\s"),
    "cpp": re.compile(r"\s*#\s*include\s"),
}
_IMPORT["javascriptreact"], _IMPORT["typescriptreact"] = _IMPORT["javascript"], _IMPORT["typescript"]


def refusal(text: str, edit: Edit, language_id: str, last: EditEvent | None, last_span: tuple[int, int] | None,
            parsed: bool | None) -> str | None:  # fmt: skip
    """Why `edit` of `text` must not be shown, or None. `last` is the user's last edit and `last_span` where its
    new text lies now; `parsed` whether the document parses without error (None: no grammar)."""
    old = text[edit.start : edit.end]
    if old == edit.new:
        return "no-op"
    if "".join(old.split()) == "".join(edit.new.split()):
        return "whitespace only"
    if _import_only(text, edit, language_id):
        return "import lines only"
    if last is not None and last_span is not None:
        s, e = last_span
        if edit.start <= e and edit.end >= s:  # the edit touches what the user just wrote
            if not edit.new and edit.start < e and s < edit.end:
                return "deletes what was just inserted"
            lo, hi = min(s, edit.start), max(e, edit.end)
            if text[lo : edit.start] + edit.new + text[edit.end : hi] == text[lo:s] + last.old + text[e:hi]:
                return "undoes the last edit"
    if parsed:
        after_bytes = (text[: edit.start] + edit.new + text[edit.end :]).encode("utf-8", "surrogatepass")
        if parse_errors(language_id, after_bytes):
            return "breaks the parse"
    return None


def _import_only(text: str, edit: Edit, language_id: str) -> bool:
    pattern = _IMPORT.get(language_id)
    if pattern is None:
        return False
    first = text.rfind("\n", 0, edit.start) + 1
    last = text.find("\n", edit.end)
    before = text[first : len(text) if last < 0 else last]
    after = text[first : edit.start] + edit.new + text[edit.end : len(text) if last < 0 else last]
    lines = [ln for ln in (before + "\n" + after).splitlines() if ln.strip()]
    return bool(lines) and all(pattern.match(ln) for ln in lines)
