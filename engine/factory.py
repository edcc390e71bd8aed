"""The engine the options ask for, built on the engine thread when the server loads it (server/worker.py): the one
module besides engine/api.py that the server imports of the engine, so that it alone knows which engine classes exist.

Inline completions come from the local model, or from `engineUrl` with the local model behind it
(`engineFallback`); chat-style work (hover summaries, `waferline/ask`, code actions) from the same engine, the local
`chatModel`, or `chatEngineUrl` (`chatEngine`), joined by engine/routing.py. A local model both need is loaded once.
With `chatEngine: auto` (the default) a chat model named by `chatModel`, or else one `waferline fetch-model` put in
the user's cache (engine/model_cache.py), serves chat-style work while the local model types; it loads in the
background, the model that types answering in its place until it is ready or if it fails (engine/deferred.py).
A remote completion engine that cannot be reached at start is built again in the background until it answers; the
local model answers meanwhile when it is the fallback, else requests fail as to a remote engine that is down (the
user is told once); a remote chat engine that cannot be reached never takes inline completions down with it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from waferline.engine.api import Engine
from waferline.engine.model_cache import cached_chat_model
from waferline.hardware.registry import AUTO, WEIGHT_FORMATS, backend_names

# What the server's options name a backend and a weight format by (the hardware registry's table, through here).
__all__ = ["AUTO", "WEIGHT_FORMATS", "EngineOptions", "backend_names", "build_engine"]


class EngineOptions(Protocol):
    """What building an engine reads of the options (the server's `Options` is one; its fields say what each means)."""

    @property
    def model(self) -> str | None: ...
    @property
    def backend(self) -> str: ...
    @property
    def dtype(self) -> str: ...
    @property
    def threads(self) -> int: ...
    @property
    def speculate(self) -> bool: ...
    @property
    def kv_cache_mb(self) -> int: ...
    @property
    def engine_url(self) -> str | None: ...
    @property
    def engine_fallback(self) -> bool: ...
    @property
    def engine_dialect(self) -> str: ...
    @property
    def engine_model(self) -> str | None: ...
    @property
    def engine_fim_template(self) -> str: ...
    @property
    def chat_engine(self) -> str: ...
    @property
    def chat_model(self) -> str | None: ...
    @property
    def chat_engine_url(self) -> str | None: ...
    @property
    def chat_engine_dialect(self) -> str: ...
    @property
    def chat_engine_model(self) -> str | None: ...
    @property
    def chat_engine_fim_template(self) -> str: ...


def build_engine(options: EngineOptions) -> Engine:
    loaded: dict[str | None, Engine] = {}

    def local(model: str | None) -> Engine:
        if model not in loaded:
            loaded[model] = _local_engine(options, model)
        return loaded[model]

    completion = _remote_or_local(
        options, options.engine_url, options.engine_dialect, options.engine_model, options.engine_fim_template,
        chat=False, local=lambda: local(options.model),
    )  # fmt: skip
    chat_engine, fetched = options.chat_engine, options.chat_model or cached_chat_model()
    if chat_engine == "auto":  # a chat model named or fetched, and keystrokes on the local model: that chat model
        chat_engine = "local" if fetched is not None and not options.engine_url else "same"
    if chat_engine == "same":
        return completion
    from waferline.engine.routing import RoutedEngine

    chat_model = options.chat_model or options.model
    if chat_engine == "local":
        if fetched is None or str(fetched) == str(options.model):
            chat = local(chat_model)
            return completion if chat is completion else RoutedEngine(completion, chat)
        # Another model than the one that types: loaded in the background, the keystrokes' engine answering
        # chat-style work until it is ready, and for good if it cannot be loaded (engine/deferred.py).
        from waferline.engine.deferred import DeferredEngine

        model = str(fetched)
        return RoutedEngine(completion, DeferredEngine(model, lambda: _chat_model(options, model), completion))
    if not options.chat_engine_url:
        raise ValueError("chatEngine is remote but chatEngineUrl is not set")
    # Unreachable at start: built again in the background like a completion engine (engine/fallback.py); without a
    # fallback its chat-style work is refused with the reason meanwhile, and inline completions are not touched.
    chat = _remote_or_local(
        options, options.chat_engine_url, options.chat_engine_dialect, options.chat_engine_model,
        options.chat_engine_fim_template, chat=True, local=lambda: local(chat_model),
    )  # fmt: skip
    return RoutedEngine(completion, chat)


def _remote_or_local(
    options: EngineOptions, url: str | None, dialect: str, model: str | None, fim_template: str, *, chat: bool,
    local: Callable[[], Engine],
) -> Engine:  # fmt: skip
    """The remote engine at `url` (with `local()` behind it when `engineFallback`), or `local()` without a URL."""
    if not url:
        return local()
    from waferline.engine.fallback import FallbackEngine
    from waferline.engine.remote.engine import RemoteEngine
    from waferline.engine.remote.stream import RemoteError

    def connect() -> RemoteEngine:
        return RemoteEngine(
            dialect,  # type: ignore[arg-type]  # one of DIALECTS: the option's choices
            url,
            model=model,
            fim_template=None if fim_template == "auto" else fim_template,
            chat=chat,
        )

    try:
        remote = connect()
    except RemoteError as e:  # tried again in the background, answered by the local model meanwhile if it is behind
        return FallbackEngine(None, local() if options.engine_fallback else None, reason=str(e), connect=connect)
    return FallbackEngine(remote, local()) if options.engine_fallback else remote


def _chat_model(options: EngineOptions, model: str) -> Engine:
    """The local chat model, as `_local_engine` loads a model but leaving torch's threads as the keystrokes' model
    set them (the two share the process): the threads its fused step chooses are its own (`model_threads`)."""
    from waferline.engine.loader import load, model_threads
    from waferline.engine.local import LocalEngine

    if not Path(model).expanduser().exists():
        raise FileNotFoundError(f"no such file or directory: {model}")
    loaded = load(model, backend=options.backend, weights=options.dtype)
    model_threads(options.threads or None, loaded.args.n_params, loaded.model)
    engine = LocalEngine(
        loaded,
        kv_cache_bytes=options.kv_cache_mb << 20,
        speculate=options.speculate,
    )
    engine.first_run()
    return engine


def _local_engine(options: EngineOptions, model: str | None) -> Engine:
    from waferline.engine.local import LocalEngine

    return LocalEngine.load(
        model,
        backend=options.backend,
        weights=options.dtype,
        kv_cache_mb=options.kv_cache_mb,
        threads=options.threads,
        speculate=options.speculate,
    )
