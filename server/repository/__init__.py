"""The repository: definitions, references and ranked search over the workspace folders, kept on disk and current.

- workspace.py: `Indexing`, the server's indexes, one per workspace folder, kept current from the editor and the
  disk; and the definitions from other files that go into a completion prompt.
- index.py: `WorkspaceIndex`, the index of one folder (build, update, lookups by name, ranked search).
- discovery.py: which files of a folder are indexed, and reading them safely.
- builder.py, tags.py, search_docs.py, terms.py: a file's records: its definitions and references (the tag
  queries), its search documents, its words.
- store.py: the SQLite database with its FTS5 table. symbols.py: what lookups answer with (`Definition`...).
- lookup.py: what the index knows about a name, for hover: the best definition, its uses and call sites.
- evidence.py: the evidence for a question about the repository (`waferline/ask`).

See docs/repository.md.
"""

from waferline.server.repository.index import BuildReport, IndexOptions, WorkspaceIndex, default_cache_dir
from waferline.server.repository.symbols import Definition, Hit, Reference

__all__ = ["BuildReport", "Definition", "Hit", "IndexOptions", "Reference", "WorkspaceIndex", "default_cache_dir"]
