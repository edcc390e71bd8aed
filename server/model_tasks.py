"""Model work besides inline completion: infill at a chosen spot, and chat prompts for instruction-following models.

Everything here goes through the worker (server/worker.py) to the engine's one thread, so it never decodes at the
same time as a completion. Each kind of work has its own job key, which is also its KV session:

- `HOVER_KEY`, an *idle* job: a hover summary runs only while no completion waits, any keystroke's request preempts
  it, and a newer hover's summary supersedes an older one. It never delays a completion.
- `ASK_KEY` and `action_key(uri)`, regular jobs: the user asked for them and waits. They queue with completions in
  arrival order, but under their own keys: typing in a document does not cancel its code action, and a code action
  does not cancel a completion; a newer ask (or a newer action on the same document) supersedes the older one.

Whether the model can follow instructions (it has a chat template) is the engine's to say: `Worker.can_chat`.
A reply that opens with the model's reasoning (`<think>…</think>`: a reasoning model whose template or server does not
turn it off) is given without it; reasoning cut off by the budget leaves an empty reply.
All of it is chat-style work (`route="chat"`): the options may route it to another engine than the keystrokes'
(`chatEngine`, engine/routing.py), on a lane of its own, so that it never holds up a keystroke's completion there.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from waferline.engine.api import ChatRequest, Completion, EditRequest

if TYPE_CHECKING:
    from waferline.server.worker import Worker

HOVER_KEY = "waferline/hover"
ASK_KEY = "waferline/ask"


def action_key(uri: str) -> str:
    return f"waferline/action {uri}"


@dataclass(frozen=True)
class Budget:
    """How much one model task may write: tokens, wall-clock time, and how it samples (0: greedy)."""

    max_new_tokens: int
    time_budget_s: float
    temperature: float = 0.0


async def infill(
    worker: Worker, key: str, prefix: str, suffix: str, budget: Budget, *,
    should_stop: Callable[[str], bool] | None = None, idle: bool = False,
) -> Completion | None:  # fmt: skip
    """Fill in between `prefix` and `suffix` with the completion model; None when superseded or preempted."""
    request = EditRequest(
        session_id=key, prefix=prefix, suffix=suffix, max_new_tokens=budget.max_new_tokens,
        temperature=budget.temperature, time_budget_s=budget.time_budget_s, should_stop=should_stop, route="chat",
    )  # fmt: skip
    return await (worker.precompute(request) if idle else worker.complete(request))


async def chat(
    worker: Worker, key: str, messages: list[dict[str, str]], budget: Budget, *,
    on_text: Callable[[str], None] | None = None,
) -> Completion | None:  # fmt: skip
    """Generate the assistant's reply to `messages`; None when superseded or cancelled, ValueError
    (engine.api.ChatUnsupported) without a chat template. Runs in the KV session `key`. `on_text` is given the
    reply's text as it is written, on the engine's thread (engine/api.py `ChatRequest.on_text`), reasoning included:
    the caller leaves out what `without_reasoning` would."""
    request = ChatRequest(
        session_id=key, messages=messages, max_new_tokens=budget.max_new_tokens, temperature=budget.temperature,
        time_budget_s=budget.time_budget_s, on_text=on_text,
    )  # fmt: skip
    completion = await worker.chat(request)
    if completion is None:
        return None
    answer = without_reasoning(completion.text)
    return completion if answer == completion.text else dataclasses.replace(completion, text=answer)


def without_reasoning(text: str) -> str:
    """`text` without a leading `<think>…</think>` block; "" when the block never closes."""
    if not text.lstrip().startswith("<think>"):
        return text
    _, closed, rest = text.partition("</think>")
    return rest.lstrip() if closed else ""
