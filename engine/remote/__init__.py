"""Engines behind HTTP: an inference server the user already runs (llama-server today), spoken to in its own dialect
with a streaming asynchronous client. See docs/remote.md."""
