"""`waferline bench --k-curve` and `--speculate`: what a k-token step costs, and what speculation gains.

Speculative decoding pays only where verifying k tokens in one step costs much less than k one-token steps. The
k-curve times both on the same cache position, interleaved and best of the repeats, for k = 1..16: `cost` is the
k-token step in one-token steps (the one-token step being the best per-step time over all k, which does not depend
on k: a busy machine makes some series of k one-token steps slow), `if_all_kept` = k / cost the speedup a draft that
always holds would give.

`--speculate` decodes copy-heavy prompts (the continuation repeats text from the prompt: methods of one pattern, a
dict literal, a test file) greedy with and without drafting, the same prompts in the same run, best of the repeats,
and reports effective tokens per second, tokens per step and the drafts kept per source. The speedup is taken on
this process's CPU time (`decode_cpu_s`), which waiting for a core on a shared machine does not inflate; wall-clock
rates are reported too. On a preset (random
weights) what the model writes means nothing, so there the draft is the model's own previous text for the prompt
(the caller's draft of a re-request after typing through a suggestion: every drafted token holds), reported apart.
"""

from __future__ import annotations

import time
from typing import Any

COPY_HEAVY = (
    "class Vector:\n    def __init__(self, x, y, z):\n        self.x = x\n        self.y = y\n        self.z = z\n\n"
    "    def add(self, other):\n        return Vector(self.x + other.x, self.y + other.y, self.z + other.z)\n\n"
    "    def sub(self, other):\n        return Vector(",
    "COLORS = {\n    'red': (255, 0, 0),\n    'green': (0, 255, 0),\n    'blue': (0, 0, 255),\n"
    "    'white': (255, 255, 255),\n}\n\nDARK = {\n    'red': (",
    "import unittest\n\n\nclass TestMath(unittest.TestCase):\n    def test_add(self):\n"
    "        self.assertEqual(add(1, 2), 3)\n        self.assertEqual(add(0, 0), 0)\n\n"
    "    def test_sub(self):\n        self.assertEqual(",
    "def parse_args():\n    parser = argparse.ArgumentParser()\n"
    "    parser.add_argument('--model', type=str, default=None, help='the model')\n"
    "    parser.add_argument('--dtype', type=str, default=None, help='the dtype')\n"
    "    parser.add_argument('--threads', type=",
)


def k_curve(model: Any, *, repeats: int, position: int = 128, max_k: int = 16) -> list[dict[str, float]]:
    """Per k: seconds of k one-token steps and of one k-token step from the same cached position (best of
    `repeats`, interleaved so that load drifts hit both alike)."""
    import torch

    from waferline.engine.kvcache import Session

    session = Session(model, "k-curve", max_tokens=position + max_k + 1)
    prompt = [(7 * i + 3) % model.args.vocab_size for i in range(position)]
    series = []
    with torch.inference_mode():
        session.forward(prompt)
        draft = [(11 * i + 5) % model.args.vocab_size for i in range(max_k)]
        for k in range(1, max_k + 1):
            ones, many = [], []
            for _ in range(repeats + 1):  # the first round warms up
                session.truncate(position)
                t = time.perf_counter()
                for token in draft[:k]:
                    session.forward([token])
                ones.append(time.perf_counter() - t)
                session.truncate(position)
                t = time.perf_counter()
                session.verify(draft[:k])
                many.append(time.perf_counter() - t)
            series.append((k, min(ones[1:]), min(many[1:])))
    one_step = min(ones_k / k for k, ones_k, _ in series)
    return [
        {"k": k, "k_one_steps_ms": 1e3 * ones_k, "one_step_ms": 1e3 * one_step, "k_step_ms": 1e3 * k_step,
         "cost": k_step / one_step, "if_all_kept": k * one_step / k_step}
        for k, ones_k, k_step in series
    ]  # fmt: skip


def speculate(loaded: Any, *, new_tokens: int, repeats: int) -> dict[str, Any]:
    """Greedy decode of COPY_HEAVY with and without drafts, best of `repeats` per prompt and way."""
    import torch

    from waferline.engine.generate import generate
    from waferline.engine.kvcache import Session
    from waferline.engine.speculate import Drafter, DraftPolicy

    model, tokenizer = loaded.model, loaded.tokenizer
    random_weights = loaded.path is None
    policy = DraftPolicy()  # shared by every request, as the engine's is: it learns here as it would there
    out: dict[str, Any] = {"prompts": [], "draft": "caller (the model's own text)" if random_weights else "ngram"}
    totals = {"plain_s": 0.0, "spec_s": 0.0, "plain_cpu_s": 0.0, "spec_cpu_s": 0.0, "plain_tokens": 0, "spec_tokens": 0}
    totals |= {"steps": 0, "accepted": 0}
    sources: dict[str, list[int]] = {}
    session = Session(model, "bench-speculate", max_tokens=1024)
    with torch.inference_mode():
        for text in COPY_HEAVY:
            ids = tokenizer.encode(text)
            session.reset()
            truth = generate(session, ids, max_new_tokens=new_tokens)  # also the warm-up
            caller = truth.tokens if random_weights else []
            best: dict[str, Any] = {}
            for _ in range(repeats):
                for way in ("plain", "spec"):
                    session.reset()
                    drafter = Drafter(ids, policy, caller=caller) if way == "spec" else None
                    r = generate(session, ids, max_new_tokens=new_tokens, drafter=drafter)
                    assert r.tokens == truth.tokens, "speculation changed the greedy text"
                    if way not in best or r.timings["decode_cpu_s"] < best[way].timings["decode_cpu_s"]:
                        best[way] = r
            plain, spec = best["plain"], best["spec"]
            for name, count in spec.draft_sources.items():
                sources.setdefault(name, [0, 0])
                sources[name][0] += count[0]
                sources[name][1] += count[1]
            totals["plain_s"] += plain.decode_s
            totals["spec_s"] += spec.decode_s
            totals["plain_cpu_s"] += plain.timings["decode_cpu_s"]
            totals["spec_cpu_s"] += spec.timings["decode_cpu_s"]
            totals["plain_tokens"] += plain.decoded_tokens
            totals["spec_tokens"] += spec.decoded_tokens
            totals["steps"] += spec.decode_steps
            totals["accepted"] += spec.accepted_tokens
            plain_cpu = plain.decoded_tokens / max(plain.timings["decode_cpu_s"], 1e-9)
            spec_cpu = spec.decoded_tokens / max(spec.timings["decode_cpu_s"], 1e-9)
            out["prompts"].append(
                {"prompt": text.splitlines()[0], "plain_tok_s": plain.decode_tok_s, "spec_tok_s": spec.decode_tok_s,
                 "plain_cpu_tok_s": plain_cpu, "spec_cpu_tok_s": spec_cpu, "tokens_per_step": spec.tokens_per_step,
                 "speedup": spec_cpu / max(plain_cpu, 1e-9)}
            )  # fmt: skip
    out["plain_tok_s"] = totals["plain_tokens"] / max(totals["plain_s"], 1e-9)
    out["spec_tok_s"] = totals["spec_tokens"] / max(totals["spec_s"], 1e-9)
    out["plain_cpu_tok_s"] = totals["plain_tokens"] / max(totals["plain_cpu_s"], 1e-9)
    out["spec_cpu_tok_s"] = totals["spec_tokens"] / max(totals["spec_cpu_s"], 1e-9)
    out["speedup"] = out["spec_cpu_tok_s"] / max(out["plain_cpu_tok_s"], 1e-9)
    out["tokens_per_step"] = (totals["steps"] + totals["accepted"]) / max(totals["steps"], 1)
    out["steps"] = totals["steps"]
    out["drafted_tokens"] = sum(v[0] for v in sources.values())
    out["accepted_tokens"] = totals["accepted"]
    out["sources"] = {k: {"proposed": v[0], "accepted": v[1]} for k, v in sources.items()}
    return out


def print_k_curve(rows: list[dict[str, float]], title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for col in ("k", "k one-token steps (ms)", "one k-token step (ms)", "cost (one-token steps)", "if all kept"):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(
            str(r["k"]), f"{r['k_one_steps_ms']:.2f}", f"{r['k_step_ms']:.2f}", f"{r['cost']:.2f}",
            f"{r['if_all_kept']:.2f}x",
        )  # fmt: skip
    Console().print(table)


def print_speculate(report: dict[str, Any], title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{title} · draft: {report['draft']}")
    for col in ("prompt", "plain tok/CPU s", "speculative tok/CPU s", "wall tok/s plain → spec", "tokens/step"):
        table.add_column(col, justify="right")
    table.add_column("speedup (CPU)", justify="right")
    for p in [*report["prompts"], {"prompt": "all", **report}]:
        table.add_row(
            p["prompt"][:32], f"{p['plain_cpu_tok_s']:,.0f}", f"{p['spec_cpu_tok_s']:,.0f}",
            f"{p['plain_tok_s']:,.0f} → {p['spec_tok_s']:,.0f}", f"{p['tokens_per_step']:.2f}", f"{p['speedup']:.2f}x",
        )  # fmt: skip
    Console().print(table)
    print(f"  {report['accepted_tokens']} of {report['drafted_tokens']} drafted tokens kept in {report['steps']} steps")
    for name, s in report["sources"].items():
        print(f"  {name}: {s['accepted']} of {s['proposed']} drafted tokens kept")
