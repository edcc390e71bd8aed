"""A developer typing into a real source file, played through LSP against `waferline serve` as an editor starts it.

Shared by `waferline demo` (which renders the file and its ghost text as they change) and `waferline bench-lsp`
(which only measures); both end with the same figures (`summarize`, `print_table`). The client behaves like VS Code:
one incremental `didChange` per keystroke followed at once by a `textDocument/inlineCompletion` request, UTF-16
positions, and Tab on a suggestion that matches what the developer was about to type (the editor applies it and runs
the item's command, so the server counts the accept). Latency is measured per request: keystroke sent -> response
received.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.client import BaseLanguageClient

from waferline.hardware.registry import describe_backends, describe_formats
from waferline.server.stats import percentile

# What the developer types, at the end of the file: a few functions, each a handful of statements.
SCRIPT = """

def mean(values):
    total = 0
    for value in values:
        total += value
    return total / len(values)


def clamp(value, low, high):
    if value < low:
        return low
    if value > high:
        return high
    return value


def scale(rgb, factor):
    r, g, b = rgb
    return (clamp(r * factor, 0.0, 1.0), clamp(g * factor, 0.0, 1.0), clamp(b * factor, 0.0, 1.0))
"""
# A typist's rhythm: the base interval (1 / chars_per_s) after most keys, longer after a word or a line, where
# people pause to think (and where ghost text is most useful).
PAUSE_AFTER = {" ": 2.0, "\n": 6.0, ":": 3.0, ",": 2.0, "(": 1.5, ")": 1.5}
SOURCE_FILE = "colorsys.py"  # a real, small, permissively licensed module of the interpreter's standard library


def default_source() -> Path:
    path = Path(sysconfig.get_paths()["stdlib"]) / SOURCE_FILE
    if not path.is_file():
        raise OSError(f"{path} is missing: pass --file with a Python source file to type into")
    return path


@dataclass
class Request:
    keystroke: int  # index of the keystroke that sent it
    sent_at: float
    cursor: int  # `str` offset of the cursor when sent
    latency_ms: float | None = None
    suggestion: str | None = None  # what came back (None: empty answer)
    error: str | None = None


@dataclass
class Session:
    """Everything the client saw: the text as it is now, the cursor, the ghost text on screen, every request."""

    text: str
    cursor: int
    ghost: str = ""
    requests: list[Request] = field(default_factory=list)
    keystrokes: int = 0
    accepted: int = 0
    accepted_chars: int = 0
    server_stats: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0
    first_request_ms: float | None = None

    def position(self, offset: int | None = None) -> types.Position:
        """The LSP position (UTF-16) of an offset in the text."""
        offset = self.cursor if offset is None else offset
        line = self.text.count("\n", 0, offset)
        start = self.text.rfind("\n", 0, offset) + 1
        return types.Position(line=line, character=len(self.text[start:offset].encode("utf-16-le")) // 2)


def add_session_arguments(parser: argparse.ArgumentParser) -> None:
    """The options `demo` and `bench-lsp` share: which model, which file, how fast to type, how much of the script."""
    parser.add_argument("--model", help="model directory or preset (default: the shipped model)")
    parser.add_argument("--backend", default="cpu", help=f"hardware backend: {describe_backends()} (default: cpu)")
    parser.add_argument("--dtype", default="auto", help=f"weights: {describe_formats()}")
    parser.add_argument("--file", type=Path, help="Python file to type into (default: colorsys.py of the stdlib)")
    parser.add_argument(
        "--cps",
        type=float,
        default=12.0,
        help="keys per second within a word (default 12; pauses after words and lines are longer)",
    )
    parser.add_argument("--keys", type=int, help="type only the first KEYS characters of the script (a short run)")
    parser.add_argument("--log-file", help="the server's log file")


def check_session_args(args: Any) -> None:
    """Refuse the typing-session options that `demo` and `bench-lsp` share, before any server starts."""
    if args.cps <= 0:
        raise ValueError(f"--cps must be positive, got {args.cps}")
    if args.keys is not None and args.keys < 1:
        raise ValueError(f"--keys must be at least 1, got {args.keys}")
    if args.file is not None and not args.file.is_file():
        raise OSError(f"--file {args.file}: no such file")


def server_command(model: str | None, backend: str, log_file: str | None) -> list[str]:
    """`waferline serve`, run by this interpreter the way an editor would start it."""
    cmd = [sys.executable, "-m", "waferline.cli", "serve", "--backend", backend]
    if model:
        cmd += ["--model", model]
    if log_file:
        cmd += ["--log-file", log_file, "-v"]
    return cmd


class TypingClient:
    """An LSP client process-pair: starts the server, initializes it like VS Code, and types."""

    def __init__(self, *, model: str | None, backend: str, log_file: str | None = None) -> None:
        self.client = BaseLanguageClient("waferline-typist", "0.1.0")
        self.cmd = server_command(model, backend, log_file)
        self.uri = ""
        self.version = 0
        self._stderr: asyncio.Task[None] | None = None
        self.stderr_tail: list[str] = []
        self.messages: list[str] = []  # window/showMessage and window/logMessage, as an editor would show them

        @self.client.feature(types.WINDOW_LOG_MESSAGE)
        def log_message(params: types.LogMessageParams) -> None:
            self.messages.append(params.message)

        @self.client.feature(types.WINDOW_SHOW_MESSAGE)
        def show_message(params: types.ShowMessageParams) -> None:
            self.messages.append(params.message)

    async def start(self, options: dict[str, Any]) -> None:
        await self.client.start_io(*self.cmd)
        proc = self.client._server
        assert proc is not None and proc.stderr is not None
        self._stderr = asyncio.create_task(self._drain(proc.stderr))  # a full stderr pipe would block the server
        caps = types.ClientCapabilities(
            text_document=types.TextDocumentClientCapabilities(
                inline_completion=types.InlineCompletionClientCapabilities(),
                synchronization=types.TextDocumentSyncClientCapabilities(),
            ),
            general=types.GeneralClientCapabilities(position_encodings=[types.PositionEncodingKind.Utf16]),
        )
        await self.client.initialize_async(
            types.InitializeParams(capabilities=caps, initialization_options={"waferline": options})
        )
        self.client.initialized(types.InitializedParams())

    async def _drain(self, stream: asyncio.StreamReader) -> None:
        while line := await stream.readline():
            self.stderr_tail = [*self.stderr_tail[-20:], line.decode(errors="replace").rstrip()]

    def open(self, path: Path, text: str) -> None:
        self.uri, self.version = path.as_uri(), 1
        item = types.TextDocumentItem(uri=self.uri, language_id="python", version=1, text=text)
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=item))

    def focus(self, position: types.Position, uri: str | None = None) -> None:
        """`waferline/didFocus`, as the editor clients send it when a document becomes the active one."""
        params = {
            "textDocument": {"uri": uri or self.uri},
            "position": {"line": position.line, "character": position.character},
        }
        self.client.protocol.notify("waferline/didFocus", params)

    def insert(self, s: Session, new_text: str, end: int | None = None) -> None:
        """Replace [cursor, end) by `new_text` (a keystroke, or an accepted suggestion) and tell the server."""
        end = s.cursor if end is None else end
        rng = types.Range(start=s.position(), end=s.position(end))
        self.version += 1
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=self.uri, version=self.version),
                content_changes=[types.TextDocumentContentChangePartial(range=rng, text=new_text)],
            )
        )
        s.text = s.text[: s.cursor] + new_text + s.text[end:]
        s.cursor += len(new_text)

    async def request(self, s: Session, req: Request) -> types.InlineCompletionItem | None:
        params = types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri=self.uri),
            position=s.position(),
            context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Automatic),
        )
        try:
            result = await self.client.text_document_inline_completion_async(params)
        except Exception as e:  # an error answer is still an answer: record it, keep typing
            req.error = str(e)
            result = None
        req.latency_ms = (time.perf_counter() - req.sent_at) * 1000.0
        items = [] if result is None else list(result.items if hasattr(result, "items") else result)
        item = items[0] if items else None
        req.suggestion = item.insert_text if item is not None and isinstance(item.insert_text, str) else None
        return item

    async def stats(self) -> dict[str, Any]:
        result = await self.client.protocol.send_request_async("waferline/stats", {})
        plain = _plain(result)
        assert isinstance(plain, dict), f"waferline/stats answered {result!r}"
        return plain

    async def wait_for_engine(self, timeout_s: float = 300.0) -> None:
        """Until the server has its model loaded: loading is not typing latency."""
        deadline = time.monotonic() + timeout_s
        while (engine := (await self.stats()).get("engine")) == "no engine loaded":
            if time.monotonic() > deadline:
                raise OSError(f"the server did not load its model in {timeout_s:.0f} s: {self.stderr_tail[-3:]}")
            await asyncio.sleep(0.05)
        if str(engine).startswith("failed"):
            raise OSError(f"the server could not load its model: {engine}")

    async def stop(self) -> None:
        try:
            await asyncio.wait_for(self.client.shutdown_async(None), 10)
            self.client.exit(None)
        finally:
            await asyncio.wait_for(self.client.stop(), 10)
            if self._stderr is not None:
                self._stderr.cancel()


async def type_script(
    *, model: str | None = None, backend: str = "cpu", source: Path | None = None, script: str = SCRIPT,
    chars_per_s: float = 12.0, accept: bool = True, options: dict[str, Any] | None = None,
    on_change: Callable[[Session], None] | None = None, log_file: str | None = None,
) -> Session:  # fmt: skip
    """Type `script` at the end of a copy of `source`, one key at a time at `chars_per_s`, through the server."""
    path = source or default_source()
    original = path.read_text(encoding="utf-8")
    work = Path(tempfile.mkdtemp(prefix="waferline-typing-")) / path.name  # the editor's buffer, never the source
    work.write_text(original, encoding="utf-8")
    s = Session(text=original, cursor=len(original))
    typist = TypingClient(model=model, backend=backend, log_file=log_file)
    await typist.start(options or {})
    notify = on_change or (lambda _s: None)
    try:
        typist.open(work, original)
        typist.focus(s.position())  # VS Code's active editor is the file, its cursor where the typing begins
        await typist.wait_for_engine()
        # The editor asks once when the cursor lands in the file: without a warm-up (the server's `warmUp`, which the
        # focus above starts once the model is loaded) that request prefills the document's whole prompt into its KV
        # session. It is timed apart from the keystrokes (s.first_request_ms).
        first = Request(keystroke=0, sent_at=time.perf_counter(), cursor=s.cursor)
        await typist.request(s, first)
        s.first_request_ms = first.latency_ms
        pending: set[asyncio.Task[None]] = set()
        t0 = due = time.perf_counter()
        i = 0
        while i < len(script):
            typist.insert(s, script[i])
            i += 1
            s.keystrokes += 1
            s.ghost = ""
            req = Request(keystroke=s.keystrokes, sent_at=time.perf_counter(), cursor=s.cursor)
            s.requests.append(req)
            task = asyncio.ensure_future(_answer(typist, s, req, notify))
            pending.add(task)
            task.add_done_callback(pending.discard)
            notify(s)
            due += PAUSE_AFTER.get(script[i - 1], 1.0) / chars_per_s
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            if accept and s.ghost and req.suggestion == s.ghost and script.startswith(s.ghost, i):
                typist.insert(s, s.ghost)  # Tab: the suggestion is what the developer was about to type
                i += len(s.ghost)
                s.accepted += 1
                s.accepted_chars += len(s.ghost)
                await typist.client.workspace_execute_command_async(
                    types.ExecuteCommandParams(command="waferline.accept", arguments=[typist.uri, "demo"])
                )
                s.ghost = ""
                notify(s)
        await asyncio.gather(*pending)
        s.wall_s = time.perf_counter() - t0
        s.server_stats = await typist.stats()
    finally:
        await typist.stop()
    return s


def summarize(session: Any) -> dict[str, Any]:
    """The figures of one typing session under stable keys (bench-lsp's JSON, docs/benchmarks-lsp.md's table)."""
    answered = [r for r in session.requests if r.latency_ms is not None]
    lat = [r.latency_ms for r in answered]
    shown = [r.latency_ms for r in answered if r.suggestion]
    st = session.server_stats
    prompt, prefilled = st.get("prompt_tokens_total", 0), st.get("prefilled_tokens_total", 0)
    out: dict[str, Any] = {
        "engine": st.get("engine"),
        "keystrokes": session.keystrokes,
        "requests": len(session.requests),
        "answered": sum(1 for r in answered if r.suggestion),
        "empty": sum(1 for r in answered if not r.suggestion and not r.error),
        "errors": sum(1 for r in answered if r.error),
        "cancelled": st.get("cancelled"),
        "cache_answers": st.get("cache_answers"),
        "held_through": st.get("held_through"),
        "accepted": session.accepted,
        "accepted_chars": session.accepted_chars,
        "precomputed": st.get("precomputed"),
        "first_request_ms": _round(session.first_request_ms),
        "prompt_tokens_total": prompt,
        "prefilled_tokens_total": prefilled,
        "kv_reuse": round(1 - prefilled / prompt, 4) if prompt else None,
        "new_tokens_total": st.get("new_tokens_total"),
        "decode_tok_s": st.get("decode_tok_s"),
        # the same with the prompt tokens warm-ups prefilled counted as not from the cache (they were computed too)
        "kv_reuse_counting_warmups": round(1 - (prefilled + st.get("warmup_tokens", 0)) / prompt, 4)
        if prompt
        else None,
        "tokens_per_step": st.get("tokens_per_step"),  # speculative decoding: (steps + accepted drafts) / steps
        "draft_sources": st.get("draft_sources"),  # per source: drafted, accepted, acceptance
        "warmups": st.get("warmups"),
        "warmups_cancelled": st.get("warmups_cancelled"),
        "warmup_tokens": st.get("warmup_tokens"),
        "wall_s": round(session.wall_s, 2),
        "phase_ms_p50": st.get("phase_ms_p50"),  # in the server, per model answer: where the milliseconds go
    }
    for q in (50, 95, 99):
        out[f"latency_ms_p{q}"] = _round(percentile(lat, q))
    for q in (50, 95):
        out[f"shown_latency_ms_p{q}"] = _round(percentile(shown, q))  # requests that brought a suggestion
    return out


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 1)


def print_table(summary: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="waferline bench-lsp: one typing session through LSP", show_header=False)
    for key, value in summary.items():
        table.add_row(key, "—" if value is None else str(value))
    Console().print(table)


def _plain(value: Any) -> Any:
    """pygls hands custom results over as namedtuple-like Objects, nested: back to dicts and lists."""
    if hasattr(value, "_asdict"):
        return {k: _plain(v) for k, v in value._asdict().items()}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


async def _answer(typist: TypingClient, s: Session, req: Request, notify: Callable[[Session], None]) -> None:
    item = await typist.request(s, req)
    if item is not None and req.cursor == s.cursor and req.suggestion:
        s.ghost = req.suggestion  # still current: show it
        notify(s)
