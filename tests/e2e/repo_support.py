"""A pytest-lsp session on a copy of the polyglot fixture repository, with its index cached under the test's tmp dir.

The client answers what the repository features ask of an editor: `client/registerCapability` (file watchers) and
`workspace/applyEdit` (commands that edit), recording both so tests can check them.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from lsp_support import capabilities, serve_command
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

FIXTURE = Path(__file__).resolve().parents[1] / "server" / "fixtures" / "repos" / "polyglot"


def copy_fixture(tmp_path: Path) -> Path:
    root = (tmp_path / "polyglot").resolve()
    shutil.copytree(FIXTURE, root)
    return root


@contextlib.asynccontextmanager
async def repo_session(
    root: Path, cache: Path, options: dict[str, Any] | None = None, editor: str = "vscode",
    caps: types.ClientCapabilities | None = None, *, fixed_text: str | None = None, token_delay_ms: float = 0.0,
) -> AsyncIterator[LanguageClient]:  # fmt: skip
    """A started and initialized server whose workspace folder is `root` (the test double writing `fixed_text`, when
    given); `caps` replace the editor's."""
    client = await ClientServerConfig(server_command=serve_command(fixed_text, token_delay_ms)).start()
    assert isinstance(client, LanguageClient)
    client.registrations = []  # type: ignore[attr-defined]
    client.applied_edits = []  # type: ignore[attr-defined]

    @client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def register(params: types.RegistrationParams) -> None:
        client.registrations.extend(params.registrations)  # type: ignore[attr-defined]

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def apply_edit(params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        client.applied_edits.append(params.edit)  # type: ignore[attr-defined]
        return types.ApplyWorkspaceEditResult(applied=True)

    settings = {"indexCacheDir": str(cache), **(options or {})}
    try:
        await client.initialize_session(
            types.InitializeParams(
                capabilities=caps or capabilities(editor),
                initialization_options={"waferline": settings},
                root_uri=root.as_uri(),
                workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name=root.name)],
            )
        )
        yield client
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(client.shutdown_session(), 10)
        await asyncio.wait_for(client.stop(), 10)


async def wait_indexed(client: LanguageClient, timeout: float = 30.0) -> list[Any]:
    """The progress values of the indexing, once it has ended."""
    for _ in range(int(timeout / 0.05)):
        for token, values in client.progress_reports.items():
            if str(token).startswith("waferline-index") and values and values[-1].kind == "end":
                return values
        await asyncio.sleep(0.05)
    raise AssertionError(f"indexing did not end: {client.progress_reports}")


def open_file(client: LanguageClient, path: Path, language_id: str = "python") -> str:
    uri = path.as_uri()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id=language_id, version=1, text=path.read_text())
        )
    )
    return uri


def position_of(text: str, needle: str, delta: int = 0) -> types.Position:
    """The position of the first `needle` in `text` (plus `delta` characters; ASCII text)."""
    offset = text.index(needle) + delta
    line = text.count("\n", 0, offset)
    return types.Position(line=line, character=offset - (text.rfind("\n", 0, offset) + 1))
