"""Syntax: tree-sitter trees per document, and the questions a completion asks of them."""
