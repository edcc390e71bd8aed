"""`waferline eval-chat`: chat-style work through the real server, with the local chat model and with the shipped one.

The cases (benchmarks/data/chat/cases.json) are questions about a fixed small repository (benchmarks/data/chat/repo,
copied to a temporary folder the client opens as its workspace) asked with `waferline/ask`, `write a docstring`
code actions and rewrites (`waferline.rewrite` with an instruction) on its files, each with the facts a correct
answer holds: case-insensitive regular expressions that must all match the generated answer (ask), or the text the
action's edit writes (docstrings, rewrites). Each system is one `waferline serve`:

- `chat model`: `chatModel` the GGUF file or model directory given (default: the one `waferline fetch-model` put in
  the cache), the shipped model typing; the run starts once the server says the chat model is ready;
- `shipped`: `chatEngine: same`, the shipped model for everything (it has no chat template: ask gives the evidence
  alone and rewrites are not offered, so those cases count as missed; docstrings are its own fill-in-the-middle).

It prints, per system and kind, how many answers hold their facts with a 95% bootstrap interval (the same draws for
both systems: training/bootstrap.py), and for ask the engine's time to the first token (queue and prompt: when the
first token was written), the client's time to the first streamed delta (each ask carries a `partialResultToken`,
so the answer comes as `$/progress` deltas while it is written: server/features/ask_stream.py; from the request sent
to the first delta received, p50 and p90) and to the whole answer, p50 and p95, and the prompts' tokens (p50 of
all, of those the chat model's KV session held already, of those it prefilled). It checks each streamed answer's
deltas joined against the final one (`stream_ok`). A benchmark: it asserts nothing. `--json` prints the figures and
every answer.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data" / "chat"
READY_TIMEOUT_S = 600.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--chat-model", default=None,
        help="GGUF file or model directory (default: the model `waferline fetch-model` fetched)",
    )  # fmt: skip
    parser.add_argument("--backend", default="cpu")
    parser.add_argument("--only", choices=("chat", "shipped"), default=None, help="run one system only")
    parser.add_argument("--kinds", default="ask,docstring,rewrite", help="comma-separated kinds of case")
    parser.add_argument("--max-tokens", type=int, default=96, help="askMaxTokens and actionMaxTokens")
    parser.add_argument("--json", action="store_true", help="print the figures and every answer as JSON")
    parser.add_argument(
        "--no-stream", action="store_true", help="ask without a partialResultToken (answers whole, as before streaming)"
    )


def load_cases(kinds: set[str]) -> list[dict[str, Any]]:
    cases = json.loads((DATA / "cases.json").read_text(encoding="utf-8"))["cases"]
    return [c for c in cases if c["kind"] in kinds]


def holds(facts: list[str], text: str) -> bool:
    return bool(text) and all(re.search(f, text, re.IGNORECASE | re.MULTILINE) for f in facts)


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(round(q * (len(ordered) - 1)), len(ordered) - 1)]


async def run_system(
    cases: list[dict[str, Any]], options: dict[str, Any], backend: str, *, quiet: bool, stream_asks: bool = True
) -> dict:
    from lsprotocol import types

    from waferline.benchmarks.editor_session import WorkspaceClient
    from waferline.benchmarks.editor_session import utf16_position as pos

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "repo"
        shutil.copytree(DATA / "repo", root)
        client = WorkspaceClient(model=None, backend=backend)
        edits: list[types.WorkspaceEdit] = []

        streams: dict[str, dict[str, Any]] = {}  # per ask's partialResultToken: when its first delta came, all of them

        @client.client.feature(types.PROGRESS)
        def progress(params: types.ProgressParams) -> None:
            value = params.value if isinstance(params.value, dict) else {}
            if (stream := streams.get(str(params.token))) is not None and "delta" in value:
                stream.setdefault("first_at", time.perf_counter())
                stream["deltas"].append(value["delta"])

        @client.client.feature(types.WORKSPACE_APPLY_EDIT)
        def apply_edit(params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
            edits.append(params.edit)
            return types.ApplyWorkspaceEditResult(applied=False, failure_reason="eval-chat only reads the edit")

        t0 = time.perf_counter()
        await client.start(options, root)
        try:
            await client.wait_for_engine()
            await client.wait_for_index()
            if options.get("chatModel"):  # the chat model loads in the background: the run starts once it is ready
                deadline = time.monotonic() + READY_TIMEOUT_S
                while not any("chat model" in m and ("ready" in m or "could not" in m) for m in client.typing.messages):
                    if time.monotonic() > deadline:
                        raise OSError(f"the chat model was not ready in {READY_TIMEOUT_S:.0f} s")
                    await asyncio.sleep(0.1)
            ready_s = time.perf_counter() - t0
            stats = await client.client.protocol.send_request_async("waferline/stats", {})
            engine = (_plain(stats) or {}).get("chat_engine")
            answers = []
            for case in cases:
                start = time.perf_counter()
                text, timings, note, streamed = "", None, "", None
                if case["kind"] == "ask":
                    token = f"ask-{case['id']}"
                    stream = streams[token] = {"deltas": []}
                    asked = {"question": case["question"], **({"partialResultToken": token} if stream_asks else {})}
                    got = await client.client.protocol.send_request_async("waferline/ask", asked)
                    got = _plain(got) or {}
                    text, timings = got.get("answer") or "", got.get("timings")
                    note = "" if got.get("generated") else "no generated answer"
                    first = stream.get("first_at")
                    streamed = {
                        "first_chunk_ms": round((first - start) * 1000, 1) if first is not None else None,
                        "chunks": len(stream["deltas"]), "stream_ok": "".join(stream["deltas"]) == text,
                    }  # fmt: skip
                else:
                    path = root / case["path"]
                    source = path.read_text(encoding="utf-8")
                    client.open(path, source)
                    anchor = source.index(case.get("select") or case["at"])
                    end = anchor + len(case.get("select") or "def")
                    rng = types.Range(start=types.Position(*pos(source, anchor)), end=types.Position(*pos(source, end)))
                    params = types.CodeActionParams(
                        text_document=types.TextDocumentIdentifier(uri=path.as_uri()), range=rng,
                        context=types.CodeActionContext(diagnostics=[]),
                    )  # fmt: skip
                    offered = await client.client.text_document_code_action_async(params) or []
                    want = "write a docstring" if case["kind"] == "docstring" else "rewrite"
                    action = next((a for a in offered if want in a.title), None)
                    if action is None:
                        note = "not offered"
                    else:
                        # The offered action's argument (server/features/actions/lsp.py: kind, document, version and
                        # the range as offsets), and for a rewrite the instruction the editor would ask the user for.
                        data = {"kind": case["kind"], "uri": path.as_uri(), "version": 1, "start": anchor, "end": end}
                        name = "waferline.applyAction"
                        if case["kind"] == "rewrite":
                            name, data = "waferline.rewrite", {**data, "instruction": case["instruction"]}
                        args = [data]
                        before = len(edits)
                        done = _plain(await client.client.workspace_execute_command_async(
                            types.ExecuteCommandParams(command=name, arguments=args)
                        ))  # fmt: skip
                        text = "\n".join(_edit_texts(edits[before:]))
                        note = "" if text else str((done or {}).get("reason") or "no edit")
                    client.close(path.as_uri())
                answers.append({
                    "id": case["id"], "kind": case["kind"], "holds": holds(case["facts"], text), "text": text,
                    "note": note, "seconds": round(time.perf_counter() - start, 3), "timings": timings,
                    "stream": streamed,
                })  # fmt: skip
                if not quiet:
                    mark = "+" if answers[-1]["holds"] else "-"
                    print(
                        f"  {mark} {case['id']:22s} {answers[-1]['seconds']:6.2f} s  {text[:70]!r} {note}", flush=True
                    )
        finally:
            await client.stop()
    return {"engine": engine, "ready_s": round(ready_s, 1), "answers": answers}


def _plain(value: Any) -> Any:
    """A result as plain dicts and lists (pygls gives the results of its own methods as named tuples)."""
    if hasattr(value, "_asdict"):
        value = value._asdict()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _edit_texts(edits: list[Any]) -> list[str]:
    texts = []
    for edit in edits:
        for changes in (edit.changes or {}).values():
            texts += [c.new_text for c in changes]
        for change in edit.document_changes or []:
            texts += [getattr(e, "new_text", "") for e in getattr(change, "edits", [])]
    return texts


def summarize(cases: list[dict[str, Any]], systems: dict[str, dict]) -> dict[str, Any]:
    from waferline.training.bootstrap import Resampler

    figures: dict[str, Any] = {}
    kinds = sorted({c["kind"] for c in cases})
    for name, run in systems.items():
        out: dict[str, Any] = {"engine": run["engine"], "ready_s": run["ready_s"]}
        for kind in [*kinds, "all"]:
            picked = [a for a in run["answers"] if kind == "all" or a["kind"] == kind]
            hit = [1.0 if a["holds"] else 0.0 for a in picked]
            point, low, high = Resampler(len(hit), seed=0).ratio(hit)
            out[kind] = {"hold": int(sum(hit)), "of": len(hit), "share": round(point, 3),
                         "interval": [round(low, 3), round(high, 3)]}  # fmt: skip
        first = [a["timings"]["first_token_ms"] for a in run["answers"] if a["timings"]]
        whole = [a["seconds"] * 1000 for a in run["answers"] if a["kind"] == "ask" and a["timings"]]
        out["ask_first_token_ms"] = {"p50": percentile(first, 0.5), "p90": percentile(first, 0.9),
                                     "p95": percentile(first, 0.95), "n": len(first)}  # fmt: skip
        # of each ask's prompt: its tokens, those its KV session held already (the shared start), those prefilled
        tokens = [a["timings"] for a in run["answers"] if a["timings"] and "prefilled_tokens" in a["timings"]]
        out["ask_prompt_tokens"] = {
            k: percentile([t[k] for t in tokens], 0.5) for k in ("prompt_tokens", "reused_tokens", "prefilled_tokens")
        }
        streamed = [a["stream"] for a in run["answers"] if a.get("stream") and a["stream"]["first_chunk_ms"]]
        chunk = [s["first_chunk_ms"] for s in streamed]
        out["ask_first_chunk_ms"] = {"p50": percentile(chunk, 0.5), "p90": percentile(chunk, 0.9), "n": len(chunk),
                                     "chunks_p50": percentile([s["chunks"] for s in streamed], 0.5),
                                     "stream_ok": sum(s["stream_ok"] for s in streamed)}  # fmt: skip
        out["ask_answer_ms"] = {"p50": percentile(whole, 0.5), "p95": percentile(whole, 0.95),
                                "mean": round(statistics.fmean(whole), 1) if whole else None}  # fmt: skip
        figures[name] = out
    if len(systems) == 2:
        a, b = ([1.0 if x["holds"] else 0.0 for x in run["answers"]] for run in systems.values())
        point, low, high = Resampler(len(a), seed=0).difference(a, b)
        figures["difference"] = {"of": f"{' - '.join(systems)}", "share": round(point, 3),
                                 "interval": [round(low, 3), round(high, 3)]}  # fmt: skip
    return figures


def run(args: argparse.Namespace) -> int:
    from waferline.engine.model_cache import cached_chat_model

    kinds = {k.strip() for k in args.kinds.split(",") if k.strip()}
    cases = load_cases(kinds)
    if not cases:
        raise ValueError(f"no cases of the kinds {sorted(kinds)}")
    chat_model = args.chat_model or (str(p) if (p := cached_chat_model()) is not None else None)
    if args.only != "shipped" and chat_model is None:
        raise ValueError("no chat model: run `waferline fetch-model smollm2` or give --chat-model FILE")
    if chat_model is not None and not Path(chat_model).expanduser().exists():
        raise FileNotFoundError(f"--chat-model {chat_model}: no such file or directory")
    common = {"askMaxTokens": args.max_tokens, "actionMaxTokens": args.max_tokens, "precompute": False,
              "warmUp": False, "hoverSummary": False}  # fmt: skip
    plan = {"chat model": {**common, "chatEngine": "local", "chatModel": chat_model},
            "shipped": {**common, "chatEngine": "same"}}  # fmt: skip
    if args.only is not None:
        plan = {k: v for k, v in plan.items() if (k == "shipped") == (args.only == "shipped")}
    systems, load = {}, [os.getloadavg()[0]]
    for name, options in plan.items():
        if not args.json:
            print(f"{name}: {options.get('chatModel') or 'the shipped model'}", flush=True)
        systems[name] = asyncio.run(
            run_system(cases, options, args.backend, quiet=args.json, stream_asks=not args.no_stream)
        )
        load.append(os.getloadavg()[0])
    figures = summarize(cases, systems)
    figures["meta"] = {"chat_model": chat_model, "cases": len(cases), "load_1min": load, "options": common,
                       "streamed": not args.no_stream}  # fmt: skip
    if args.json:
        print(json.dumps({"figures": figures, "answers": {k: v["answers"] for k, v in systems.items()}}, indent=1))
        return 0
    for name in systems:
        f = figures[name]
        kinds_text = "  ".join(
            f"{k} {f[k]['hold']}/{f[k]['of']} [{f[k]['interval'][0]:.0%}–{f[k]['interval'][1]:.0%}]"
            for k in [*sorted({c["kind"] for c in cases}), "all"]
        )
        ft, fc, whole = f["ask_first_token_ms"], f["ask_first_chunk_ms"], f["ask_answer_ms"]
        print(f"{name:10s} {kinds_text}")
        print(f"{'':10s} ask first token p50 {ft['p50']} ms p95 {ft['p95']} ms (n={ft['n']}); "
              f"whole answer p50 {whole['p50']} ms p95 {whole['p95']} ms; ready after {f['ready_s']} s")  # fmt: skip
        print(f"{'':10s} ask first streamed chunk p50 {fc['p50']} ms p90 {fc['p90']} ms (n={fc['n']}; "
              f"{fc['chunks_p50']} chunks an answer p50; deltas joined = the answer in {fc['stream_ok']})")  # fmt: skip
        print(f"{'':10s} prompt tokens p50 {f['ask_prompt_tokens']}")
        print(f"{'':10s} {f['engine']}")
    if "difference" in figures:
        d = figures["difference"]
        print(f"difference ({d['of']}): {d['share']:+.0%} [{d['interval'][0]:+.0%}, {d['interval'][1]:+.0%}]")
    print(f"load (1 min) {load}")
    return 0
