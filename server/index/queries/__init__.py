"""tree-sitter tag queries, one `<query name>-tags.scm` per language, read by waferline.server.index.tags.

A package (rather than a plain folder) so that the .scm files ship with the wheel and load through importlib.resources.
"""
