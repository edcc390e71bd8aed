"""Next-edit suggestions: after an edit, the edit that should follow it, anywhere in the document (docs/next-edit.md).

`feature.py` (`NextEdits`: the history, the requests, the counters), `lsp.py` (the protocol and its fallbacks),
`syntax/edit_history.py` (each document's recent edits), `candidates.py` and the candidate modules (`rename.py`,
with Python's scopes in `scopes.py`), `filters.py` (what is never shown), `source.py` (text and tree offsets).
"""
