"""Chat prompts for instruction-following models: the chat template of a model directory, rendered to token ids.

A model can follow instructions when its checkpoint carries a chat template (`chat_template` in tokenizer_config.json,
or a chat_template.jinja file, in a model directory; `tokenizer.chat_template` in a GGUF file's metadata, with its BOS
and EOS tokens' text from the file's vocabulary). The template is rendered with a sandboxed Jinja environment; the
messages' text is encoded as plain text (a control-token string in the repository's code stays text), only the
template's own markup may become control tokens. Templates that can let the model reason before it answers (Qwen3's
`enable_thinking`) are rendered with that off: a hover or a code action waits for the answer, not for the reasoning.
"""

from __future__ import annotations

import functools
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from waferline.engine.tokenizer import Tokenizer

PROMPT_SHRINK_TRIES = 6


@dataclass(frozen=True)
class ChatTemplate:
    source: str  # the Jinja template
    bos_token: str
    eos_token: str


def _token_text(value: Any) -> str:
    return str(value.get("content", "")) if isinstance(value, dict) else str(value or "")


@functools.lru_cache(maxsize=8)
def read_chat_template(model_dir: Path) -> ChatTemplate | None:
    """The chat template of a Hugging Face model directory or a GGUF file, or None for a completion-only model."""
    if model_dir.suffix == ".gguf" and model_dir.is_file():
        return gguf_chat_template(model_dir)
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


def gguf_chat_template(path: Path) -> ChatTemplate | None:
    """The chat template in a GGUF file's metadata (`tokenizer.chat_template`), or None when it has none."""
    from waferline.engine.gguf.read import GgufFile  # here: engine/gguf imports the checkpoint code

    f = GgufFile(path)
    source = f.get("tokenizer.chat_template")
    if not isinstance(source, str) or not source.strip():
        return None
    tokens = f.get("tokenizer.ggml.tokens") or []

    def text(name: str) -> str:
        i = f.get(f"tokenizer.ggml.{name}_token_id")
        if i is None or not 0 <= int(i) < len(tokens):
            return ""
        return str(tokens[int(i)])

    return ChatTemplate(source, text("bos"), text("eos"))


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
            eos_token=template.eos_token, enable_thinking=False,
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


# The end-of-turn markers of common chat templates (ChatML, Llama 3, Phi-3, Gemma): a server that is given the
# rendered prompt as plain text (llama-server's /completion) is told to stop at the ones the template writes.
END_OF_TURN = ("<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>")


def render_chat_text(template: ChatTemplate, messages: list[dict[str, str]]) -> str:
    """The chat prompt as one text, for a server that tokenizes it itself; a template without a system role gets
    the system text in the first user message. A leading BOS is left to the server, which adds its own."""
    try:
        pieces = render_chat(template, messages)
    except TemplateError:
        pieces = render_chat(template, _fold_system(messages))
    text = "".join(t for t, _ in pieces)
    return text.removeprefix(template.bos_token) if template.bos_token else text


def end_of_turn(template: ChatTemplate) -> list[str]:
    """The end-of-turn markers the template writes, and its EOS: where a reply ends."""
    found = [m for m in END_OF_TURN if m in template.source]
    return [*found, template.eos_token] if template.eos_token and template.eos_token not in found else found


def chat_prompt_ids(
    tokenizer: Tokenizer, template: ChatTemplate, messages: list[dict[str, str]], room: int
) -> list[int]:
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
