"""How `waferline eval-editor` asks the server: each case opened, one inline completion at its cursor, closed.

Two settings of the editor around the cases (benchmarks/editor_eval.py):

- a lone file (the default): each case is a document opened in an empty temporary folder, the first suggestion on a
  freshly opened third-party file, which is what a new user sees. Nothing outside the document can reach the prompt.
- `workspace`: the files of the cases' distributions are written into a folder the client opens as its workspace
  (the server indexes it, and the first case is asked only once it reports the index built), and each case is opened
  at its own file's path, so repository snippets (definitions from the distribution's other files) can join the
  prompt. With `recent_edit` as well, before a distribution's first case another of its files is opened and one of
  its code lines retyped (a didChange), then left to settle (server/features/recent_edits.py only takes regions
  still for RECENT_EDIT_SETTLE_S), so that a region the user "just worked on" elsewhere in the package joins the
  prompt too. That file is one no case of the run is in, chosen by the seed; a distribution without one gets none.

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


def edited_files(cases: Sequence[Any], files: dict[str, str], seed: int) -> dict[str, str]:
    """distribution -> the path of the file whose edit the run makes before that distribution's first case: one of
    its files no case is in, drawn by the seed (none when every file has a case)."""
    rng = random.Random(f"recent-edit-{seed}")
    with_cases = {c.path for c in cases}
    out = {}
    for dist in sorted({c.path.split("/", 1)[0] for c in cases}):
        free = sorted(p for p in files if p.startswith(dist + "/") and p not in with_cases)
        if free:
            out[dist] = rng.choice(free)
    return out


async def ask_all(
    cases: Sequence[Any], *, model: str | None, backend: str, options: dict[str, Any], invoked: bool, quiet: bool,
    workspace: dict[str, str] | None = None, recent_edit: bool = False, seed: int = 0,
) -> list[dict[str, Any]]:  # fmt: skip
    """Each case through one server: open, one inline completion at the cursor, close. `workspace` (relative path ->
    text of every file of the cases' distributions) turns on the workspace setting (module docstring)."""
    from lsprotocol import types

    trigger = types.InlineCompletionTriggerKind.Invoked if invoked else types.InlineCompletionTriggerKind.Automatic
    answers: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "workspace"
        root.mkdir()
        opts = dict(options)
        if workspace is not None:
            for rel, text in workspace.items():
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                (root / rel).write_text(text, encoding="utf-8")
            opts.setdefault("indexCacheDir", str(Path(tmp) / "index-cache"))
        client = WorkspaceClient(model=model, backend=backend)
        await client.start(opts, root if workspace is not None else None)
        edits = edited_files(cases, workspace, seed) if workspace is not None and recent_edit else {}
        try:
            await client.wait_for_engine()
            if workspace is not None:
                await client.wait_for_index()
            edited: set[str] = set()
            for i, case in enumerate(cases):
                dist = case.path.split("/", 1)[0]
                if dist in edits and dist not in edited:
                    edited.add(dist)
                    await client.edit_elsewhere(root / edits[dist], workspace[edits[dist]] if workspace else "", seed)
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
                answers.append({"suggestion": text, "confidence": confidence, "features": feats, "latency_ms": latency})
                client.close(client.uri)
                if not quiet and (i + 1) % 50 == 0:
                    print(f"  {i + 1}/{len(cases)} cases", file=sys.stderr)
        finally:
            await client.stop()
    return answers


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
        """Open `path` (kept open for the rest of the run), retype one of its code lines, and wait until the server
        takes the edited region as settled."""
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
