"""The VS Code extension's settings mirror docs/configuration.md one to one, and the docs the server's options.

editor-clients/vscode/scripts/sync_settings.py derives `contributes.configuration` from the docs; this test fails
when someone changes one without the other (the message says which command brings them back in step).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

from waferline.server.options import options_table

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "editor-clients" / "vscode" / "scripts" / "sync_settings.py"
FIX = "run `python editor-clients/vscode/scripts/sync_settings.py`"


def sync_settings() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sync_settings", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_contributed_settings_equal_the_documented_options() -> None:
    sync = sync_settings()
    package = json.loads(sync.PACKAGE.read_text())
    documented = sync.documented_options(sync.DOCS.read_text())
    expected = sync.contributed_properties(package, documented)
    actual = package["contributes"]["configuration"]["properties"]
    assert list(actual) == list(expected), f"settings differ from docs/configuration.md: {FIX}"
    for key, schema in expected.items():
        assert actual[key] == schema, f"{key} differs from docs/configuration.md: {FIX}"


def test_documented_options_are_the_server_options() -> None:
    sync = sync_settings()
    documented = sync.documented_options(sync.DOCS.read_text())
    server = {name: default for name, default, _type in options_table()}
    assert set(documented) == set(server), "docs/configuration.md and server/options.py list different options"
    for name, schema in documented.items():
        default = schema["default"]
        text = "null" if default is None else str(default).lower() if isinstance(default, bool) else repr(default)
        assert text == server[name], f"{name}: documented default {text}, server default {server[name]}"


def test_the_documented_range_reaches_the_setting() -> None:
    sync = sync_settings()
    schema = sync.documented_options("| option | default | effect |\n|---|---|---|\n| `n` | `3` | Integer 1–512. |\n")
    assert schema == {
        "n": {"type": "integer", "default": 3, "minimum": 1, "maximum": 512, "markdownDescription": "Integer 1–512."}
    }
