"""Running a code action: from a `Target` to the new text of its span, or the reason there is none.

- complete a body, regenerate a statement or block: fill-in-the-middle at the span, planned and finished by the
  syntax layer as an explicit multi-line completion (its stop rules end the text where the node ends, and
  `finish_completion` keeps only a cut that parses); regenerate samples (`regenerateTemperature`) so that each run
  is another candidate;
- write a docstring: fill-in-the-middle between the docstring's quotes (or after a comment marker);
- repair a syntax error: first the tokens tree-sitter found missing (no model needed), else the statement rewritten
  by the model (a chat prompt with the broken code when the model follows instructions, else fill-in-the-middle);
- rewrite as instructed: a chat prompt, only with an instruction-following model.

Whatever the model writes, `new_syntax_error` (syntax/parse_check.py) has the last word: an edit that would leave
a syntax error the document did not have is refused with the line it would break. The document itself is never
touched here; the caller turns the `Outcome` into one WorkspaceEdit.
"""

from __future__ import annotations

import asyncio
import re
import textwrap
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tree_sitter import Node

from waferline.server.features.actions.targets import (
    COMPLETE_BODY,
    DOCSTRING,
    REGENERATE,
    REPAIR,
    REWRITE,
    Source,
    Target,
)
from waferline.server.features.engine_request import prompt_prefix
from waferline.server.model_tasks import Budget, action_key, chat, infill
from waferline.syntax.languages import parser_for
from waferline.syntax.parse_check import new_syntax_error
from waferline.syntax.plan import CompletionPlan, plan_completion
from waferline.syntax.postprocess import finish_completion, should_stop
from waferline.syntax.tree import SyntaxTree

if TYPE_CHECKING:
    from waferline.server.app import WaferlineServer
    from waferline.server.options import Options

PREFIX_CHARS = 4000  # around a docstring, and the context lines a chat prompt shows
SUFFIX_CHARS = 1500
CHAT_CONTEXT_LINES = 30
DOCSTRING_TOKENS = 160  # at most, for a docstring
_FENCE = re.compile(r"```[^\n]*\n(.*?)(?:\n```|$)", re.DOTALL)


@dataclass(frozen=True)
class Outcome:
    target: Target
    new_text: str | None  # replaces text[target.start:end]; None when refused
    end: int = 0
    reason: str | None = None  # why there is no edit
    source: str = "model"  # "model" or "missing tokens"


def refuse(target: Target, reason: str) -> Outcome:
    return Outcome(target, None, target.end, reason)


def action_budget(options: Options, *, max_new_tokens: int | None = None, temperature: float = 0.0) -> Budget:
    """What one code action may write: `actionMaxTokens` (or fewer) within `actionTimeBudgetMs`."""
    tokens = options.action_max_tokens if max_new_tokens is None else min(options.action_max_tokens, max_new_tokens)
    return Budget(tokens, options.action_time_budget_ms / 1000.0, temperature)


async def compute(
    ls: WaferlineServer, uri: str, src: Source, target: Target, instruction: str | None = None
) -> Outcome:
    """The new text for `target` in `src` (a snapshot of the document), checked, or a refusal with its reason."""
    if target.kind == REPAIR:
        fixed = await asyncio.to_thread(insert_missing_tokens, src, target)
        if fixed is not None:
            return fixed
    await ls.worker.settled()
    if target.kind == REWRITE or (target.kind == REPAIR and ls.worker.can_chat()):
        outcome = await _chat_rewrite(ls, uri, src, target, instruction)
    elif target.kind == DOCSTRING:
        outcome = await _docstring(ls, uri, src, target)
    else:
        assert target.kind in (COMPLETE_BODY, REGENERATE, REPAIR), target.kind
        outcome = await _infill_span(ls, uri, src, target)
    if outcome.new_text is None:
        return outcome
    if target.kind == REGENERATE and outcome.new_text.strip() == src.text[target.start : target.end].strip():
        return refuse(target, "the model wrote the same code again; run it again for another candidate")
    reason = await asyncio.to_thread(
        new_syntax_error, src.language_id, src.text, target.start, outcome.end, outcome.new_text
    )
    return refuse(target, reason) if reason is not None else outcome


def _unavailable(target: Target, stop_reason: str) -> Outcome | None:
    if stop_reason == "unavailable":
        return refuse(target, "no model is loaded (see the server log)")
    if stop_reason == "cancelled":
        return refuse(target, "cancelled")
    return None


async def _infill_span(ls: WaferlineServer, uri: str, src: Source, target: Target) -> Outcome:
    """Fill the span between the target's head and tail the way an explicit multi-line completion is filled."""
    text, lang = src.text, src.language_id
    virtual = text[: target.start] + target.head + target.tail + text[target.end :]
    cursor = target.start + len(target.head)

    def plan() -> CompletionPlan:
        return plan_completion(virtual, cursor, lang, SyntaxTree(lang, virtual), explicit=True,
                               max_lines=target.max_lines)  # fmt: skip

    planned = await asyncio.to_thread(plan)
    if not planned.complete:
        return refuse(target, f"nothing to write here ({planned.reason})")
    if (context := ls.indexing.completion_context(uri)) is not None:
        planned.context[:0] = await asyncio.to_thread(context, virtual, planned)
    temperature = ls.options.regenerate_temperature if target.kind == REGENERATE else 0.0
    completion = await infill(
        ls.worker, action_key(uri), prompt_prefix(planned), planned.suffix,
        action_budget(ls.options, temperature=temperature), should_stop=lambda partial: should_stop(partial, planned),
    )  # fmt: skip
    if completion is None:
        return refuse(target, "superseded by a newer code action on this document")
    if (stopped := _unavailable(target, completion.stop_reason)) is not None:
        return stopped
    finished = await asyncio.to_thread(finish_completion, virtual, cursor, lang, completion.text, planned)
    if finished is None or not finished.insert_text.strip():
        return refuse(target, "the model wrote nothing that parses here (it would add a syntax error)")
    consumed = finished.replace_end_offset - cursor  # characters after the cursor the completion replaces
    if consumed <= len(target.tail):
        return Outcome(target, target.head + finished.insert_text + target.tail[consumed:], target.end)
    end = target.end + consumed - len(target.tail)
    if end > target.node_end:
        return refuse(target, "the model's text would change code outside the node")
    return Outcome(target, target.head + finished.insert_text, end)


async def _docstring(ls: WaferlineServer, uri: str, src: Source, target: Target) -> Outcome:
    text = src.text
    python = src.language_id == "python"
    prefix = text[max(target.start - PREFIX_CHARS, 0) : target.start] + target.head
    suffix = target.tail + text[target.end : target.end + SUFFIX_CHARS]

    def stop(partial: str) -> bool:
        if python:
            return '"""' in partial or partial.count("\n") >= target.max_lines
        return "\n" in partial

    budget = action_budget(ls.options, max_new_tokens=DOCSTRING_TOKENS)
    completion = await infill(ls.worker, action_key(uri), prefix, suffix, budget, should_stop=stop)
    if completion is None:
        return refuse(target, "superseded by a newer code action on this document")
    if (stopped := _unavailable(target, completion.stop_reason)) is not None:
        return stopped
    indent = src.indent_at(target.start) if python else ""
    doc = clean_docstring(completion.text, python, indent)
    if not doc:
        return refuse(target, "the model wrote no docstring")
    closing = "\n" + indent if "\n" in doc else ""
    return Outcome(target, target.head + doc + closing + target.tail, target.end)


def clean_docstring(raw: str, python: bool, indent: str) -> str:
    """The model's docstring text: cut at the closing quotes, lines re-indented; "" when it has no words."""
    if not python:
        line = raw.split("\n", 1)[0].strip().lstrip("/#-*! ").strip()
        return line if any(c.isalpha() for c in line) else ""
    body = raw.split('"""', 1)[0].rstrip().rstrip("\\")
    lines = body.split("\n")
    first, rest = lines[0].strip(), textwrap.dedent("\n".join(lines[1:])).split("\n") if len(lines) > 1 else []
    text = "\n".join([first, *[(indent + line) if line.strip() else "" for line in rest]]).rstrip()
    return text if any(c.isalpha() for c in text) else ""


def insert_missing_tokens(src: Source, target: Target) -> Outcome | None:
    """The repair tree-sitter already knows: the tokens it marked MISSING (a `)`, a `:`), inserted; None when there
    are none or they do not make the statement parse."""
    parser = parser_for(src.language_id)
    assert parser is not None
    root = parser.parse(src.source).root_node
    lo, hi = src.byte(target.start), src.byte(target.end)
    inserts: list[tuple[int, str]] = []
    stack: list[Node] = [root]
    while stack:
        node = stack.pop()
        if node.end_byte < lo or node.start_byte > hi or not (node.has_error or node.is_missing):
            continue
        if node.is_missing and not node.is_named and not node.type.startswith("_") and lo <= node.start_byte <= hi:
            inserts.append((src.offset(node.start_byte), node.type))
        stack.extend(node.children)
    if not inserts:
        return None
    region = src.text[target.start : target.end]
    for at, token in sorted(inserts, reverse=True):
        region = region[: at - target.start] + token + region[at - target.start :]
    if new_syntax_error(src.language_id, src.text, target.start, target.end, region) is not None:
        return None
    return Outcome(target, region, target.end, source="missing tokens")


def extract_code(reply: str) -> str:
    """The code of a chat reply: its first fenced block, else the whole reply."""
    m = _FENCE.search(reply)
    return (m.group(1) if m else reply).strip("\n")


def reindent(code: str, first_column_indent: str) -> str:
    """Model code placed at a span that starts after `first_column_indent`: the lines after the first indented like
    the span's. A reply whose first line is flush and whose other lines are already indented deeper than the span
    (it echoed the code as it stands in the file) keeps its indentation."""
    lines = code.rstrip().split("\n")
    rest = [line for line in lines[1:] if line.strip()]
    deepest_common = min((len(line) - len(line.lstrip()) for line in rest), default=0)
    if rest and lines[0] == lines[0].lstrip() and deepest_common > len(first_column_indent):
        return "\n".join(lines)
    lines = textwrap.dedent("\n".join(lines)).split("\n")
    return "\n".join([lines[0], *[(first_column_indent + line) if line.strip() else "" for line in lines[1:]]])


async def _chat_rewrite(ls: WaferlineServer, uri: str, src: Source, target: Target, instruction: str | None) -> Outcome:
    if not ls.worker.can_chat():
        return refuse(target, "rewriting as instructed needs an instruction-following model (a chat template)")
    if target.kind == REPAIR:
        instruction = "Fix the syntax error in this code. Keep its meaning; change as little as possible."
    if not instruction or not instruction.strip():
        return refuse(target, "no instruction was given")
    text, lang = src.text, src.language_id
    code = text[target.start : target.end]
    before = "\n".join(text[: src.line_start(target.start)].split("\n")[-CHAT_CONTEXT_LINES - 1 :])
    after = "\n".join(text[target.end :].split("\n")[: CHAT_CONTEXT_LINES + 1])
    messages = [
        {"role": "system", "content": "You edit code. Reply with only the new code, in one fenced code block."},
        {"role": "user", "content": (
            f"The code before it:\n```{lang}\n{before}\n```\nThe code after it:\n```{lang}\n{after}\n```\n"
            f"Code to change:\n```{lang}\n{code}\n```\nInstruction: {instruction.strip()}"
        )},
    ]  # fmt: skip
    try:
        completion = await chat(ls.worker, action_key(uri), messages, action_budget(ls.options))
    except ValueError as e:
        return refuse(target, str(e))
    if completion is None:
        return refuse(target, "superseded by a newer code action on this document")
    if (stopped := _unavailable(target, completion.stop_reason)) is not None:
        return stopped
    new = extract_code(completion.text)
    if not new.strip():
        return refuse(target, "the model wrote no code")
    return Outcome(target, reindent(new, src.indent_at(target.start)), target.end)
