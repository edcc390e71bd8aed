"""The repository index: definitions, references and ranked search over a workspace folder, kept on disk.

`WorkspaceIndex` is the entry point; hover.py and ask.py answer questions from it with plain functions.
See docs/repository.md.
"""

from waferline.server.index.symbols import Definition, Hit, Reference
from waferline.server.index.workspace import BuildReport, IndexOptions, WorkspaceIndex, default_cache_dir

__all__ = ["BuildReport", "Definition", "Hit", "IndexOptions", "Reference", "WorkspaceIndex", "default_cache_dir"]
