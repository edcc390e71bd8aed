"""Code actions that rewrite one syntax node: targets.py finds them (no model), compute.py runs the model and checks
the result (syntax/parse_check.py refuses an edit that would add a syntax error), lsp.py speaks LSP. See
docs/repository.md."""
