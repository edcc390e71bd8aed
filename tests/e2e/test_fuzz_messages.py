"""Fuzzing the server over stdio with hypothesis: sessions of valid and invalid LSP messages (tests/support/
lsp_strategies.py), each checked for the invariants of tests/support/lsp_session.py (docs/reliability.md,
"Fuzzing and the stateful test").

One server process serves many sessions (each on fresh documents); lifecycle misuse gets fresh processes. Each test
runs once with a fixed seed and once with a random one (printed; set WAFERLINE_FUZZ_SEED to rerun it). A failure
prints hypothesis' smallest failing session as JSON lines that `python tests/support/replay_lsp.py` sends again.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fuzz_support import FIXED_TEXT, RANDOM_SEED, SEEDS, fuzz_settings
from hypothesis import Phase, given, note, seed
from hypothesis import strategies as st
from lsp_session import INTERNAL_ERROR, initialize_params, reproduction, run_session, start_server, tracebacks
from lsp_strategies import ENVELOPE_KINDS, Session, draw_session, texts
from lsp_support import SERVE, serve_command
from raw_lsp import RawClient

# Envelope, framing and lifecycle rules left unchecked (docs/reliability.md): any of the sessions' message kinds in
# lsp_strategies.ENVELOPE_KINDS, "second_initialize", "exit_code". All are checked.
PENDING: frozenset[str] = frozenset()


class Server:
    """One server process for a test's many sessions, started again if a session brought it down."""

    def __init__(self, command: list[str]) -> None:
        self.command = command
        self.client, self.encoding = start_server(command)

    def alive(self) -> RawClient:
        if not self.client.alive():
            self.client.stop()
            self.client, self.encoding = start_server(self.command)
        return self.client


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, Server]]:
    """The engine's test double answering at once, and one writing a character per 5 ms (so that requests are
    still running when the session cancels them or sends the next ones)."""
    started = {"fast": Server(serve_command(FIXED_TEXT)), "slow": Server(serve_command(FIXED_TEXT, 5.0))}
    yield started
    for server in started.values():
        server.client.stop()


def fail_with(problems: list[str], session: Session, fuzz_seed: int) -> None:
    if problems:
        note(f"fuzz seed {fuzz_seed} (WAFERLINE_FUZZ_SEED={fuzz_seed} to rerun); the session as JSON lines:")
        note(reproduction(session))
        raise AssertionError("\n".join(problems))


@SEEDS
@pytest.mark.parametrize("engine, examples", [("fast", 150), ("slow", 40)])
def test_fuzz_sessions(servers: dict[str, Server], engine: str, examples: int, fuzz_seed: int) -> None:
    """Bursts of valid and invalid messages on fresh documents, against the engine's test double."""
    print(f"fuzz seed {fuzz_seed}")
    server = servers[engine]

    @seed(fuzz_seed)
    @fuzz_settings(examples)
    @given(draw_session(enabled=ENVELOPE_KINDS - PENDING))
    def sessions(session: Session) -> None:
        fail_with(run_session(server.alive(), session), session, fuzz_seed)

    sessions()


def test_fuzz_sessions_on_a_5_mb_document(servers: dict[str, Server]) -> None:
    """A few sessions that open a 5 MB document first (edits, requests and closing it take their usual way)."""

    @seed(RANDOM_SEED)
    @fuzz_settings(3, phases=[Phase.generate])  # no shrinking: each example moves 5 MB each way
    @given(draw_session(max_steps=6, large=5 * 1024 * 1024))
    def sessions(session: Session) -> None:
        fail_with(run_session(servers["fast"].alive(), session, timeout=60), session, RANDOM_SEED)

    sessions()


@pytest.mark.slow
def test_fuzz_sessions_with_the_default_model() -> None:
    """A few sessions against `waferline serve` itself, so the tokenizer and tree-sitter see arbitrary text."""
    server = Server(SERVE)
    try:

        @seed(RANDOM_SEED)
        @fuzz_settings(10)
        @given(draw_session(max_steps=8))
        def sessions(session) -> None:
            fail_with(run_session(server.alive(), session, timeout=90), session, RANDOM_SEED)

        sessions()
    finally:
        server.client.stop()


@SEEDS
def test_fuzz_lifecycle(fuzz_seed: int) -> None:
    """Lifecycle misuse on fresh processes: requests before initialize are ServerNotInitialized (-32002),
    notifications then are dropped; a second initialize and requests after shutdown are InvalidRequest (-32600);
    exit ends the process, with code 0 after shutdown and 1 without."""

    @seed(fuzz_seed)
    @fuzz_settings(6)
    @given(
        st.lists(st.sampled_from(["request", "notify", "initialize", "shutdown"]), min_size=1, max_size=6),
        texts,
    )
    def lifecycle(plan: list[str], text: str) -> None:
        client = RawClient.start(serve_command(FIXED_TEXT))
        problems = []
        initialized = shut = False
        try:
            for i, step in enumerate(plan):
                if step == "initialize" and initialized and "second_initialize" in PENDING:
                    continue
                if step == "notify":
                    open_params = {"textDocument": {"uri": "file:///tmp/l.py", "languageId": "python", "version": 1,
                                                    "text": text}}  # fmt: skip
                    client.send({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": open_params})
                    continue
                method = {"request": "waferline/stats", "initialize": "initialize", "shutdown": "shutdown"}[step]
                params = initialize_params() if method == "initialize" else {}
                answer = client.request(method, params, i, timeout=60)
                code = (answer.get("error") or {}).get("code")
                want = None if initialized and not shut else -32002 if not initialized else -32600
                if method == "initialize":
                    want = -32600 if initialized else None
                    initialized = True
                if code != want or code == INTERNAL_ERROR:
                    when = "after shutdown" if shut else "initialized" if initialized else "before initialize"
                    problems.append(f"{method} ({when}): expected {want}, got {answer}")
                if method == "shutdown" and initialized:
                    shut = True
            client.send({"jsonrpc": "2.0", "method": "exit"})
            code = client.process.wait(20)
            if "exit_code" not in PENDING and code != (0 if shut else 1):
                problems.append(f"exit {'after' if shut else 'without'} shutdown ended the process with {code}")
            extra = [m for m in client.responses() if m.get("id") not in range(len(plan))]
            problems += [f"a response to an id never sent: {m}" for m in extra]
            problems += tracebacks(client.stderr)
        finally:
            client.stop()
        if problems:
            note(f"fuzz seed {fuzz_seed}; the session as JSON lines:\n" + "\n".join(client.sent))
            raise AssertionError("\n".join(problems))

    lifecycle()
