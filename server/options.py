"""The server's options: one keyword-only dataclass, read from `initializationOptions` and `didChangeConfiguration`.

Each option is declared once, in `Options`: its type, default, description and constraints (`option(...)`,
server/option_spec.py). The
parsing (server/option_parsing.py) is derived from that declaration, and so are the files that list the options (the
JSON schema `options.schema.json`, the tables in docs/configuration.md, the VS Code extension's settings), which
`python -m waferline.server.options_schema --write` (`make options`) regenerates. Names on the wire are camelCase
(`maxTokens`), as VS Code settings are. A bad value never stops the server: it is reported once (log and
`window/showMessage`) and the default is used in its place.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from waferline.engine.factory import AUTO, WEIGHT_FORMATS, backend_names
from waferline.server.option_spec import COMPLETION, ENGINE, GROUPS, REPOSITORY, SECTION, OptionSpec, option

__all__ = ["COMPLETION", "ENGINE", "GROUPS", "REPOSITORY", "SECTION", "OptionSpec", "Options"]

log = logging.getLogger(__name__)


@dataclass(kw_only=True, frozen=True)
class Options:
    enable: bool = option(
        True,
        COMPLETION,
        "Answer completion requests at all. `false` answers every request with an empty list (documents stay in sync).",
    )
    model: str | None = option(
        None,
        ENGINE,
        "A Hugging Face model directory, the name of a shipped model (`engine/models/NAME`) or a preset with random "
        "weights (`tiny`, `qwen2.5-coder-0.5b`, ...). `null`: the shipped default model "
        "(`engine/models/waferline-mini`), or `tiny` on a checkout without it. See docs/engine.md.",
    )
    engine_url: str | None = option(
        None,
        ENGINE,
        "Completions from an inference server you run instead of the local model: its base URL, e.g. "
        "`http://127.0.0.1:8012` (llama-server), `http://127.0.0.1:8000` (vLLM), `http://127.0.0.1:11434` (Ollama). "
        "`null`: the local model. Code is sent only there; an API key comes from the environment variable "
        "`WAFERLINE_ENGINE_API_KEY`, never from settings. In VS Code a machine setting (a workspace cannot set it). "
        "See docs/remote.md.",
        machine=True,
    )
    engine_fallback: bool = option(
        True,
        ENGINE,
        "With `engineUrl` (and `chatEngineUrl`): load the local model too, and let it answer whenever the remote "
        "engine cannot (unreachable at start, or failing); a background probe finds the remote engine again as soon "
        "as it is back. `false`: no local model; a remote engine that is down gets no suggestions.",
        machine=True,
    )
    engine_dialect: str = option(
        "auto",
        ENGINE,
        "How to speak to `engineUrl`. With `auto` the server is probed at start (llama-server's `/props`, Ollama's "
        "`/api/tags`, `/v1/models`) and each dialect it answers is used in that order: an endpoint that answers HTTP "
        "400, 404, 405 or 501 is given up for the session and the next dialect found answers.",
        choices=("auto", "llama-server", "openai", "ollama"),
        choice_docs={
            "auto": "probe the server and use what it answers",
            "llama-server": "llama.cpp's `/infill`, one cache slot per document",
            "openai": "OpenAI-compatible `/v1/completions` (vLLM, llama-server, LM Studio), waferline's FIM text",
            "ollama": "Ollama's `/api/generate` with `raw: true`",
        },
        machine=True,
    )
    engine_model: str | None = option(
        None,
        ENGINE,
        "The model to ask `engineUrl` for (Ollama and OpenAI-compatible servers default to the first they list; "
        "llama-server serves the one it loaded).",
        machine=True,
    )
    engine_fim_template: str = option(
        "auto",
        ENGINE,
        "The fill-in-the-middle layout of the remote model's family, written by waferline as text. `auto`: "
        "`qwen2.5-coder` for the `openai` and `ollama` dialects, and llama-server's own `/infill` (its FIM tokens come "
        "from the model file); a family sends llama-server waferline's text through `/completion` instead "
        "(`waferline` for the shipped model exported as GGUF, whose suffix-prefix-middle layout `/infill` does not "
        "write).",
        choices=("auto", "qwen2.5-coder", "waferline", "starcoder2", "deepseek-coder", "codellama"),
        machine=True,
    )
    chat_engine: str = option(
        "auto",
        ENGINE,
        "Which engine serves chat-style work: hover summaries, `waferline/ask` and code actions (their "
        "fill-in-the-middle and their instructions alike), independently of the engine of inline completions. A "
        "remote chat engine is taken to follow instructions (ask and the rewrite action use it); with "
        "`engineFallback` the local model answers when it cannot. See docs/chat-model.md and docs/remote.md.",
        choices=("auto", "same", "local", "remote"),
        choice_docs={
            "auto": "`local` when `chatModel` names a model or `waferline fetch-model` has put one in the cache and "
            "completions are local, else `same`",
            "same": "the engine of inline completions (`engineUrl`, or the local model)",
            "local": "the local model `chatModel` (or the fetched one, or `model`), also when completions come from "
            "`engineUrl`",
            "remote": "the server at `chatEngineUrl`",
        },
    )
    chat_model: str | None = option(
        None,
        ENGINE,
        "The local model for chat-style work: a GGUF file or a Hugging Face model directory with a chat template "
        "(as `model` names one), an instruction model beside the small one that types. It loads in the background; "
        "one that cannot be loaded is reported once and the model that types answers instead. `null`: the model "
        "`waferline fetch-model` put in the user's cache (`~/.cache/waferline/models`), if any, else the `model` "
        "option's, loaded once for both. See docs/chat-model.md.",
    )
    chat_engine_url: str | None = option(
        None,
        ENGINE,
        "With `chatEngine: remote`: the base URL of the server for chat-style work (as `engineUrl`; it may be the "
        "same server). Code is sent only there. In VS Code a machine setting.",
        machine=True,
    )
    chat_engine_dialect: str = option(
        "auto",
        ENGINE,
        "How to speak to `chatEngineUrl` (as `engineDialect`).",
        choices=("auto", "llama-server", "openai", "ollama"),
        machine=True,
    )
    chat_engine_model: str | None = option(
        None,
        ENGINE,
        "The model to ask `chatEngineUrl` for (as `engineModel`).",
        machine=True,
    )
    chat_engine_fim_template: str = option(
        "auto",
        ENGINE,
        "The fill-in-the-middle layout of the chat engine's model, for hover summaries and code actions that fill in "
        "code (as `engineFimTemplate`).",
        choices=("auto", "qwen2.5-coder", "waferline", "starcoder2", "deepseek-coder", "codellama"),
        machine=True,
    )
    backend: str = option(
        "cpu",
        ENGINE,
        "Hardware backend the engine runs on (docs/hardware.md).",
        choices=backend_names(),
        choice_docs={"wafer": "the wafer-scale engine emulator"},
    )
    max_tokens: int = option(
        32, COMPLETION, "New tokens for a single-line completion (the rest of a statement).", minimum=1, maximum=512
    )
    max_multiline_tokens: int = option(
        64,
        COMPLETION,
        "New tokens when the cursor opens a block or sits on an empty line inside one (no more than `maxTokens` "
        "while several documents are typed in at once, when the engine answers each in turn).",
        minimum=1,
        maximum=1024,
    )
    dtype: str = option(
        "auto",
        ENGINE,
        "Weight format. int8 streams a quarter of float32's bytes per token and decoded 3–4x faster on the 2-core "
        "machines with the same greedy tokens in our checks.",
        choices=(AUTO, *WEIGHT_FORMATS),
        choice_docs={
            "auto": "`int8` on the torch backends, `float32` on the wafer emulator",
            "int8": "weight-only, per-row scales, bfloat16 activations",
        },
    )
    threads: int = option(
        0,
        ENGINE,
        "CPU threads for the model's math. `0` lets the engine choose: one thread for models under 50M parameters (on "
        "a small machine a second thread mostly waits for a core busy with the event loop), all cores but one above "
        "(the one left to the editor), and every core for a larger model's prompt chunks (bound by arithmetic). A "
        "number sets both.",
        minimum=0,
        maximum=256,
    )
    speculate: bool = option(
        True,
        ENGINE,
        "Speculative decoding in the local engine: drafts from n-gram lookup over the prompt, verified several tokens "
        "per model step, the same tokens as without it (greedy), used only where the backend verifies exactly "
        "(docs/engine.md).",
    )
    kv_cache_mb: int = option(
        256,
        ENGINE,
        "Memory cap on the KV caches of all open documents together (one session per document); the least recently "
        "used document's session is evicted when a new one needs room.",
        minimum=8,
        maximum=1 << 20,
    )
    time_budget_ms: int = option(
        120,
        COMPLETION,
        "Wall-clock cap on one generation (prefill included); what was decoded by then is trimmed to a syntactic "
        'boundary and shown. Within the "instant" zone on purpose: a later answer would mostly be superseded by the '
        "next keystroke.",
        minimum=10,
        maximum=60_000,
    )
    temperature: float = option(
        0.0,
        COMPLETION,
        "Sampling temperature; 0 is greedy (the same text for the same prompt).",
        minimum=0,
        maximum=2,
    )
    min_confidence: float = option(
        0.10,
        COMPLETION,
        "Hide a suggestion whose confidence (the calibrated chance that it is exactly right, "
        "syntax/confidence.py) is below this, when the editor asks by itself as the user types. 0 shows "
        "every suggestion that passes the syntax and repetition checks. The default was chosen on the evaluation's "
        "choosing part and checked on distributions kept aside (docs/benchmarks-quality.md): there it showed a "
        "suggestion on 47% of requests, 43% of them exactly right. An engine that reports no token probabilities is "
        "not gated.",
        minimum=0,
        maximum=1,
    )
    min_confidence_invoked: float = option(
        0.05,
        COMPLETION,
        "The same threshold when the user asks explicitly (the editor's trigger-suggestion key): lower, since a user "
        "who asks wants something to look at (on the distributions kept aside, 0.05 shows 49% of requests, 35% of "
        "them exactly right).",
        minimum=0,
        maximum=1,
    )
    complete_in_strings: bool = option(
        True,
        COMPLETION,
        "Suggest inside a string literal as the user types (a dictionary key, a format string, a version, an "
        "`__all__` entry), gated by `minConfidence` like any other suggestion; comments are left alone. Off: only the "
        "trigger-suggestion key asks there. On the evaluation's choosing part, 7% of cursors in code lines are inside "
        "a string; suggesting there added 0.9 points of exactly right suggestions over all requests at the default "
        "gate (docs/benchmarks-quality.md).",
    )
    prompt_lookup: bool = option(
        True,
        COMPLETION,
        "Offer the model completions of the line copied from the rest of the document (the text that followed the "
        "same characters elsewhere, the most similar line); it shows one when it finds it likelier than its own.",
    )
    typed_through_cache: bool = option(
        True,
        COMPLETION,
        "When what the user typed is the start of the suggestion on screen, answer the rest at once without the model. "
        "The same for a suggestion the confidence gate held back: its rest is shown once its own tokens are confident "
        "enough, and until then the keystroke is answered empty without asking the model again.",
    )
    precompute: bool = option(
        True,
        COMPLETION,
        "After a suggestion from the model is shown and the engine is idle, compute the suggestion that would follow "
        "it once accepted; any keystroke's request preempts this work.",
    )
    warm_up: bool = option(
        True,
        COMPLETION,
        "Before the first keystroke: when a document is opened or focused (the clients' `waferline/didFocus`) and "
        "after an edit no request followed, prefill the prompt the next suggestion at the cursor needs into the "
        "document's KV cache while the engine is idle, decoding nothing; any request preempts it (docs/engine.md).",
    )
    next_edit: bool = option(
        True,
        COMPLETION,
        "Serve next-edit suggestions (`textDocument/copilotInlineEdit`, `waferline/inlineEdit`): after an edit, the "
        "edit that should follow it anywhere in the document, and the fallbacks for clients without the request "
        '(an inline completion item on the cursor\'s line, the code action "Apply the predicted edit"); '
        "docs/next-edit.md.",
    )
    next_edit_model: bool = option(
        False,
        COMPLETION,
        "When no structural next edit is found, ask the model to rewrite the lines around the cursor (the old lines as "
        "its speculative draft) and show where it departs from them. Off by default: the shipped model was not "
        "trained for next edits (docs/next-edit.md).",
    )
    next_edit_min_confidence: float = option(
        0.5,
        COMPLETION,
        "The model's next edit is shown only when the geometric mean probability of the tokens that changed "
        "reaches this.",
        minimum=0.0,
        maximum=1.0,
    )
    completion_fallback: bool = option(
        True,
        COMPLETION,
        "Serve `textDocument/completion` (the suggestion as one menu item) to clients that lack "
        "`textDocument/inlineCompletion`. Clients that have inline completion always get an empty menu, so a "
        "suggestion is never shown twice.",
    )
    max_document_bytes: int = option(
        4_000_000,
        COMPLETION,
        "Larger documents (and binary ones, with NUL bytes) are kept in sync but never completed.",
        minimum=1024,
    )
    # Repository features (server/repository/, features/hover.py, ask.py, actions/; docs/repository.md).
    index_workspace: bool = option(
        True,
        REPOSITORY,
        "Index the workspace folders with tree-sitter in the background (with `$/progress`). `false`: no index, so "
        "hovers are empty, `waferline/ask` has no evidence and the completion prompt gets no definitions from other "
        "files; code actions still work.",
    )
    index_cache_dir: str | None = option(
        None,
        REPOSITORY,
        "Where indexes persist between runs, one SQLite file per workspace folder; `null` is "
        "`$XDG_CACHE_HOME/waferline/index` (`~/.cache/waferline/index`).",
    )
    repository_context: bool = option(
        False,
        REPOSITORY,
        "Put definitions from other files, of the names used in the prompt's window, at the start of the completion "
        "prompt and of code actions' prompts (before the document's own context, so typing keeps them in the KV "
        "cache). Off by default: on the evaluation's kept-aside distributions the shipped model, which was never "
        "trained with such snippets, was not more often right with them, and within the default time budget it was "
        "right 4 points less often, the longer prompt taking the time (docs/benchmarks-quality.md). Turn it on for a "
        "model that uses cross-file context.",
    )
    hover_summary: bool = option(
        True,
        REPOSITORY,
        "A model-written one-line summary in hovers of definitions without a docstring, marked as generated. It is "
        "written while the engine is idle and shown from the next hover of that definition on.",
    )
    hover_summary_ms: int = option(
        2000,
        REPOSITORY,
        "Time budget of one summary; a keystroke's completion request preempts it at once.",
        minimum=50,
        maximum=60_000,
    )
    ask_max_tokens: int = option(
        256,
        REPOSITORY,
        "New tokens of a generated `waferline/ask` answer (instruction-following models only).",
        minimum=1,
        maximum=4096,
    )
    ask_time_budget_ms: int = option(
        20_000,
        REPOSITORY,
        "Wall-clock cap on one generated answer; what was written by then is shown.",
        minimum=100,
        maximum=600_000,
    )
    action_max_tokens: int = option(
        256,
        REPOSITORY,
        "New tokens of a code action's rewrite (a docstring takes at most 160).",
        minimum=1,
        maximum=4096,
    )
    action_time_budget_ms: int = option(
        15_000,
        REPOSITORY,
        "Wall-clock cap on one code action's generation; a cut-short result is checked like any other.",
        minimum=100,
        maximum=600_000,
    )
    regenerate_temperature: float = option(
        0.8,
        REPOSITORY,
        'Sampling temperature of "regenerate this statement or block", so that each run gives another candidate '
        "(the other actions are greedy).",
        minimum=0,
        maximum=2,
    )
