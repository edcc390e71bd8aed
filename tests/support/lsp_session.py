"""Run a drawn session (lsp_strategies.py) against a server (raw_lsp.py) and check the fuzzing invariants.

`run_session` makes the session's URIs and ids unique, writes every message without waiting (a burst), waits for
every request's answer and then for a last `waferline/stats` (so that a late stray response would be seen), and
returns the violations of:

- the process stays up;
- exactly one response per request id, and none for an id the session did not send as a request;
- each error code is one the spec allows for that request (lsp_strategies.py's `expect`), never InternalError
  (-32603) for a client mistake;
- no traceback or server file path in any response or message to the editor, no "internal error" popup;
- shown ranges (inline items, completion edits, code action edits) lie inside the document as the shadow has it;
- the server's copy of each document agrees with the shadow (`waferline/document`);
- the server's stderr has no traceback.

On a violation, `reproduction` gives the messages as JSON lines that tests/support/replay_lsp.py sends again.
"""

from __future__ import annotations

import itertools
import json
import re
import sys
from pathlib import Path
from typing import Any

from lsp_strategies import Session, Step
from raw_lsp import RawClient
from shadow_doc import ShadowDocument, position

INTERNAL_ERROR, INVALID_PARAMS, NOT_FOUND, CANCELLED = -32603, -32602, -32601, -32800
_TRACEBACK = re.compile(r"Traceback \(most recent call last\)|File \"[^\"]+\", line \d+")
_PATHS = re.compile("|".join(re.escape(p) for p in ("site-packages", sys.prefix, str(Path(__file__).parents[2]))))
_sessions = itertools.count(1)


def initialize_params(encoding: str | None = None, root: str | None = None) -> dict[str, Any]:
    caps: dict[str, Any] = {"textDocument": {"inlineCompletion": {}, "codeAction": {"resolveSupport": {"properties":
                            ["edit"]}}}, "workspace": {"configuration": True}}  # fmt: skip
    if encoding is not None:
        caps["general"] = {"positionEncodings": [encoding]}
    return {"processId": None, "rootUri": root, "capabilities": caps, "initializationOptions": {"waferline": {}}}


def start_server(command: list[str], encoding: str | None = None) -> tuple[RawClient, str]:
    """A started and initialized server, and the position encoding it chose."""
    client = RawClient.start(command)
    answer = client.request("initialize", initialize_params(encoding), "init", timeout=120)
    client.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    chosen = answer["result"]["capabilities"].get("positionEncoding") or "utf-16"
    return client, chosen


class Servers:
    """One server per position encoding for a test module, started on first use and again if it died; `stop`
    ends them all (a module-scoped fixture calls it)."""

    def __init__(self, command: list[str]) -> None:
        self.command = command
        self.running: dict[str, RawClient] = {}

    def get(self, encoding: str) -> RawClient:
        client = self.running.get(encoding)
        if client is None or not client.alive():
            client, chosen = start_server(self.command, encoding)
            assert chosen == encoding, f"asked for {encoding} positions, the server chose {chosen}"
            self.running[encoding] = client
        return client

    def stop(self) -> None:
        for client in self.running.values():
            client.stop()
        self.running.clear()


def _concrete(value: Any, prefix: str) -> Any:
    if isinstance(value, str) and value.startswith("@D"):
        return f"file:///tmp/waferline-fuzz/{prefix}/d{value[2:]}.py"
    if isinstance(value, dict):
        return {k: _concrete(v, prefix) for k, v in value.items()}
    if isinstance(value, list):
        return [_concrete(v, prefix) for v in value]
    return value


def _with_id(message: Any, msg_id: str) -> Any:
    if isinstance(message, dict) and "id" in message and message["id"] is None:
        return {**message, "id": msg_id}
    if isinstance(message, list):
        return [_with_id(m, f"{msg_id}.{i}") for i, m in enumerate(message)]
    return message


def run_session(client: RawClient, session: Session, *, timeout: float = 30.0) -> list[str]:
    """Send the session and return what went wrong (empty: every invariant held)."""
    n = next(_sessions)
    prefix = f"s{n}"
    start_msg, start_err, start_sent = len(client.received), len(client.stderr), len(client.sent)
    ids: dict[str, Step] = {}
    for i, step in enumerate(session.steps):
        msg_id = f"{prefix}-{i}"
        message = _with_id(_concrete(step.message, prefix), msg_id)
        if step.cancels is not None:
            message["params"]["id"] = f"{prefix}-{step.cancels}"
        if isinstance(message, list):  # a batch: each request in it is answered (in one array), by its own id
            ids.update({m["id"]: Step(m, "result", "batch") for m in message if isinstance(m, dict) and "id" in m})
        elif step.expect is not None:
            ids[msg_id] = step
        if isinstance(message, dict) and set(message) == {"raw"}:
            client.send_bytes(message["raw"].encode("utf-8"))
        else:
            client.send(message)
    if "reordered-requests" in KNOWN_FAILURES:
        ids = {k: _loosened(step, session.steps[int(k.rsplit("-", 1)[1]) + 1 :]) for k, step in ids.items()}
    required = [i for i, step in ids.items() if step.expect != "optional"]
    problems = []
    if not client.wait_for_ids(required, start=start_msg, timeout=timeout):
        problems.append(f"unanswered after {timeout:.0f} s: {sorted(set(required) - _answered(client, start_msg))}")
    cancelled = {f"{prefix}-{s.cancels}" for s in session.steps if s.cancels is not None}
    if client.alive():
        client.request("waferline/stats", {}, f"{prefix}-end", timeout=timeout)
        problems += _check_documents(client, session, prefix)
    else:
        problems.append(f"the server exited (code {client.process.poll()})")
    problems += _check_responses(client, start_msg, ids, cancelled, session, prefix)
    problems += tracebacks(client.stderr[start_err:])
    session.sent = client.sent[start_sent:]
    return problems


# Known violations of the transport and JSON-RPC layer, tolerated while they are open: named here so that each can
# be switched back on (docs/reliability.md).
# - "logged-client-error": a traceback logged for a client mistake that was answered (InvalidParams...);
# - "reordered-requests": a request answered for its document as a later message of the burst left it (the
#   transport hands every message of a chunk over before any asynchronous handler starts): such a request may get
#   either answer, and its ranges are not checked.
KNOWN_FAILURES: set[str] = set()


_DOCUMENT_NOTIFICATIONS = ("textDocument/didOpen", "textDocument/didChange", "textDocument/didClose")


def _uri(step: Step) -> Any:
    params = step.message.get("params") if isinstance(step.message, dict) else None
    document = params.get("textDocument") if isinstance(params, dict) else None
    return document.get("uri") if isinstance(document, dict) else None


def _loosened(step: Step, later: list[Step]) -> Step:
    """A request whose document a later message of the session changes may be answered for either state."""
    touched = {_uri(s) for s in later if isinstance(s.message, dict) and s.message.get("method") in
               _DOCUMENT_NOTIFICATIONS}  # fmt: skip
    if step.expect in ("result", "invalid_params") and _uri(step) in touched:
        return Step(step.message, "any", step.kind, step.cancels, None)
    return step


def tracebacks(lines: list[str]) -> list[str]:
    """Each traceback in the server's stderr, with the log line before it (its cause) and its last line; a
    traceback pygls logs for a client's mistake it answered (InvalidParams...) is "logged-client-error"."""
    out = []
    for j, line in enumerate(lines):
        if line.startswith("Traceback"):
            end = next((k for k in range(j + 1, len(lines)) if not lines[k].startswith((" ", "Traceback"))), j)
            text = "".join(lines[max(j - 1, 0) : end + 1]).strip()
            client_error = lines[end].startswith("pygls.exceptions.JsonRpc") and "InternalError" not in lines[end]
            if not (client_error and "logged-client-error" in KNOWN_FAILURES):
                out.append(f"stderr: {text}")
    return out


def leaked(message: dict[str, Any]) -> str | None:
    """What of the server's internals a message shows: a traceback anywhere; in an error or a message shown to the
    user, also a path of the server's checkout or Python. (Results may name paths on purpose: `waferline/stats`
    says where the model was loaded from.)"""
    text = json.dumps(message, ensure_ascii=False)
    if (m := _TRACEBACK.search(text)) is not None:
        return m.group(0)
    shown = message.get("error") or (message.get("params") if message.get("method") == "window/showMessage" else None)
    if shown is not None and (m := _PATHS.search(json.dumps(shown, ensure_ascii=False))) is not None:
        return m.group(0)
    return None


def _answered(client: RawClient, start: int) -> set[str]:
    return {str(m.get("id")) for m in client.responses(start)}


def _check_responses(
    client: RawClient, start: int, ids: dict[str, Step], cancelled: set[str], session: Session, prefix: str
) -> list[str]:
    problems = []
    counts: dict[str, int] = {}
    own = {*ids, f"{prefix}-end"} | {f"{prefix}-doc{k}" for k in range(len(session.docs) + 8)}
    received = [m for ms in client.received[start:] for m in (ms if isinstance(ms, list) else [ms])]  # batches
    for m in received:
        text = json.dumps(m, ensure_ascii=False)
        if (leak := leaked(m)) is not None:
            problems.append(f"internals ({leak!r}) in a message: {text[:300]}")
        if m.get("method") == "window/showMessage" and "internal error" in str(m.get("params")):
            problems.append(f"an internal error shown to the user: {text[:300]}")
        if "method" in m:
            continue
        key = m.get("id")
        if not isinstance(key, str) or key not in own:
            if not any(s.kind in ("object_id", "batch", "bad_frame") for s in session.steps):
                problems.append(f"a response to an id never sent as a request: {text[:300]}")
            continue
        counts[key] = counts.get(key, 0) + 1
        step = ids.get(key)
        if step is not None:
            problems += [f"{key} ({step.kind}): {p}" for p in _check_answer(m, step, key in cancelled, session)]
    problems += [f"{k} answered {c} times" for k, c in counts.items() if c > 1]
    return problems


def _check_answer(m: dict[str, Any], step: Step, cancelled: bool, session: Session) -> list[str]:
    error = m.get("error")
    code = error.get("code") if isinstance(error, dict) else None
    if code == INTERNAL_ERROR:
        return [f"internal error for a client message: {error}"]
    if error is not None and cancelled and code == CANCELLED:
        return []
    expected = {"result": None, "invalid_params": INVALID_PARAMS, "not_found": NOT_FOUND}.get(step.expect or "")
    if step.expect in ("result", "invalid_params", "not_found") and code != expected:
        return [f"expected {step.expect}, got {error if error is not None else 'a result'}"]
    if error is None:
        return _check_ranges(m.get("result"), step, session)
    return []


def _check_ranges(result: Any, step: Step, session: Session) -> list[str]:
    """Ranges the client shows (inline items, completion edits, a resolved code action's edits) must lie inside the
    document as it was when the request arrived."""
    rngs = []
    if step.kind == "inline" and isinstance(result, dict):
        rngs = [i["range"] for i in result.get("items", []) if i.get("range")]
    elif step.kind == "completion" and isinstance(result, dict):
        rngs = [i["textEdit"]["range"] for i in result.get("items", []) if i.get("textEdit")]
    elif step.kind == "codeAction/resolve" and isinstance(result, dict) and isinstance(result.get("edit"), dict):
        edit = result["edit"]
        edits = [e for es in (edit.get("changes") or {}).values() for e in es]
        edits += [e for dc in edit.get("documentChanges") or [] for e in dc.get("edits", [])]
        rngs = [e["range"] for e in edits]
    if step.doc is None and step.expect == "any":
        return []  # the document as the request found it is not known (KNOWN_FAILURES: reordered-requests)
    return [f"a shown range outside the document: {r}" for r in rngs if not range_inside(r, step.doc)]


def range_inside(rng: dict[str, Any], doc: ShadowDocument | None) -> bool:
    start, end = rng["start"], rng["end"]
    return doc is not None and doc.inside(start) and doc.inside(end) and position(start) <= position(end)


def _check_documents(client: RawClient, session: Session, prefix: str) -> list[str]:
    """The server's copy of each document the session opened and changed only with well-formed params."""
    problems = []
    for k, (slot, shadow) in enumerate(sorted(session.docs.items())):
        if slot not in session.clean:
            continue
        uri = _concrete(shadow.uri, prefix)
        got = client.request("waferline/document", {"uri": uri}, f"{prefix}-doc{k}")
        problems += state_problems(got, shadow)
    return problems


def state_problems(response: dict[str, Any], shadow: ShadowDocument) -> list[str]:
    """How the server's `waferline/document` answer differs from the shadow's state."""
    if "result" not in response:
        return [f"{shadow.uri}: waferline/document answered {response.get('error')}"]
    result, want = response["result"], shadow.state()
    diff = {k: (result.get(k), v) for k, v in want.items() if result.get(k) != v}
    return [f"{shadow.uri}: server (left) and shadow (right) differ: {diff}"] if diff else []


def reproduction(session: Session) -> str:
    """The session's messages as JSON lines, for tests/support/replay_lsp.py."""
    return "\n".join(session.sent)
