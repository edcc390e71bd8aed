"""The server's options: one keyword-only dataclass, read from `initializationOptions` and `didChangeConfiguration`.

docs/configuration.md documents every field here and the editor clients mirror it; keep the three in step. Names
on the wire are camelCase (`maxTokens`), as VS Code settings are. A bad value never stops the server: it is
reported once (log and `window/showMessage`) and the default is used in its place.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from waferline.hardware.registry import backend_names, describe_backends

log = logging.getLogger(__name__)

# The section name clients nest our settings under: {"waferline": {...}} in settings.json or init options.
SECTION = "waferline"


@dataclass(kw_only=True, frozen=True)
class Options:
    enable: bool = True  # answer completion requests at all
    model: str | None = None  # checkpoint directory or preset name; None = the shipped default model
    backend: str = "cpu"  # hardware backend the engine runs on: cpu, cuda, wafer
    max_tokens: int = 32  # new tokens for a single-line completion
    max_multiline_tokens: int = 64  # new tokens when the cursor opens a block or sits on an empty line in one
    dtype: str = "auto"  # weights: auto (int8 on cpu/cuda, float32 on wafer), float32, bfloat16, float16, int8
    threads: int = 0  # CPU threads for the model's math; 0 = the engine's choice (1 for models under 50M parameters)
    kv_cache_mb: int = 256  # memory cap on the KV caches of all open documents; least recently used evicted
    time_budget_ms: int = 120  # wall-clock cap on one generation; what was decoded by then is trimmed and shown
    temperature: float = 0.0  # 0 = greedy
    typed_through_cache: bool = True  # answer from the suggestion on screen when the user types its start
    precompute: bool = True  # when idle, compute the next suggestion as if the shown one were accepted
    completion_fallback: bool = True  # serve textDocument/completion too, for clients without inline completion
    max_document_bytes: int = 4_000_000  # larger documents are kept in sync but not completed
    # Repository features (server/indexing.py, hover.py, ask.py, actions/; docs/repository.md).
    index_workspace: bool = True  # index the workspace folders (hover, waferline/ask, completion context)
    index_cache_dir: str | None = None  # where indexes persist; None = $XDG_CACHE_HOME/waferline/index
    repository_context: bool = True  # put definitions from other files of names near the cursor in the prompt
    hover_summary: bool = True  # a model-written one-line summary in hovers of definitions without a docstring
    hover_summary_ms: int = 2000  # time budget of one such summary (it runs only while the engine is idle)
    ask_max_tokens: int = 256  # new tokens of a generated waferline/ask answer
    ask_time_budget_ms: int = 20_000  # wall-clock cap on one generated answer
    action_max_tokens: int = 256  # new tokens of a code action's rewrite
    action_time_budget_ms: int = 15_000  # wall-clock cap on one code action's generation
    regenerate_temperature: float = 0.8  # sampling temperature of "regenerate": another candidate each time


# Wire name -> field name, and the checks a value must pass beyond its type.
_WIRE = {
    "".join(p if i == 0 else p.capitalize() for i, p in enumerate(f.name.split("_"))): f.name
    for f in dataclasses.fields(Options)
}
_RANGES: dict[str, Callable[[Any], bool]] = {
    "backend": lambda v: v in backend_names(),
    "max_tokens": lambda v: 1 <= v <= 512,
    "max_multiline_tokens": lambda v: 1 <= v <= 1024,
    "time_budget_ms": lambda v: 10 <= v <= 60_000,
    "kv_cache_mb": lambda v: 8 <= v <= 1 << 20,
    "threads": lambda v: 0 <= v <= 256,
    "dtype": lambda v: v in ("auto", "float32", "bfloat16", "float16", "int8"),
    "temperature": lambda v: 0.0 <= v <= 2.0,
    "max_document_bytes": lambda v: v >= 1024,
    "hover_summary_ms": lambda v: 50 <= v <= 60_000,
    "ask_max_tokens": lambda v: 1 <= v <= 4096,
    "ask_time_budget_ms": lambda v: 100 <= v <= 600_000,
    "action_max_tokens": lambda v: 1 <= v <= 4096,
    "action_time_budget_ms": lambda v: 100 <= v <= 600_000,
    "regenerate_temperature": lambda v: 0.0 <= v <= 2.0,
}
_RANGE_TEXT = {
    "backend": f"one of {describe_backends()}",
    "max_tokens": "an integer from 1 to 512",
    "max_multiline_tokens": "an integer from 1 to 1024",
    "time_budget_ms": "an integer from 10 to 60000",
    "kv_cache_mb": "an integer of at least 8",
    "threads": "an integer from 0 to 256",
    "dtype": "one of auto, float32, bfloat16, float16, int8",
    "temperature": "a number from 0 to 2",
    "max_document_bytes": "an integer of at least 1024",
    "hover_summary_ms": "an integer from 50 to 60000",
    "ask_max_tokens": "an integer from 1 to 4096",
    "ask_time_budget_ms": "an integer from 100 to 600000",
    "action_max_tokens": "an integer from 1 to 4096",
    "action_time_budget_ms": "an integer from 100 to 600000",
    "regenerate_temperature": "a number from 0 to 2",
}


def wire_name(field_name: str) -> str:
    return next(k for k, v in _WIRE.items() if v == field_name)


def _coerce(name: str, value: Any, default: Any) -> Any:
    """The value converted to the field's type, or raise ValueError saying what was expected."""
    expected = type(default) if default is not None else str
    if expected is bool:
        if not isinstance(value, bool):
            raise ValueError("expected true or false")
        return value
    if expected is int:
        if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value:
            raise ValueError(f"expected {_RANGE_TEXT.get(name, 'an integer')}")
        value = int(value)
    elif expected is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"expected {_RANGE_TEXT.get(name, 'a number')}")
        value = float(value)
    elif expected is str:
        if value is None and default is None:
            return None
        if not isinstance(value, str):
            raise ValueError("expected a string")
    if name in _RANGES and not _RANGES[name](value):
        raise ValueError(f"expected {_RANGE_TEXT[name]}")
    return value


def section_of(settings: Any) -> Mapping[str, Any] | None:
    """Our settings inside what a client sent: {"waferline": {...}}, or the flat mapping itself."""
    if not isinstance(settings, Mapping):
        return None
    inner = settings.get(SECTION)
    if isinstance(inner, Mapping):
        return inner
    return settings


def parse_options(settings: Any, base: Options) -> tuple[Options, list[str]]:
    """Options updated from a client's settings, and one message per bad or unknown value (its default used).

    Fields the settings do not name keep their value in `base`; a bad value falls back to the dataclass default,
    not to `base`, so that what the user sees documented is what they get.
    """
    section = section_of(settings)
    if settings is not None and section is None:
        return base, [f"settings must be an object, got {type(settings).__name__}; keeping the current options"]
    changes: dict[str, Any] = {}
    problems: list[str] = []
    defaults = Options()
    for key, value in (section or {}).items():
        name = _WIRE.get(key)
        if name is None:
            problems.append(f"unknown option {SECTION}.{key} (ignored)")
            continue
        default = getattr(defaults, name)
        try:
            changes[name] = _coerce(name, value, default)
        except ValueError as e:
            problems.append(f"option {SECTION}.{key} = {value!r}: {e}; using the default {default!r}")
            changes[name] = default
    return dataclasses.replace(base, **changes), problems


def options_table() -> list[tuple[str, str, str]]:
    """(wire name, default as JSON-ish text, type) for every option: what docs/configuration.md lists."""
    rows = []
    for f in dataclasses.fields(Options):
        default = f.default
        text = "null" if default is None else str(default).lower() if isinstance(default, bool) else repr(default)
        rows.append((wire_name(f.name), text, str(f.type)))
    return rows
