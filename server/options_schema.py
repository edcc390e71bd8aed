"""The files generated from the options declared in server/options.py, and the command that writes them.

Pure functions over `options.listed_options()` render each listing of the options:

- `json_schema()`: a JSON schema of the `waferline` settings section, shipped as server/options.schema.json;
- `with_docs_tables(text)`: docs/configuration.md with one table per group between its marker comments
  (`<!-- options: GROUP ... -->` and `<!-- end of options: GROUP -->`), the prose around them kept;
- `with_vscode_settings(package, client)`: the VS Code extension's package.json with `contributes.configuration`
  made of one `waferline.<wireName>` setting per option, then the editor-side settings, which are declared in
  editor-clients/vscode/client-settings.json (src/settings.ts reads the same file to tell them apart).

The Neovim plugin passes its `settings` through untouched and lists no options, so nothing of it is generated.
tests/server/test_options_generated.py fails when a generated file is not current; regenerate them with

    python -m waferline.server.options_schema --write      (or `make options`)
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from waferline.server.option_parsing import Declared, listed_options, plain_number
from waferline.server.option_spec import GROUPS, SECTION

# Where the generated files are, relative to the checkout's root.
SCHEMA = "server/options.schema.json"
DOCS = "docs/configuration.md"
VSCODE_PACKAGE = "editor-clients/vscode/package.json"
VSCODE_CLIENT_SETTINGS = "editor-clients/vscode/client-settings.json"
ROOT = Path(__file__).resolve().parents[1]  # the checkout this module is in (an editable install)

_JSON_TYPE = {bool: "boolean", int: "integer", float: "number", str: "string"}
_TABLE = re.compile(
    r"(<!-- options: (?P<group>\w+) [^\n]*-->\n)(?P<table>.*?)(<!-- end of options: (?P=group) -->)", re.S
)


def constraint_text(d: Declared) -> str:
    """The sentence appended to an option's description: "Integer 1–512.", "One of `cpu`, `cuda`, `wafer`.", ..."""
    spec = d.spec
    if spec.choices:
        docs = spec.choice_docs
        return "One of " + ", ".join(f"`{c}` ({docs[c]})" if c in docs else f"`{c}`" for c in spec.choices) + "."
    noun = {int: "Integer", float: "Number"}.get(d.kind)
    low, high = spec.minimum, spec.maximum
    if noun is None or (low is None and high is None):
        return ""
    if low is not None and high is not None:
        return f"{noun} {plain_number(low)}–{plain_number(high)}."
    if low is not None:
        return f"{noun} ≥ {plain_number(low)}."
    assert high is not None
    return f"{noun} ≤ {plain_number(high)}."


def description(d: Declared) -> str:
    """What the option does and what it accepts, one line of markdown."""
    return " ".join(part for part in (d.spec.doc, constraint_text(d)) if part)


def _value_schema(d: Declared) -> dict[str, Any]:
    """The JSON schema keywords of the option's values, shared by the schema file and the VS Code setting."""
    schema: dict[str, Any] = {"type": [_JSON_TYPE[d.kind], "null"] if d.nullable else _JSON_TYPE[d.kind]}
    schema["default"] = d.default
    if d.spec.choices:
        schema["enum"] = list(d.spec.choices)
    if d.spec.minimum is not None:
        schema["minimum"] = plain_number(d.spec.minimum)
    if d.spec.maximum is not None:
        schema["maximum"] = plain_number(d.spec.maximum)
    return schema


def json_schema() -> dict[str, Any]:
    """A JSON schema (draft 2020-12) of the `waferline` section of a client's settings."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "waferline server options",
        "description": f"The `{SECTION}` section of a client's settings or initializationOptions "
        "(docs/configuration.md). Generated from server/options.py by `make options`; do not edit.",
        "type": "object",
        "properties": {d.wire: {**_value_schema(d), "description": description(d)} for d in listed_options()},
        "additionalProperties": False,
    }


def docs_table(group: str) -> str:
    """The markdown table of one group's options: `| option | default | effect |`."""
    rows = ["| option | default | effect |", "|---|---|---|"]
    for d in listed_options():
        if d.spec.group == group:
            text = description(d)
            assert "|" not in text and "\n" not in text, f"{d.wire}: a table cell cannot hold its description"
            rows.append(f"| `{d.wire}` | `{json.dumps(d.default)}` | {text} |")
    return "\n".join(rows) + "\n"


def with_docs_tables(text: str) -> str:
    """docs/configuration.md with every group's table regenerated between its markers."""
    found = [m["group"] for m in _TABLE.finditer(text)]
    if sorted(found) != sorted(GROUPS):
        raise ValueError(f"{DOCS} must hold one marked table per group {list(GROUPS)}, found {found}")
    return _TABLE.sub(lambda m: m[1] + docs_table(m["group"]) + m[4], text)


def vscode_properties(client_settings: dict[str, Any]) -> dict[str, Any]:
    """`contributes.configuration.properties`: the options shown in VS Code in docs order, then the editor's own."""
    properties: dict[str, Any] = {}
    for order, d in enumerate(d for d in listed_options() if d.spec.vscode):
        setting = _value_schema(d)
        if d.spec.choice_docs:
            setting["markdownEnumDescriptions"] = [d.spec.choice_docs.get(c, "") for c in d.spec.choices]
        properties[f"{SECTION}.{d.wire}"] = {**setting, "markdownDescription": description(d), "order": order}
        if d.spec.machine:
            properties[f"{SECTION}.{d.wire}"]["scope"] = "machine"
    clash = set(properties) & set(client_settings)
    assert not clash, f"{VSCODE_CLIENT_SETTINGS} declares server options: {sorted(clash)}"
    return {**properties, **client_settings}


def _json_text(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


def with_vscode_settings(package_text: str, client_settings_text: str) -> str:
    """package.json's text with its settings regenerated (everything else kept as it is)."""
    package = json.loads(package_text)
    package["contributes"]["configuration"]["properties"] = vscode_properties(json.loads(client_settings_text))
    return _json_text(package)


def generated_files(root: Path = ROOT) -> dict[Path, str]:
    """Each generated file's path under `root` and the text it should have now."""
    docs, package, client = (root / DOCS, root / VSCODE_PACKAGE, root / VSCODE_CLIENT_SETTINGS)
    return {
        root / SCHEMA: _json_text(json_schema()),
        docs: with_docs_tables(docs.read_text(encoding="utf-8")),
        package: with_vscode_settings(package.read_text(encoding="utf-8"), client.read_text(encoding="utf-8")),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m waferline.server.options_schema",
        description="Write the files generated from server/options.py.",
    )
    parser.add_argument(
        "--write", action="store_true", help="write the files that are not current (else only list them)"
    )
    parser.add_argument("--root", type=Path, default=ROOT, help="the waferline checkout (default: %(default)s)")
    args = parser.parse_args(argv)
    if not (args.root / DOCS).is_file():
        parser.error(f"{args.root} is not a waferline checkout ({DOCS} is missing); pass --root")
    files = generated_files(args.root)
    stale = {
        path: text for path, text in files.items() if not path.is_file() or path.read_text(encoding="utf-8") != text
    }
    for path, text in stale.items():
        if args.write:
            path.write_text(text, encoding="utf-8")
        print(f"{'wrote' if args.write else 'not current:'} {path.relative_to(args.root)}")
    return 0 if args.write or not stale else 1


if __name__ == "__main__":
    sys.exit(main())
