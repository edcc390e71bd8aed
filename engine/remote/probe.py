"""Which dialect a server speaks: the one the user named, or, with `auto`, each dialect whose probe the server
answers, in `PROBE_ORDER`; and which failures mean "this endpoint is not the one to use" (`refused`), so that the
engine moves to the next dialect found and remembers it for the session (engine/remote/engine.py).

The probes: llama-server's `GET /props` (only llama-server has it), Ollama's `GET /api/tags`, and `GET /v1/models`
of OpenAI-compatible servers. Ollama is asked before the OpenAI layout because Ollama answers `/v1/models` too (its
OpenAI compatibility layer), and its own `/api/generate` with `raw: true` is what waferline's FIM text needs. A
server that does not answer at all (nothing listens, a timeout) stops the probing at once: it is down, not another
dialect.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Literal

from waferline.engine.remote.llama_server import LlamaServer
from waferline.engine.remote.ollama import Ollama
from waferline.engine.remote.openai import OpenAICompletions
from waferline.engine.remote.stream import RemoteError

log = logging.getLogger(__name__)

Dialect = Literal["auto", "llama-server", "openai", "ollama"]
DIALECTS: tuple[Dialect, ...] = ("auto", "llama-server", "openai", "ollama")
PROBE_ORDER: tuple[Dialect, ...] = ("llama-server", "ollama", "openai")
PROBED = {"llama-server": "/props", "ollama": "/api/tags", "openai": "/v1/models"}
DEFAULT_CONTEXT_TOKENS = 4096  # when the server does not say (OpenAI-compatible servers, Ollama)
DEFAULT_FIM = "qwen2.5-coder"  # the FIM family assumed for OpenAI-compatible and Ollama servers unless told
# HTTP statuses that say the endpoint is not there (404, 405, 501 Not Implemented: llama-server's answer to /infill
# for a model without FIM tokens) or will not take the dialect's request (400).
REFUSING_STATUSES = frozenset({400, 404, 405, 501})

Client = LlamaServer | Ollama | OpenAICompletions


@dataclass
class Connected:
    """A dialect client whose probe the server answered, with what the probe told."""

    dialect: Dialect
    client: Client
    context_tokens: int
    model: str
    can_template: bool = False  # llama-server: /props gave a chat template to write chat prompts with


def refused(e: RemoteError) -> bool:
    """The endpoint is not there or refuses the dialect's request: worth the next dialect. A 400 about the prompt's
    length is the request's fault, not the dialect's: the next dialect would refuse it as well."""
    if e.status not in REFUSING_STATUSES:
        return False
    return not (e.status == 400 and "context" in str(e).lower())


async def connect_one(
    dialect: Dialect, url: str, *, model: str | None, fim_template: str | None, **kw: Any
) -> Connected:  # fmt: skip
    """The client of one named dialect, probed (RemoteError when the server does not answer as that dialect)."""
    if dialect == "llama-server":
        server = LlamaServer(url, fim_template=fim_template, **kw)
        try:
            props = await server.probe()
        except BaseException:
            await server.aclose()
            raise
        return Connected(dialect, server, props.context_tokens, props.model, can_template=bool(props.chat_template))
    if dialect == "openai":
        openai = OpenAICompletions(url, family=fim_template or DEFAULT_FIM, model=model, **kw)
        try:
            served = await openai.probe()
        except BaseException:
            await openai.aclose()
            raise
        return Connected(dialect, openai, openai.context_tokens or DEFAULT_CONTEXT_TOKENS, served)
    if dialect == "ollama":
        ollama = Ollama(url, model=model, family=fim_template or DEFAULT_FIM, **kw)
        try:
            await ollama.probe()
        except BaseException:
            await ollama.aclose()
            raise
        return Connected(dialect, ollama, DEFAULT_CONTEXT_TOKENS, str(ollama.model))
    raise ValueError(f"unknown engine dialect {dialect!r}; choose {', '.join(DIALECTS)}")


async def connect(
    dialect: Dialect, url: str, *, model: str | None = None, fim_template: str | None = None, **kw: Any
) -> list[Connected]:  # fmt: skip
    """The dialect clients to use, in order: the named one, or with `auto` every dialect the server answers the probe
    of (the first is the server's own; the others are where a refused endpoint falls back to). A RemoteError when the
    server is unreachable, or answers no dialect's probe (each probe's answer named)."""
    if dialect != "auto":
        return [await connect_one(dialect, url, model=model, fim_template=fim_template, **kw)]
    found: list[Connected] = []
    answers: list[str] = []
    for candidate in PROBE_ORDER:
        try:
            found.append(await connect_one(candidate, url, model=model, fim_template=fim_template, **kw))
        except RemoteError as e:
            if not e.reached:
                for c in found:
                    await c.client.aclose()
                raise
            said = str(e).removeprefix(url.rstrip("/"))
            answers.append(said if said.startswith(PROBED[candidate]) else f"{PROBED[candidate]}:{said}")
    if not found:
        raise RemoteError(
            f"{url} does not answer as llama-server, Ollama or an OpenAI-compatible server ({'; '.join(answers)})"
        )
    log.info("%s speaks %s", url, ", ".join(c.dialect for c in found))
    return found
