"""The engine interface: everything the server asks of an engine, and nothing else.

The server (server/worker.py) speaks to an engine only through `Engine`: complete an edit request, warm a session
with the prompt of the next one (prefill only, while idle), chat with messages, say how much prompt text fits,
describe itself, forget a session. The requests carry text, never tokens, so an engine may be the local model
(engine/local.py) or a remote server (llama-server, an OpenAI-compatible server, Ollama) behind HTTP. The server
runs every call of `complete`, `warm` and `chat` on the lane the engine names for it (`lane`: engine/jobs.py), one
call at a time per lane, and `drop_session` and `describe` on the default lane (the engine thread); the local engine
names the default lane for everything, so its model is touched by one thread at a time, while a remote engine names
one lane per document so that documents are served side by side. `context_chars` and `lane` are also called from the
event loop and must answer from what the engine knew when it was built.

Which engine serves which feature is the server's configuration (engine/routing.py): a request's `route` says
whether it is a keystroke's inline completion or chat-style work (hover summaries, `waferline/ask`, code actions).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

from waferline.engine.jobs import DEFAULT_LANE

# The queue the server runs each engine call on, by lane (re-exported: the server sees the engine through here)
from waferline.engine.jobs import Job as Job
from waferline.engine.jobs import JobQueue as JobQueue

# Called by the engine between tokens: True once the request is superseded, cancelled or preempted; the engine then
# returns what it has, with stop reason "cancelled".
ShouldCancel = Callable[[], bool]
# "completion": a keystroke's inline completion; "chat": chat-style work (hover summaries, ask, code actions), which
# the server may route to another engine (engine/routing.py). Chat requests are always "chat".
Route = Literal["completion", "chat"]
ENGINE_LANE = DEFAULT_LANE  # the lane of the local engine: the server's engine thread


@dataclass(kw_only=True)
class EditRequest:
    """What the engine needs to complete at a cursor: prompt parts, stop rules and a budget; no LSP, no tokens."""

    session_id: str  # one KV session per document, so a keystroke reuses that document's cache
    prefix: str  # text before the cursor the model sees (stable context first, see inline.py)
    suffix: str  # text after the cursor the model sees
    max_new_tokens: int = 32
    temperature: float = 0.0
    time_budget_s: float | None = 0.3
    stop_strings: tuple[str, ...] = ()
    # The syntax stop rule: called with the completion so far, True ends generation (end of statement or block).
    should_stop: Callable[[str], bool] | None = None
    # Whole completions the server found in the document (prompt lookup); the engine may answer with one of them
    # instead of its own text when it finds that one likelier (engine/candidates.py). An engine may ignore them.
    candidates: tuple[str, ...] = ()
    # Text the completion likely starts with (the server sends the still-valid tail of the model's previous text for
    # this document, server/features/suggestion_cache.py): a draft the engine verifies several tokens per step
    # (speculative decoding, engine/speculate.py, ranked before n-gram lookup). It changes how fast the completion
    # comes, never what it is. An engine may ignore it.
    draft: str = ""
    # Text the completion may copy pieces of, when there is no draft (the server sends the model's previous text for
    # the document where the user typed something else than its start): n-gram lookup searches it first. Like the
    # draft it changes how fast the completion comes, never what it is. An engine may ignore it.
    lookup: str = ""
    route: Route = "completion"


@dataclass(kw_only=True)
class ChatRequest:
    """An assistant reply to write after `messages` ({"role": "system" | "user" | "assistant", "content": text})."""

    session_id: str  # its own KV session: the messages of the next request of this kind share their start
    messages: list[dict[str, str]]
    max_new_tokens: int = 256
    temperature: float = 0.0
    time_budget_s: float | None = None
    # Called with each piece of the reply's text as it is written, on the thread that runs the call (the server
    # streams it: waferline/ask with a partialResultToken, server/features/ask_stream.py). The pieces joined are a
    # prefix of the Completion's `text` (what is held back, a character's unfinished bytes, comes only there). It
    # must return at once and never raise. An engine that cannot stream may ignore it: the reply then comes whole.
    on_text: Callable[[str], None] | None = None


@dataclass
class Completion:
    text: str
    # generate.STOP_REASONS: stop_token, stop_string, stop_rule, max_tokens, time_budget, cancelled...; and from `warm`,
    # prefilled or unsupported
    stop_reason: str
    prompt_tokens: int = 0
    reused_tokens: int = 0  # prompt tokens served from the session's KV cache
    prefilled_tokens: int = 0  # prompt tokens computed for this request
    new_tokens: int = 0
    prefill_s: float = 0.0
    decode_s: float = 0.0
    queue_s: float = 0.0  # time spent waiting for the engine thread
    timings: dict[str, float] = field(default_factory=dict)
    # The model's own confidence, which the server calibrates (syntax/confidence.py): the natural-log
    # probability of each generated token, and of the stop token that ended the text when one did. An engine that
    # cannot tell leaves them empty and None (the server then does not gate its suggestions).
    token_logprobs: list[float] = field(default_factory=list)
    stop_logprob: float | None = None
    # Where each token's text ends in `text` (characters), beside token_logprobs; empty when the engine cannot say
    # (a remote engine, a copied candidate): the server then keeps its first verdict on a suggestion as it is typed.
    token_ends: list[int] = field(default_factory=list)
    chosen: str = "model"  # "model": the engine's own text; "candidate": one of the request's candidates
    # Speculative decoding (engine/speculate.py): forward passes after prefill, drafted tokens verified and kept,
    # and per draft source [proposed, accepted]. Tokens per step = (decode_steps + accepted_tokens) / decode_steps.
    decode_steps: int = 0
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    draft_sources: dict[str, list[int]] = field(default_factory=dict)
    # Why the engine the options named could not answer this request (a remote engine down): the answer came from
    # the local fallback, or is empty. None when it answered. The server shows the engine's state from it.
    unavailable: str | None = None

    @property
    def tokens_per_step(self) -> float:
        return (self.decode_steps + self.accepted_tokens) / self.decode_steps if self.decode_steps else 0.0

    @property
    def complete(self) -> bool:
        """False when generation was cut short by cancellation: the text may end mid-thought."""
        return self.stop_reason != "cancelled"


@dataclass(frozen=True)
class EngineInfo:
    description: str  # one line for the editor's log and `waferline/stats`: model, weights, where it runs
    can_chat: bool  # follows instructions (the model has a chat template): ask and rewrite need it
    can_warm: bool = False  # `warm` fills a cache the next `complete` reads (the local model); False: warm is a no-op
    warning: str | None = None  # something the user should be told once (a remote engine down, the local one answers)
    chat: str | None = None  # with a second engine for chat-style work (engine/routing.py): its description
    # What does not answer from the start, per part ("completion", "chat"): (why, whether the local model answers in
    # its place). A remote engine down at start; the server shows it as the engine's state (server/engine_state.py).
    problems: dict[str, tuple[str, bool]] = field(default_factory=dict)
    # Part of the engine is still loading in the background (a chat model: engine/deferred.py): what it says will
    # change, so the server describes it again until this is False.
    pending: bool = False


class ChatUnsupported(ValueError):
    """The engine cannot follow instructions: a completion-only model has no chat template."""


class EngineUnavailable(ValueError):
    """The engine could not answer this request: a remote one unreachable, timed out, answering an HTTP error or a
    malformed stream. The message names the server and the reason (never an API key)."""


class Engine(Protocol):
    def complete(self, request: EditRequest, should_cancel: ShouldCancel) -> Completion:
        """Fill in between the request's prefix and suffix. ValueError when the engine refuses the request."""
        ...

    def warm(self, request: EditRequest, should_cancel: ShouldCancel) -> Completion:
        """Prefill the prompt `complete` would build for `request` into its session and decode nothing, so that the
        request that follows at the same cursor only prefills what was typed since. Stop reason "prefilled" (the
        session holds the prompt; `prefilled_tokens` says how many it computed, 0 when it held it already),
        "cancelled" (stopped between chunks: what was prefilled stays, a valid prefix), or "unsupported" (an engine
        without such a cache: `EngineInfo.can_warm` is False). ValueError when it refuses the request, as `complete`."""
        ...

    def chat(self, request: ChatRequest, should_cancel: ShouldCancel) -> Completion:
        """The assistant's reply to the messages. ChatUnsupported for a completion-only model; ValueError when
        the messages do not fit."""
        ...

    def context_chars(self, max_new_tokens: int) -> int | None:
        """How many characters of prompt text fit the model's context with `max_new_tokens` to spare (None: any)."""
        ...

    def describe(self) -> EngineInfo: ...

    def drop_session(self, session_id: str) -> None:
        """Free what the engine keeps for a session (its KV cache); a session it does not know is no error."""
        ...

    def lane(self, request: EditRequest | ChatRequest, key: str) -> str:
        """The lane (engine/jobs.py) the request's call runs on: calls on one lane run one at a time, on different
        lanes at the same time. `key` is the server's job key: the document, or the kind of model task."""
        ...
