"""Write the server options documented in docs/configuration.md into the extension's `contributes.configuration`.

docs/configuration.md is the one source of truth for the server's options; the extension contributes one VS Code
setting per option (`waferline.<name>`), with the documented default, a JSON type taken from it, the range the text
states ("Integer 1–512", "Number 0–2", "Integer ≥ 8") and the documented effect as its description. The settings
that only configure the editor side (CLIENT_ONLY) are kept as they are. tests/e2e/test_editor_settings.py fails when
package.json and the docs disagree; run this to bring them back in step:

    python editor-clients/vscode/scripts/sync_settings.py
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
DOCS = ROOT / "docs" / "configuration.md"
PACKAGE = ROOT / "editor-clients" / "vscode" / "package.json"
SECTION = "waferline"
CLIENT_ONLY = ("server.path", "server.args", "trace.server")

_ROW = re.compile(r"^\|\s*`(?P<name>[A-Za-z][A-Za-z0-9]*)`\s*\|\s*`(?P<default>[^`]*)`\s*\|\s*(?P<effect>.*?)\s*\|\s*$")
_RANGE = re.compile(r"\b(Integer|Number) (-?[\d.]+)\s*[–-]\s*(-?[\d.]+)")
_MINIMUM = re.compile(r"\b(Integer|Number) ≥ (-?[\d.]+)")


def documented_options(text: str) -> dict[str, dict[str, Any]]:
    """{name: VS Code setting schema} for every row of an `| option | default | effect |` table, in order."""
    options: dict[str, dict[str, Any]] = {}
    in_options_table = False
    for line in text.splitlines():
        if line.startswith("| option | default | effect |"):
            in_options_table = True
            continue
        if not line.startswith("|"):
            in_options_table = False
            continue
        match = _ROW.match(line)
        if in_options_table and match:
            options[match["name"]] = _schema(json.loads(match["default"]), match["effect"])
    return options


def _number(text: str) -> int | float:
    value = float(text)
    return int(value) if value.is_integer() else value


def _schema(default: Any, effect: str) -> dict[str, Any]:
    schema: dict[str, Any] = {}
    if isinstance(default, bool):
        schema["type"] = "boolean"
    elif isinstance(default, int):
        schema["type"] = "integer"
    elif isinstance(default, float):
        schema["type"] = "number"
    elif isinstance(default, str):
        schema["type"] = "string"
    else:
        assert default is None, f"unexpected default {default!r}"
        schema["type"] = ["string", "null"]
    schema["default"] = default
    if m := _RANGE.search(effect):
        schema["minimum"], schema["maximum"] = _number(m[2]), _number(m[3])
    elif m := _MINIMUM.search(effect):
        schema["minimum"] = _number(m[2])
    schema["markdownDescription"] = effect
    return schema


def contributed_properties(package: dict[str, Any], options: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The new `contributes.configuration.properties`: the documented options in order, then the client-only ones."""
    current = package["contributes"]["configuration"]["properties"]
    properties = {f"{SECTION}.{name}": {**schema, "order": i} for i, (name, schema) in enumerate(options.items())}
    for name in CLIENT_ONLY:
        key = f"{SECTION}.{name}"
        assert key in current, f"{key} missing from package.json"
        properties[key] = current[key]
    return properties


def main() -> int:
    package = json.loads(PACKAGE.read_text())
    package["contributes"]["configuration"]["properties"] = contributed_properties(
        package, documented_options(DOCS.read_text())
    )
    PACKAGE.write_text(json.dumps(package, indent=2, ensure_ascii=False) + "\n")
    print(f"{PACKAGE.relative_to(ROOT)}: {len(package['contributes']['configuration']['properties'])} settings")
    return 0


if __name__ == "__main__":
    sys.exit(main())
