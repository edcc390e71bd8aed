"""Reading settings against the declaration of `Options` (server/options.py): each field's wire name, type and
constraints, a settings object turned into new `Options` with one message per bad value, and the lists the
generated files (server/options_schema.py) and the engine rebuild (`ENGINE_OPTIONS`) are derived from.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from waferline.server.option_spec import ENGINE, GROUPS, SECTION, OptionSpec
from waferline.server.options import Options


@dataclass(frozen=True)
class Declared:
    """One field of `Options` as declared: what parsing and the generated files (options_schema.py) read."""

    name: str  # the field's name, `max_tokens`
    wire: str  # its name in settings, `maxTokens`
    kind: type  # bool, int, float or str
    nullable: bool  # `null` is a value of its own (`str | None`)
    default: Any
    spec: OptionSpec


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.capitalize() for p in rest)


def _declare(f: dataclasses.Field[Any], hint: Any) -> Declared:
    args = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    kinds = [a for a in args if a is not type(None)]
    assert len(kinds) == 1 and kinds[0] in (bool, int, float, str), f"{f.name}: unsupported option type {hint}"
    spec = f.metadata.get("option")
    assert spec is not None, f"{f.name}: declare every option with option(default, group, doc, ...)"
    assert spec.group in GROUPS, f"{f.name}: unknown group {spec.group!r}"
    assert set(spec.choice_docs) <= set(spec.choices), f"{f.name}: choice_docs names a value that is not a choice"
    return Declared(f.name, _camel(f.name), kinds[0], len(kinds) < len(args), f.default, spec)


_HINTS = typing.get_type_hints(Options)
DECLARED: tuple[Declared, ...] = tuple(_declare(f, _HINTS[f.name]) for f in dataclasses.fields(Options))
# The engine group: options the engine is built from, so that changing any of them rebuilds it.
ENGINE_OPTIONS: tuple[str, ...] = tuple(d.name for d in DECLARED if d.spec.group == ENGINE)
_BY_WIRE = {d.wire: d for d in DECLARED}


def listed_options() -> list[Declared]:
    """The options the generated files list, group by group in GROUPS order, each group in declaration order."""
    return sorted(DECLARED, key=lambda d: GROUPS.index(d.spec.group))


def plain_number(value: float) -> int | float:
    """`2` for 2.0, so that a bound reads as it was written ("from 0 to 2", `"maximum": 2`)."""
    return int(value) if float(value).is_integer() else value


def expected_text(d: Declared) -> str:
    """What a value of this option must be, as the message about a bad one says it ("an integer from 1 to 512")."""
    spec = d.spec
    if spec.choices:
        return "one of " + ", ".join(spec.choices)
    noun = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}[d.kind]
    if spec.minimum is not None and spec.maximum is not None:
        return f"{noun} from {plain_number(spec.minimum)} to {plain_number(spec.maximum)}"
    if spec.minimum is not None:
        return f"{noun} of at least {plain_number(spec.minimum)}"
    if spec.maximum is not None:
        return f"{noun} of at most {plain_number(spec.maximum)}"
    return noun


def _coerce(d: Declared, value: Any) -> Any:
    """The value converted to the option's type, or raise ValueError saying what was expected."""
    if d.nullable and value is None:
        return None
    if d.kind is bool:
        if not isinstance(value, bool):
            raise ValueError("expected true or false")
        return value
    if d.kind in (int, float):
        number = not isinstance(value, bool) and isinstance(value, int | float)
        if not number or (d.kind is int and isinstance(value, float) and not value.is_integer()):
            raise ValueError(f"expected {expected_text(d)}")
        try:
            value = d.kind(value)
        except OverflowError:  # an integer too large for a float
            raise ValueError(f"expected {expected_text(d)}") from None
    elif not isinstance(value, str):
        raise ValueError("expected a string")
    spec = d.spec
    if (
        (spec.choices and value not in spec.choices)
        or (spec.minimum is not None and not value >= spec.minimum)
        or (spec.maximum is not None and not value <= spec.maximum)
    ):
        raise ValueError(f"expected {expected_text(d)}")
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
    for key, value in (section or {}).items():
        declared = _BY_WIRE.get(key)
        if declared is None:
            problems.append(f"unknown option {SECTION}.{key} (ignored)")
            continue
        try:
            changes[declared.name] = _coerce(declared, value)
        except ValueError as e:
            problems.append(f"option {SECTION}.{key} = {value!r}: {e}; using the default {declared.default!r}")
            changes[declared.name] = declared.default
    return dataclasses.replace(base, **changes), problems


def options_table() -> list[tuple[str, str, str]]:
    """(wire name, default as JSON-ish text, type) for every field, the test double's included."""
    types_ = {f.name: str(f.type) for f in dataclasses.fields(Options)}
    rows = []
    for d in DECLARED:
        default = d.default
        text = "null" if default is None else str(default).lower() if isinstance(default, bool) else repr(default)
        rows.append((d.wire, text, types_[d.name]))
    return rows
