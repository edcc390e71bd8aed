"""How `waferline eval-editor` asks the server: each case opened, one inline completion at its cursor, closed.

Two settings of the editor around the cases (benchmarks/editor_eval.py):

- a lone file (the default): each case is a document opened in an empty temporary folder, the first suggestion on a
  freshly opened third-party file, which is what a new user sees. Nothing outside the document can reach the prompt.
- `workspace`: the files of the cases' distributions are written into a folder the client opens as its workspace
  (the server indexes it, and the first case is asked only once it reports the index built), and each case is opened
  at its own file's path, so repository snippets (definitions from the distribution's other files) can join the
  prompt. With `recent_edit` as well, a region the user "just worked on" elsewhere in the package joins the prompt
  too: another file of the case's distribution (never the case's own: its region could hold the expected line) is
  open, one of its code lines retyped (a didChange) and left to settle (server/features/recent_edits.py only takes
  regions still for RECENT_EDIT_SETTLE_S). It is opened from a folder beside the workspace, so that the case's own
  file can be open at its path at the same time. Each distribution has two such files, A and B, drawn by the seed:
  its cases are asked with A edited, then those in A with B edited (one edited document open at a time; the
  answers keep the cases' order). A distribution of one file gets none.

This is the setting of the context ablation (docs/benchmarks-quality.md): the same cases with the repository
snippets, the recent edit and prompt lookup each taken away.
"""

from __future__ import annotations

import asyncio
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from waferline.server.features.recent_edits import RECENT_EDIT_SETTLE_S

INDEX_TIMEOUT_S = 300.0


def utf16_position(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset)
    start = text.rfind("\n", 0, offset) + 1
    return line, len(text[start:offset].encode("utf-16-le")) // 2


def _quality_of(item: Any) -> tuple[float | None, dict[str, float] | None]:
    """The server puts its confidence and features in the accept command's last argument."""
    args = item.command.arguments if item.command is not None else None
    if args and isinstance(args[-1], dict) and args[-1].get("confidence") is not None:
        return float(args[-1]["confidence"]), args[-1].get("features")
    return None, None


def edited_files(cases: Sequence[Any], files: dict[str, str], seed: int) -> dict[str, tuple[str, str]]:
    """distribution -> (A, B): two of its files, drawn by the seed, whose edits the run makes (module docstring);
    none for a distribution of one file."""
    rng = random.Random(f"recent-edit-{seed}")
    out = {}
    for dist in sorted({c.path.split("/", 1)[0] for c in cases}):
        mine = sorted(p for p in files if p.startswith(dist + "/"))
        if len(mine) >= 2:
            a, b = rng.sample(mine, 2)
            out[dist] = (a, b)
    return out


def asking_order(cases: Sequence[Any], edits: dict[str, tuple[str, str]]) -> list[tuple[int, str | None]]:
    """(case index, the file edited while it is asked) in the order the cases are asked: by distribution, those
    with A edited first, then those in A with B; in the cases' own order when nothing is edited."""
    if not edits:
        return [(i, None) for i in range(len(cases))]
    order = []
    for i, c in enumerate(cases):
        pair = edits.get(c.path.split("/", 1)[0])
        edited = None if pair is None else (pair[1] if c.path == pair[0] else pair[0])
        order.append((c.path.split("/", 1)[0], edited != (pair[0] if pair else None), i, edited))
    return [(i, edited) for *_, i, edited in sorted(order, key=lambda t: (t[0], t[1], t[2]))]


async def ask_all(
    cases: Sequence[Any], *, model: str | None, backend: str, options: dict[str, Any], invoked: bool, quiet: bool,
    workspace: dict[str, str] | None = None, recent_edit: bool = False, seed: int = 0,
) -> list[dict[str, Any]]:  # fmt: skip
    """Each case through one server: open, one inline completion at the cursor, close. `workspace` (relative path ->
    text of every file of the cases' distributions) turns on the workspace setting (module docstring)."""
    from lsprotocol import types

    trigger = types.InlineCompletionTriggerKind.Invoked if invoked else types.InlineCompletionTriggerKind.Automatic
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "workspace"
        root.mkdir()
        opts = dict(options)
        if workspace is not None:
            for rel, source in workspace.items():
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                (root / rel).write_text(source, encoding="utf-8")
            opts.setdefault("indexCacheDir", str(Path(tmp) / "index-cache"))
        client = WorkspaceClient(model=model, backend=backend)
        await client.start(opts, root if workspace is not None else None)
        edits = edited_files(cases, workspace, seed) if workspace is not None and recent_edit else {}
        answers: list[dict[str, Any] | None] = [None] * len(cases)
        try:
            await client.wait_for_engine()
            if workspace is not None:
                await client.wait_for_index()
            edited_now: str | None = None
            for done, (i, edited) in enumerate(asking_order(cases, edits)):
                case = cases[i]
                if edited != edited_now and workspace is not None:
                    if edited_now is not None:
                        client.close((Path(tmp) / "elsewhere" / edited_now).as_uri())
                    if edited is not None:
                        await client.edit_elsewhere(Path(tmp) / "elsewhere" / edited, workspace[edited], seed)
                    edited_now = edited
                path = root / case.path if workspace is not None else root / f"case{i:05d}.py"
                client.open(path, case.document)
                line, character = utf16_position(case.document, case.offset)
                params = types.InlineCompletionParams(
                    text_document=types.TextDocumentIdentifier(uri=client.uri),
                    position=types.Position(line=line, character=character),
                    context=types.InlineCompletionContext(trigger_kind=trigger),
                )
                t0 = time.perf_counter()
                result = await client.client.text_document_inline_completion_async(params)
                latency = (time.perf_counter() - t0) * 1000.0
                items = [] if result is None else list(result.items if hasattr(result, "items") else result)
                text, confidence, feats = None, None, None
                if items and isinstance(items[0].insert_text, str):
                    confidence, feats = _quality_of(items[0])
                    text = items[0].insert_text  # the server's range starts at the cursor
                answers[i] = {"suggestion": text, "confidence": confidence, "features": feats, "latency_ms": latency}
                client.close(client.uri)
                if not quiet and (done + 1) % 50 == 0:
                    print(f"  {i + 1}/{len(cases)} cases", file=sys.stderr)
        finally:
            await client.stop()
    return [a for a in answers if a is not None]


class WorkspaceClient:
    """TypingClient (cli/typing_session.py) with a workspace folder named at initialize, and what the workspace
    setting needs: waiting for the index, closing a document, an edit in another document."""

    def __init__(self, *, model: str | None, backend: str) -> None:
        from waferline.cli.typing_session import TypingClient

        self.typing = TypingClient(model=model, backend=backend)
        self.client = self.typing.client

    @property
    def uri(self) -> str:
        return self.typing.uri

    async def start(self, options: dict[str, Any], root: Path | None) -> None:
        if root is None:
            await self.typing.start(options)
            return
        # TypingClient.start with a workspace folder: initialize's root and folders are all that differ.
        original = self.client.initialize_async

        async def initialize(params: Any) -> Any:
            from lsprotocol import types

            params.root_uri = root.as_uri()
            params.workspace_folders = [types.WorkspaceFolder(uri=root.as_uri(), name=root.name)]
            return await original(params)

        self.client.initialize_async = initialize  # type: ignore[method-assign]
        try:
            await self.typing.start(options)
        finally:
            self.client.initialize_async = original  # type: ignore[method-assign]

    async def wait_for_engine(self) -> None:
        await self.typing.wait_for_engine()

    async def wait_for_index(self, timeout_s: float = INDEX_TIMEOUT_S) -> None:
        """Until the server's log says the workspace is indexed (server/repository/workspace.py's news)."""
        deadline = time.monotonic() + timeout_s
        while not any("indexed" in m and "files in" in m for m in self.typing.messages):
            if time.monotonic() > deadline:
                raise OSError(f"the server did not index the workspace in {timeout_s:.0f} s: {self.typing.messages}")
            await asyncio.sleep(0.05)

    def open(self, path: Path, text: str) -> None:
        self.typing.open(path, text)

    def close(self, uri: str) -> None:
        from lsprotocol import types

        self.client.text_document_did_close(
            types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )

    async def edit_elsewhere(self, path: Path, text: str, seed: int) -> None:
        """Open `path` (kept open until closed), retype one of its code lines, and wait until the server takes the
        edited region as settled."""
        from lsprotocol import types

        from waferline.training.editor_cases import _code_lines

        lines = _code_lines(text)
        if not lines:
            return
        start, line = random.Random(f"edit-{seed}-{path.name}").choice(lines)
        uri = path.as_uri()
        item = types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=item))
        number = text.count("\n", 0, start)
        rng = types.Range(start=types.Position(line=number, character=0),
                          end=types.Position(line=number, character=len(line.encode("utf-16-le")) // 2))  # fmt: skip
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
                content_changes=[types.TextDocumentContentChangePartial(range=rng, text=line)],
            )
        )
        await asyncio.sleep(RECENT_EDIT_SETTLE_S + 0.2)

    async def stop(self) -> None:
        await self.typing.stop()
