"""Model work besides inline completion: infill at a chosen spot, and chat prompts for instruction-following models.

Everything here runs on the engine's one worker thread (engine/scheduler.py), so it never decodes at the same time as
a completion. Each kind of work has its own job key, which is also its KV session:

- `HOVER_KEY`, an *idle* job: a hover summary runs only while no completion waits, any keystroke's request preempts
  it, and a newer hover's summary supersedes an older one. It never delays a completion.
- `ASK_KEY` and `action_key(uri)`, regular jobs: the user asked for them and waits. They queue with completions in
  arrival order, but under their own keys: typing in a document does not cancel its code action, and a code action
  does not cancel a completion; a newer ask (or a newer action on the same document) supersedes the older one.

A model can follow instructions when its checkpoint carries a chat template (`chat_template` in
tokenizer_config.json, or a chat_template.jinja file). The template is rendered with a sandboxed Jinja environment;
the messages' text is encoded as plain text (a control-token string in the repository's code stays text), only the
template's own markup may become control tokens.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from waferline.engine.scheduler import Completion, EditRequest

if TYPE_CHECKING:
    from waferline.server.worker import Worker

log = logging.getLogger(__name__)

HOVER_KEY = "waferline/hover"
ASK_KEY = "waferline/ask"
PROMPT_SHRINK_TRIES = 6


def action_key(uri: str) -> str:
    return f"waferline/action {uri}"


async def infill(
    worker: Worker, key: str, *, prefix: str, suffix: str, max_new_tokens: int, time_budget_s: float,
    temperature: float = 0.0, should_stop: Callable[[str], bool] | None = None, idle: bool = False,
) -> Completion | None:  # fmt: skip
    """Fill in between `prefix` and `suffix` with the completion model; None when superseded or preempted."""
    request = EditRequest(
        session_id=key, prefix=prefix, suffix=suffix, max_new_tokens=max_new_tokens, temperature=temperature,
        time_budget_s=time_budget_s, should_stop=should_stop,
    )  # fmt: skip
    return await (worker.precompute(request) if idle else worker.complete(request))


@dataclass(frozen=True)
class ChatTemplate:
    source: str  # the Jinja template
    bos_token: str
    eos_token: str


def _token_text(value: Any) -> str:
    return str(value.get("content", "")) if isinstance(value, dict) else str(value or "")


@functools.lru_cache(maxsize=8)
def read_chat_template(model_dir: Path) -> ChatTemplate | None:
    """The chat template of a Hugging Face model directory, or None for a completion-only model."""
    try:
        config = json.loads((model_dir / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        config = {}
    source: Any = config.get("chat_template") if isinstance(config, dict) else None
    if isinstance(source, list):  # [{"name": "default", "template": ...}, {"name": "tool_use", ...}]
        named = {t.get("name"): t.get("template") for t in source if isinstance(t, dict)}
        source = named.get("default") or next(iter(named.values()), None)
    jinja = model_dir / "chat_template.jinja"
    if not source and jinja.is_file():
        source = jinja.read_text(encoding="utf-8")
    if not isinstance(source, str) or not source.strip():
        return None
    return ChatTemplate(source, _token_text(config.get("bos_token")), _token_text(config.get("eos_token")))


async def engine_settled(worker: Worker) -> None:
    """Wait until the engine's first load has ended, either way: until then, whether the model can follow
    instructions is not known. (The worker's own requests wait on the same event.)"""
    await worker._loaded_once.wait()


def chat_template_of(worker: Worker) -> ChatTemplate | None:
    """The loaded model's chat template; None for a completion-only model, the test double, or no model."""
    loaded = getattr(worker.completer, "loaded", None)
    path = getattr(loaded, "path", None)
    return read_chat_template(Path(path)) if path is not None else None


class TemplateError(ValueError):
    """The chat template could not be rendered for these messages."""


def render_chat(template: ChatTemplate, messages: list[dict[str, str]]) -> list[tuple[str, bool]]:
    """The prompt as (text, is_markup) pieces: the template's markup, and each message's content as plain text.

    Contents are rendered as private-use sentinels and put back afterwards, so that the tokenizer can parse control
    tokens in the markup without parsing any in the contents.
    """
    from jinja2 import TemplateError as JinjaError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise TemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: time.strftime(fmt)
    env.filters["tojson"] = lambda v, indent=None: json.dumps(v, ensure_ascii=False, indent=indent)
    marks = [f"\ue000{i}\ue001" for i in range(len(messages))]
    stand_ins = [{"role": m["role"], "content": mark} for m, mark in zip(messages, marks, strict=True)]
    try:
        text = env.from_string(template.source).render(
            messages=stand_ins, add_generation_prompt=True, bos_token=template.bos_token,
            eos_token=template.eos_token,
        )  # fmt: skip
    except JinjaError as e:
        raise TemplateError(f"the model's chat template failed: {e}") from None
    pieces: list[tuple[str, bool]] = []
    for mark, message in zip(marks, messages, strict=True):
        head, found, text = text.partition(mark)
        if not found:
            raise TemplateError(f"the model's chat template dropped the {message['role']} message")
        pieces += [(head, True), (message["content"], False)]
    pieces.append((text, True))
    return pieces


def _fold_system(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """For templates without a system role: the system text goes at the start of the first user message."""
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    rest = [dict(m) for m in messages if m["role"] != "system"]
    if system and rest:
        rest[0]["content"] = f"{system}\n\n{rest[0]['content']}"
    return rest


def chat_prompt_ids(tokenizer: Any, template: ChatTemplate, messages: list[dict[str, str]], room: int) -> list[int]:
    """Token ids of the chat prompt within `room` tokens: the last message is shortened from its end if needed."""
    messages = [dict(m) for m in messages]
    for _ in range(PROMPT_SHRINK_TRIES):
        try:
            pieces = render_chat(template, messages)
        except TemplateError:
            pieces = render_chat(template, _fold_system(messages))
        ids = [i for text, markup in pieces if text for i in tokenizer.encode(text, parse_special=markup)]
        if len(ids) <= room:
            return ids
        content = messages[-1]["content"]
        keep = max(int(len(content) * room / len(ids)) - 64, 0)
        messages[-1]["content"] = content[:keep] + "\n[...]"
    raise ValueError(f"the question and its evidence do not fit the model's context of {room} tokens")


async def chat(
    worker: Worker, key: str, messages: list[dict[str, str]], *, max_new_tokens: int, time_budget_s: float,
    temperature: float = 0.0,
) -> Completion | None:  # fmt: skip
    """Generate the assistant's reply to `messages`; None when superseded or cancelled, ValueError without a
    chat template. Runs on the worker thread in the KV session `key`."""
    await engine_settled(worker)
    template = chat_template_of(worker)
    if template is None:
        raise ValueError("the model has no chat template")

    def work(should_cancel: Callable[[], bool]) -> Completion:
        from waferline.engine.generate import generate

        completer: Any = worker.completer
        lm = completer.loaded
        session = completer.pool.get(key)
        ids = chat_prompt_ids(lm.tokenizer, template, messages, session.max_tokens - max_new_tokens)
        stops = (*lm.special.stop_ids, *sorted(lm.tokenizer.control_ids))  # any control token ends a reply
        result = generate(
            session, ids, max_new_tokens=max_new_tokens, temperature=temperature, stop_token_ids=stops,
            tokenizer=lm.tokenizer, time_budget_s=time_budget_s, should_cancel=should_cancel,
        )  # fmt: skip
        return Completion(
            text=result.text, stop_reason=result.stop_reason, prompt_tokens=result.prompt_tokens,
            reused_tokens=result.reused_tokens, prefilled_tokens=result.prefilled_tokens,
            new_tokens=result.new_tokens, prefill_s=result.prefill_s, decode_s=result.decode_s,
        )  # fmt: skip

    job = worker.scheduler.submit(key, work)
    try:
        return await asyncio.wrap_future(job.future)
    except asyncio.CancelledError:
        worker.scheduler.cancel(job)  # $/cancelRequest: stop decoding for a request nobody waits for
        raise
