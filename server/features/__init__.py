"""The features a user sees, one module each: inline completion (inline.py, with the line candidates of
prompt_lookup.py and the confidence gate of confidence.py), hover (hover.py), questions about the repository
(ask.py) and code actions (actions/).

server/handlers.py registers them on the LSP server; each is testable without a transport.
"""
