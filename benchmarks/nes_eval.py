"""`waferline eval-nes`: next-edit suggestions replayed through the real server, against two baselines.

Each case (benchmarks/data/nes/, written from real code by benchmarks/nes_cases.py, and for JavaScript and TypeScript
by benchmarks/nes_cases_ts.py, for Go by benchmarks/nes_cases_go.py, for Rust, Java, C and C++ by
benchmarks/nes_cases_declared.py) is opened in `waferline serve` (in its language),
the user's edits are sent as an editor sends them (a structural case's rename as the old name selected and the new
one typed over it, key by key; a commit's hunks one change each), and `textDocument/copilotInlineEdit` is asked at
the end of the last edit, as a client asks after a pause in typing:

- structural cases: every suggestion is accepted (applied, then `waferline.acceptInlineEdit`) and asked again, at the
  end of the edit just accepted, until the server is silent; the case is right when the whole file is then exactly
  the intended one (a silent case: when the first answer is silence);
- commit cases: one request; right when the suggested edit makes the file what the commit's next hunk makes it
  (exact next hunk), with exact-lines F1 (the diff lines of the suggestion against the hunk's), and how often the
  server is silent where the commit ends (it should be) and where it goes on (it should not).

Latency is the client's, request sent to answer received. Baselines on the same cases: "no edit" (always silent)
and "repeat the last substitution" (the user's last edit, widened to whole words, made again at the next
occurrence of its old text; for a structural case, at every one). Python structural, JS/TS structural, Go, Rust,
Java, C and C++ structural and commit cases are reported apart.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import re
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data" / "nes"
KINDS = ("structural", "structural-js", "structural-go", "structural-rust", "structural-java", "structural-c",
         "structural-cpp", "model")  # fmt: skip
FILES = {"structural": "structural.jsonl.gz", "structural-js": "structural-js.jsonl.gz",
         "structural-go": "structural-go.jsonl.gz", "structural-rust": "structural-rust.jsonl.gz",
         "structural-java": "structural-java.jsonl.gz", "structural-c": "structural-c.jsonl.gz",
         "structural-cpp": "structural-cpp.jsonl.gz", "model": "commits.jsonl.gz"}  # fmt: skip
MAX_STEPS = 200  # suggestions accepted in one structural case at most
PARTS = ("all", "kept-aside", "choose")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cases", type=Path, default=DATA, help="folder of the case files (default: shipped)")
    parser.add_argument(
        "--kinds", default=",".join(KINDS),
        help="structural (Python), structural-js (JavaScript, TypeScript), structural-go (Go), structural-rust, "
        "structural-java, structural-c, structural-cpp, model; comma-separated (default: all)",
    )  # fmt: skip
    parser.add_argument("--limit", type=int, default=0, help="at most this many cases of each kind (0: all)")
    parser.add_argument(
        "--part", choices=PARTS, default="all",
        help="commit cases of this part of training/eval-parts.txt only: kept-aside (reported on, never chosen on), "
        "choose (options are chosen on these), all (default)",
    )  # fmt: skip
    parser.add_argument("--model", help="model directory or preset (default: the shipped model)")
    parser.add_argument("--backend", default="cpu", help="hardware backend (default: cpu)")
    parser.add_argument(
        "--option", action="append", default=[], metavar="NAME=JSON", help="a server option (repeatable)"
    )
    parser.add_argument("--records", type=Path, help="write every case's answers here (JSON)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--server-command", help=argparse.SUPPRESS)  # JSON list: tests start the engine's double


def read_cases(folder: Path, kinds: Sequence[str], limit: int = 0, part: str = "all") -> list[dict[str, Any]]:
    """The cases of `kinds`; a commit case is kept when its repository is in `part` (its source's "part")."""
    out = []
    for kind in kinds:
        path = folder / FILES[kind]
        if not path.is_file():
            raise OSError(f"no case file {path} (benchmarks/nes_cases.py writes it)")
        with gzip.open(path, "rt", encoding="utf-8") as f:
            cases = [json.loads(line) for line in f if line.strip()]
        if kind == "model" and part != "all":
            cases = [c for c in cases if c["source"].get("part") == part]
        step = max(1, len(cases) // limit) if limit else 1  # spread over the categories, which are in order
        out.extend(cases[::step][:limit] if limit else cases)
    return out


def apply(text: str, edit: dict[str, Any]) -> str:
    return text[: edit["start"]] + edit["text"] + text[edit["end"] :]


def after_user(case: dict[str, Any]) -> str:
    text = case["before"]
    for e in case["edits"]:
        text = apply(text, e)
    return text


def intended(case: dict[str, Any]) -> str:
    """A structural case's whole file as intended; a commit case's file after its next hunk (or as it is)."""
    text = after_user(case)
    if case["kind"] == "model":
        return apply(text, case["next"]) if case["next"] is not None else text
    for e in sorted(case["expected"], key=lambda e: e["start"], reverse=True):
        text = apply(text, e)
    return text


def position(text: str, offset: int) -> dict[str, int]:
    line = text.count("\n", 0, offset)
    start = text.rfind("\n", 0, offset) + 1
    return {"line": line, "character": len(text[start:offset].encode("utf-16-le")) // 2}


def offset_of(text: str, pos: Any) -> int:
    line, character = pos["line"], pos["character"]
    start = 0
    for _ in range(line):
        start = text.index("\n", start) + 1
    end = text.find("\n", start)
    units, i = 0, start
    while i < (len(text) if end < 0 else end) and units < character:
        units += len(text[i].encode("utf-16-le")) // 2
        i += 1
    return i


class Replay:
    """One case's document in the server, kept in step with the client's copy."""

    def __init__(self, client: Any, uri: str, text: str, language: str = "python") -> None:
        from lsprotocol import types

        self.types, self.client, self.uri, self.text, self.version = types, client, uri, text, 1
        item = types.TextDocumentItem(uri=uri, language_id=language, version=1, text=text)
        client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=item))

    def replace(self, start: int, end: int, new: str) -> None:
        t = self.types
        rng = t.Range(start=t.Position(**position(self.text, start)), end=t.Position(**position(self.text, end)))
        self.text, self.version = self.text[:start] + new + self.text[end:], self.version + 1
        self.client.text_document_did_change(t.DidChangeTextDocumentParams(
            text_document=t.VersionedTextDocumentIdentifier(uri=self.uri, version=self.version),
            content_changes=[t.TextDocumentContentChangePartial(range=rng, text=new)],
        ))  # fmt: skip

    def type_over(self, start: int, end: int, new: str) -> None:
        """A selection typed over, one key per change (the first replaces the selection)."""
        if not new:
            self.replace(start, end, "")
            return
        self.replace(start, end, new[0])
        for i, ch in enumerate(new[1:]):
            self.replace(start + 1 + i, start + 1 + i, ch)

    async def ask(self, at: int) -> tuple[dict[str, Any] | None, float]:
        from waferline.cli.typing_session import _plain

        params = {"textDocument": {"uri": self.uri, "version": self.version}, "position": position(self.text, at)}
        t0 = time.perf_counter()
        result = _plain(await self.client.protocol.send_request_async("textDocument/copilotInlineEdit", params))
        ms = (time.perf_counter() - t0) * 1000.0
        edits = result["edits"]
        return (edits[0] if edits else None), ms

    def edit_offsets(self, edit: dict[str, Any]) -> tuple[int, int]:
        return offset_of(self.text, edit["range"]["start"]), offset_of(self.text, edit["range"]["end"])

    def close(self) -> None:
        t = self.types
        self.client.text_document_did_close(t.DidCloseTextDocumentParams(text_document=t.TextDocumentIdentifier(
            uri=self.uri)))  # fmt: skip


async def replay(client: Any, case: dict[str, Any], n: int) -> dict[str, Any]:
    from lsprotocol import types

    uri = f"file:///nes-eval/{n:05d}/{Path(case['source']['file']).name}"
    doc = Replay(client.client, uri, case["before"], case.get("language", "python"))
    try:
        for e in case["edits"]:
            if case["kind"] == "structural":
                doc.type_over(e["start"], e["end"], e["text"])
            else:
                doc.replace(e["start"], e["end"], e["text"])
        cursor = case["edits"][-1]["start"] + len(case["edits"][-1]["text"])
        latencies, suggested = [], []
        for _ in range(MAX_STEPS if case["kind"] == "structural" else 1):
            edit, ms = await doc.ask(cursor)
            latencies.append(ms)
            if edit is None:
                break
            start, end = doc.edit_offsets(edit)
            suggested.append({"start": start, "end": end, "text": edit["text"], "kind": edit["kind"],
                              "confidence": edit.get("confidence")})  # fmt: skip
            if case["kind"] != "structural":
                break
            doc.replace(start, end, edit["text"])
            command = edit["command"]
            await client.client.workspace_execute_command_async(
                types.ExecuteCommandParams(command=command["command"], arguments=command["arguments"])
            )
            cursor = start + len(edit["text"])
        return {"id": case["id"], "suggested": suggested, "latencies_ms": latencies, "final": doc.text}
    finally:
        doc.close()


async def replay_all(cases: Sequence[dict[str, Any]], args: argparse.Namespace) -> tuple[list[Any], dict[str, Any]]:
    from waferline.benchmarks.editor_eval import server_options
    from waferline.cli.typing_session import TypingClient

    client = TypingClient(model=args.model, backend=args.backend)
    if args.server_command:
        client.cmd = json.loads(args.server_command)
    await client.start(server_options(args.option))
    try:
        await client.wait_for_engine()
        answers = []
        for n, case in enumerate(cases):
            answers.append(await replay(client, case, n))
            if not args.json and (n + 1) % 50 == 0:
                print(f"  {n + 1}/{len(cases)} cases", file=sys.stderr)
        return answers, await client.stats()
    finally:
        await client.stop()


def run(args: argparse.Namespace) -> int:
    from waferline.benchmarks.nes_score import print_table, summarize

    kinds = [k for k in args.kinds.split(",") if k]
    if not kinds or set(kinds) - set(KINDS):
        raise ValueError(f"--kinds: choose from {', '.join(KINDS)}")
    cases = read_cases(args.cases, kinds, args.limit, args.part)
    t0 = time.perf_counter()
    answers, server_stats = asyncio.run(replay_all(cases, args))
    figures = summarize(cases, answers, server_stats)
    figures["meta"] = {"cases": str(args.cases), "part": args.part, "options": args.option, "model": args.model,
                       "seconds": round(time.perf_counter() - t0, 1)}  # fmt: skip
    if args.records is not None:
        args.records.write_text(json.dumps(answers, indent=1) + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print_table(figures)
    return 0


_WORD = re.compile(r"\w")


def last_substitution(case: dict[str, Any]) -> tuple[str, str, int] | None:
    """The user's last edit as (old fragment, new fragment, where it ends now), both sides widened to whole words
    and trimmed of what they share; None for a pure insertion or deletion of nothing."""
    text = case["before"]
    for e in case["edits"][:-1]:
        text = apply(text, e)
    e = case["edits"][-1]
    old, new, start = text[e["start"] : e["end"]], e["text"], e["start"]
    p = 0
    while p < min(len(old), len(new)) and old[p] == new[p]:
        p += 1
    q = 0
    while q < min(len(old), len(new)) - p and old[-1 - q] == new[-1 - q]:
        q += 1
    old, new, start = old[p : len(old) - q], new[p : len(new) - q], start + p
    after = apply(text, e)
    a, b = start, start + len(new)
    while a > 0 and _WORD.match(after[a - 1]):
        a -= 1
    while b < len(after) and _WORD.match(after[b]):
        b += 1
    old_frag = after[a:start] + old + after[start + len(new) : b]
    new_frag = after[a:b]
    if not old_frag.strip() or old_frag == new_frag:
        return None
    return old_frag, new_frag, b


def _pattern(fragment: str) -> re.Pattern[str]:
    left = r"(?<!\w)" if _WORD.match(fragment[0]) else ""
    right = r"(?!\w)" if _WORD.match(fragment[-1]) else ""
    return re.compile(left + re.escape(fragment) + right)


def repeat_baseline(case: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """The "repeat the last substitution" baseline: (the file after it, the edits it made)."""
    text = after_user(case)
    found = last_substitution(case)
    if found is None:
        return text, []
    old, new, at = found
    matches = list(_pattern(old).finditer(text))
    if case["kind"] == "model":
        after = [m for m in matches if m.start() >= at] or matches
        matches = after[:1]
    edits: list[dict[str, Any]] = [{"start": m.start(), "end": m.end(), "text": new} for m in matches]
    for e in reversed(edits):
        text = apply(text, e)
    return text, edits


def mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None
