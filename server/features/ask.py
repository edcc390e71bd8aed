"""`waferline/ask` and the `waferline.ask` command: a question about the repository, answered from the index.

The evidence (definitions, uses, docstrings and search hits, each with its location) comes from the index only
(server/repository/evidence.py). With an instruction-following model (a chat template in its tokenizer config) the
model writes an answer from the numbered evidence, shown above the evidence and marked as generated; its `[n]`
citations become links to the evidence, and any link or `file:line` mention of its own that the evidence does not
hold is unlinked or flagged. With a completion-only model the answer says so and is the evidence alone. Either way,
every location the answer links to comes from the index.

Request params: `{question: string, textDocument?: {uri}, position?: Position}` (or, for the command, the same object
or the question string as its one argument). The name under `position` is looked up as if the question quoted it.
Result: `{question, markdown, answer, generated, model, evidence: [{kind, title, uri, range, text}], status}`, and
with a generated answer `timings` (`queue_ms`, `prefill_ms`, `first_token_ms`, `decode_ms`, `new_tokens`,
`prompt_tokens`: the engine's figures for it). With a `partialResultToken` in the request, the answer is also
streamed as the model writes it, as `$/progress` deltas on that token (features/ask_stream.py).
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

from waferline.engine.api import Completion
from waferline.server.features.ask_stream import PROGRESS_METHOD, AnswerStream
from waferline.server.features.hover import word_at
from waferline.server.model_tasks import ASK_KEY, Budget, chat
from waferline.server.params import field, position
from waferline.server.repository.evidence import (
    Evidence,
    EvidenceKey,
    evidence_key,
    evidence_prompt,
    gather_evidence,
    order_for_reuse,
    render_evidence_markdown,
)
from waferline.server.repository.workspace import uri_to_path

if TYPE_CHECKING:
    from waferline.server.app import WaferlineServer

ASK_METHOD = "waferline/ask"
ASK_COMMAND = "waferline.ask"
EVIDENCE_ITEMS = 8  # shown under the answer
# Of them, the model reads the first this many: its first token waits for their prefill (~30 tokens a piece, ~7 ms a
# token on a 2-core AVX2 machine), and with 5 its answers held their facts as often as with 8 (docs/chat-model.md).
PROMPT_EVIDENCE_ITEMS = 5
MAX_QUESTION_CHARS = 2000
SYSTEM = (
    "You answer questions about a code repository using only the numbered evidence given. Cite evidence as [1], "
    "[2]. If the evidence does not answer the question, say so. Be brief."
)
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_CITE = re.compile(r"\[(\d+)\]")
_MENTION = re.compile(r"\b([\w./-]+\.[A-Za-z]{1,4}):(\d+)\b")


def parse_params(params: Any) -> tuple[str, str | None, types.Position | None]:
    """(question, uri, position) from request params or a command's argument; InvalidParams when malformed."""
    if isinstance(params, str):
        params = {"question": params}
    question = field(params, "question")
    if not isinstance(question, str) or not question.strip():
        raise JsonRpcInvalidParams(f"{ASK_METHOD} expects {{question: string, textDocument?, position?}}")
    uri = field(field(params, "textDocument"), "uri")
    pos = field(params, "position")
    position_ = position(pos, f"{ASK_METHOD}: the position") if pos is not None else None
    return question.strip()[:MAX_QUESTION_CHARS], uri if isinstance(uri, str) else None, position_


def ground_answer(text: str, evidence: list[Evidence], root: Path) -> str:
    """The model's answer with only the index's locations linked: its own links unlinked, `[n]` citations linked to
    evidence n, and `path:line` mentions that no evidence covers flagged."""
    text = _LINK.sub(lambda m: m.group(1), text)

    def cite(m: re.Match[str]) -> str:
        n = int(m.group(1))
        if not 1 <= n <= len(evidence):
            return f"[{n}: no such evidence]"
        e = evidence[n - 1]
        return f"[[{n}]]({e.path.as_uri()}#L{e.range[0][0] + 1})"

    def mention(m: re.Match[str]) -> str:
        line = int(m.group(2)) - 1
        for e in evidence:
            rel = e.path.relative_to(root).as_posix() if e.path.is_relative_to(root) else e.path.as_posix()
            if rel.endswith(m.group(1)) and e.range[0][0] <= line <= e.range[1][0]:
                return m.group(0)
        return f"{m.group(0)} (not in the evidence)"

    return _CITE.sub(cite, _MENTION.sub(mention, text)).strip()


class PromptMemory:
    """Which evidence the last generated answer's prompt held, in its order: the next prompt puts those pieces it
    shares first (`order_for_reuse`), so that the chat model's KV session serves them from its cache."""

    def __init__(self) -> None:
        self.last: list[EvidenceKey] = []

    def order(self, evidence: list[Evidence]) -> tuple[list[Evidence], list[Evidence]]:
        """(the pieces the model reads, in the order it reads them; all the pieces, numbered alike): the best
        PROMPT_EVIDENCE_ITEMS by the index's order, those of the last prompt first; the rest after them."""
        prompted = order_for_reuse(evidence[:PROMPT_EVIDENCE_ITEMS], self.last)
        self.last = [evidence_key(e) for e in prompted]
        return prompted, prompted + evidence[PROMPT_EVIDENCE_ITEMS:]


def answer_timings(completion: Completion) -> dict[str, float]:
    """How long the answer took on the engine: waiting for it, the prompt, the first token (the two together: the
    first token comes from the prompt's last position), writing the rest; of the prompt's tokens, how many the KV
    session held already and how many were computed."""
    queue, prefill = round(completion.queue_s * 1000, 1), round(completion.prefill_s * 1000, 1)
    return {
        "queue_ms": queue, "prefill_ms": prefill, "first_token_ms": round(queue + prefill, 1),
        "decode_ms": round(completion.decode_s * 1000, 1), "new_tokens": completion.new_tokens,
        "prompt_tokens": completion.prompt_tokens, "reused_tokens": completion.reused_tokens,
        "prefilled_tokens": completion.prefilled_tokens,
    }  # fmt: skip


def _evidence_json(evidence: list[Evidence]) -> list[dict[str, Any]]:
    out = []
    for e in evidence:
        (sl, sc), (el, ec) = e.range  # UTF-16 columns, as the index stores them
        rng = {"start": {"line": sl, "character": sc}, "end": {"line": el, "character": ec}}
        out.append({"kind": e.kind, "title": e.title, "uri": e.path.as_uri(), "range": rng, "text": e.text})
    return out


async def ask(ls: WaferlineServer, params: Any, *, partial_result_token: int | str | None = None) -> dict[str, Any]:
    """The result (see the module docstring); with `partial_result_token`, the answer streamed on it as written."""
    question, uri, position = parse_params(params)
    path = uri_to_path(uri) if uri is not None else None
    lookup = question
    if uri is not None and position is not None:
        doc, offset = ls.document_at(uri, position)
        # out of sync, the word at the position would be read from a wrong text: the question alone is asked
        if doc.out_of_sync is None and (word := word_at(doc.snapshot(), offset)) is not None:
            lookup = f"`{word.name}` {question}"  # the name at the cursor is what "this" means
    index = ls.indexing.index_for(path)
    indexes = [index] if index is not None else list(ls.indexing.indexes.values())
    evidence: list[Evidence] = []
    for idx in indexes:
        found = await asyncio.to_thread(gather_evidence, idx, lookup, EVIDENCE_ITEMS, path)
        evidence.extend(found[: EVIDENCE_ITEMS - len(evidence)])
    root = indexes[0].root if indexes else Path("/")
    status = ls.indexing.status()
    note = f"*Note: {status}.*\n\n" if status else ""
    await ls.worker.settled()
    prompted = evidence
    if ls.worker.can_chat() and evidence:
        prompted, evidence = ls.ask_prompts.order(evidence)
    evidence_md = render_evidence_markdown(evidence, root)
    result: dict[str, Any] = {
        "question": question, "evidence": _evidence_json(evidence), "status": status, "answer": None,
        "generated": False,
    }  # fmt: skip
    if not ls.worker.can_chat():
        result["model"] = "completion-only"
        result["markdown"] = (
            f"{note}The configured model ({ls.worker.describe()}) is a completion-only model: it has no chat "
            f"template, so it cannot write an answer. This is what the repository index holds for the question:"
            f"\n\n{evidence_md}"
        )
        return result
    result["model"] = "instruction"
    if not evidence:
        result["markdown"] = f"{note}{evidence_md}"
        return result
    # The constant part first (system prompt; the evidence, which a follow-up shares), the question last: the KV
    # session keeps the start this prompt shares with the one before (engine/kvcache.py), so only the rest is prefilled.
    user = f"Evidence:\n\n{evidence_prompt(prompted, root)}\n\nQuestion: {question}"
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]
    stream = None
    if partial_result_token is not None:
        token = partial_result_token

        def send(value: dict[str, str]) -> None:
            ls.protocol.notify(PROGRESS_METHOD, types.ProgressParams(token=token, value=value))

        stream = AnswerStream(send, lambda text: ground_answer(text, prompted, root))
    try:
        budget = Budget(ls.options.ask_max_tokens, ls.options.ask_time_budget_ms / 1000.0)
        on_text = stream.on_text if stream is not None else None
        completion = await chat(ls.worker, ASK_KEY, messages, budget, on_text=on_text)
        answer = ground_answer(completion.text, prompted, root) if completion is not None else ""
        if stream is not None:
            stream.finish(answer)  # the last delta, before the response
    except ValueError as e:
        result["markdown"] = f"{note}No generated answer ({e}). The evidence:\n\n{evidence_md}"
        return result
    finally:  # cancelled, refused or done: no delta after the response
        if stream is not None:
            stream.close()
    if completion is not None:
        result["timings"] = answer_timings(completion)
    if not answer:
        why = "superseded by a newer question" if completion is None else "the model wrote nothing"
        result["markdown"] = f"{note}No generated answer ({why}). The evidence:\n\n{evidence_md}"
        return result
    result.update(answer=answer, generated=True)
    result["markdown"] = (
        f"{note}*Generated answer (written by the model from the evidence below; check it there):*\n\n{answer}"
        f"\n\n**Evidence**\n\n{evidence_md}"
    )
    return result
