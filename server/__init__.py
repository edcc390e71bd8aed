"""waferline.server — the LSP layer: documents, syntax, features. The only package that knows editors."""
