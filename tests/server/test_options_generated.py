"""The files generated from server/options.py are current, and the JSON schema judges values as parsing does.

The JSON schema is checked with a small validator of the keywords it uses (the test asserts it uses no others), so
that no schema library is needed.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from waferline.hardware.registry import backend_names
from waferline.server import options_schema
from waferline.server.option_parsing import DECLARED, Declared, listed_options, options_table, parse_options
from waferline.server.options import Options
from waferline.server.options_schema import (
    DOCS,
    ROOT,
    SCHEMA,
    VSCODE_CLIENT_SETTINGS,
    VSCODE_PACKAGE,
    generated_files,
    json_schema,
    vscode_properties,
    with_docs_tables,
)

FIX = "run `make options` (python -m waferline.server.options_schema --write)"
LISTED = listed_options()

# -- the generated files are current ---------------------------------------------------------------------------------


@pytest.mark.parametrize("path", list(generated_files()), ids=lambda p: str(p.relative_to(ROOT)))
def test_generated_file_is_current(path: Path) -> None:
    assert path.read_text(encoding="utf-8") == generated_files()[path], f"{path.relative_to(ROOT)} is stale: {FIX}"


def test_contributed_settings_equal_the_declared_options() -> None:
    package = json.loads((ROOT / VSCODE_PACKAGE).read_text())
    expected = vscode_properties(json.loads((ROOT / VSCODE_CLIENT_SETTINGS).read_text()))
    actual = package["contributes"]["configuration"]["properties"]
    assert list(actual) == list(expected), f"settings differ from server/options.py: {FIX}"
    for key, schema in expected.items():
        assert actual[key] == schema, f"{key} differs from server/options.py: {FIX}"


def documented_defaults(text: str) -> dict[str, str]:
    """{wire name: default as written} of every row inside the generated tables of docs/configuration.md."""
    tables = re.findall(r"<!-- options: \w+ .*?-->\n(.*?)<!-- end of options", text, re.S)
    assert tables, "docs/configuration.md has no marked options table"
    return dict(re.findall(r"^\| `(\w+)` \| `([^`]*)` \|", "".join(tables), re.M))


def test_documented_options_are_the_server_options() -> None:
    documented = documented_defaults((ROOT / DOCS).read_text())
    server = {name: default for name, default, _type in options_table()}
    assert set(documented) == {d.wire for d in LISTED}, (
        "docs/configuration.md and server/options.py list different options"
    )
    for name, default in documented.items():
        value = json.loads(default)
        text = "null" if value is None else str(value).lower() if isinstance(value, bool) else repr(value)
        assert text == server[name], f"{name}: documented default {text}, server default {server[name]}"


def test_the_declared_range_reaches_the_setting() -> None:
    properties = vscode_properties({})
    ranged = [d for d in LISTED if d.spec.minimum is not None or d.spec.maximum is not None]
    assert ranged, "some options have a range"
    for d in ranged:
        setting = properties[f"waferline.{d.wire}"]
        assert (setting.get("minimum"), setting.get("maximum")) == (d.spec.minimum, d.spec.maximum), d.wire
        assert json_schema()["properties"][d.wire].get("minimum") == d.spec.minimum, d.wire
    assert properties["waferline.maxTokens"]["markdownDescription"].endswith("Integer 1–512.")


def test_the_backends_are_the_registrys() -> None:
    (backend,) = [d for d in LISTED if d.name == "backend"]
    assert backend.spec.choices == backend_names()
    assert json_schema()["properties"]["backend"]["enum"] == list(backend_names())


def test_every_field_is_a_listed_option() -> None:
    assert [d.name for d in DECLARED] == [f.name for f in dataclasses.fields(Options)]
    assert sorted(d.wire for d in LISTED) == sorted(d.wire for d in DECLARED)


def test_docs_without_the_markers_are_refused() -> None:
    with pytest.raises(ValueError, match="one marked table per group"):
        with_docs_tables("# Configuration\n\n| option | default | effect |\n")


def test_the_writer_rewrites_what_is_stale_and_only_that(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name in (SCHEMA, DOCS, VSCODE_PACKAGE, VSCODE_CLIENT_SETTINGS):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    docs = tmp_path / DOCS
    docs.write_text(docs.read_text().replace("Integer 1–512.", "Integer 1–500."))
    (tmp_path / SCHEMA).unlink()
    assert options_schema.main(["--root", str(tmp_path)]) == 1, "a stale file fails the check"
    assert options_schema.main(["--root", str(tmp_path), "--write"]) == 0
    written = capsys.readouterr().out
    assert f"wrote {DOCS}" in written and f"wrote {SCHEMA}" in written and VSCODE_PACKAGE not in written
    assert options_schema.main(["--root", str(tmp_path)]) == 0
    assert docs.read_text() == (ROOT / DOCS).read_text()


# -- the schema judges values as parsing does ------------------------------------------------------------------------

_KEYWORDS = {"type", "default", "enum", "minimum", "maximum", "description"}


def _is(json_type: str, value: Any) -> bool:
    if json_type == "null":
        return value is None
    if json_type == "boolean":
        return isinstance(value, bool)
    if json_type == "string":
        return isinstance(value, str)
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if json_type == "integer":  # JSON Schema: any number without a fractional part, 16.0 included
        return number and (isinstance(value, int) or value.is_integer())
    assert json_type == "number", json_type
    return number


def violations(schema: dict[str, Any], settings: dict[str, Any]) -> list[str]:
    """What is wrong with `settings` for `schema`: the keywords that json_schema() writes, and no others."""
    problems = []
    for key, value in settings.items():
        prop = schema["properties"].get(key)
        if prop is None:
            assert schema["additionalProperties"] is False, "the schema names every option it allows"
            problems.append(f"{key}: not allowed")
            continue
        assert set(prop) <= _KEYWORDS, f"{key}: the schema uses keywords this validator does not check"
        types = prop["type"] if isinstance(prop["type"], list) else [prop["type"]]
        if not any(_is(t, value) for t in types):
            problems.append(f"{key}: not of type {types}")
        elif "enum" in prop and value not in prop["enum"]:
            problems.append(f"{key}: not one of {prop['enum']}")
        elif "minimum" in prop and value is not None and not value >= prop["minimum"]:
            problems.append(f"{key}: below {prop['minimum']}")
        elif "maximum" in prop and value is not None and not value <= prop["maximum"]:
            problems.append(f"{key}: above {prop['maximum']}")
    return problems


def test_the_schema_is_an_object_of_the_listed_options() -> None:
    schema = json_schema()
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert list(schema["properties"]) == [d.wire for d in LISTED]


def test_the_schema_accepts_the_defaults() -> None:
    defaults = Options()
    assert violations(json_schema(), {d.wire: getattr(defaults, d.name) for d in LISTED}) == []
    assert all(json_schema()["properties"][d.wire]["default"] == d.default for d in LISTED)


def candidates(d: Declared) -> list[Any]:
    """Values at and around what the option accepts: its default, its bounds and choices, and other types."""
    values: list[Any] = [d.default, None, True, False, 0, 1, -1, 0.5, 16.0, 1e9, "", "x", [], {}]
    for bound in (d.spec.minimum, d.spec.maximum):
        if bound is not None:
            values += [bound, bound - 1, bound + 1, bound - 0.5, bound + 0.5, float(bound)]
    values += [*d.spec.choices, *(c.upper() for c in d.spec.choices)]
    return values


def _agree(d: Declared, value: Any) -> None:
    problems = parse_options({d.wire: value}, Options())[1]
    flagged = violations(json_schema(), {d.wire: value})
    assert bool(flagged) == bool(problems), f"{d.wire} = {value!r}: schema says {flagged}, parsing says {problems}"


@pytest.mark.parametrize("d", LISTED, ids=lambda d: d.wire)
def test_the_schema_rejects_what_parsing_rejects(d: Declared) -> None:
    for value in candidates(d):
        _agree(d, value)


json_values = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**7), 10**7), st.floats(allow_nan=False, allow_infinity=False), st.text()
)


@given(st.sampled_from(LISTED), json_values)
def test_the_schema_and_parsing_agree_on_any_value(d: Declared, value: Any) -> None:
    _agree(d, value)


def test_an_unknown_name_is_refused_by_both() -> None:
    assert violations(json_schema(), {"bogus": 1}) and parse_options({"bogus": 1}, Options())[1]
