"""Engines behind HTTP: an inference server the user already runs — llama-server, an OpenAI-compatible server (vLLM)
or Ollama, one module per dialect, `probe.py` telling them apart for `engineDialect: auto` — spoken to in its own
dialect with a streaming asynchronous client. See docs/remote.md."""
