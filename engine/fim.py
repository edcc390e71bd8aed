"""Fill-in-the-middle prompts: the text before the cursor (prefix) and after it (suffix) laid out as token ids.

Control tokens are placed as ids; prefix and suffix are encoded as plain text (`Tokenizer.encode`), so a file that
contains "<|fim_prefix|>" cannot inject the control token. The layouts, with [X] a control token and P, S the encoded
prefix and suffix:

    qwen2.5-coder, waferline   PSM  [<|fim_prefix|>] P [<|fim_suffix|>] S [<|fim_middle|>]
                               SPM  [<|fim_prefix|>] [<|fim_suffix|>] S [<|fim_middle|>] P
                               stop <|endoftext|> <|file_sep|> (and <|fim_pad|> <|repo_name|> <|im_end|> if present)
    starcoder2                 PSM  [<fim_prefix>] P [<fim_suffix>] S [<fim_middle>]
                               SPM  [<fim_prefix>] [<fim_suffix>] S [<fim_middle>] P
                               stop <|endoftext|> <file_sep> (and <fim_pad> <repo_name>)
    deepseek-coder             PSM  [BOS] [<｜fim▁begin｜>] P [<｜fim▁hole｜>] S [<｜fim▁end｜>]
                               SPM  [BOS] [<｜fim▁begin｜>] [<｜fim▁hole｜>] S [<｜fim▁end｜>] P
                               stop <｜end▁of▁sentence｜> <|EOT|>
    codellama                  PSM  [BOS] [▁<PRE>] P [▁<SUF>] S' [▁<MID>]
                               SPM  [BOS] [▁<PRE>] [▁<SUF>] S' [▁<MID>] P
                               stop ▁<EOT> </s>

SPM puts the prefix last, so typing at the cursor only changes the tail of the prompt: everything up to the middle
token stays identical and the server's KV cache reuses it (only the last word's tokens are prefilled again). It is
the SPM variant of Bavarian et al. 2022 that StarCoder and CodeLlama trained with. Qwen2.5-Coder and DeepSeek-Coder
were trained on PSM only: for them SPM is offered but PSM is the default. waferline's own model is trained on both
and defaults to SPM. CodeLlama's S' is the suffix encoded without the SentencePiece word-start space
(`Tokenizer.encode_infix`), as in Meta's reference `infilling_prompt_tokens`.

A model without FIM tokens (SmolLM2, most instruction and chat models) completes from the prefix alone
(`PrefixTemplate`): [BOS when the model adds one] P, the same ids the model sees for any text it continues, and
the suffix's first line (the rest of the cursor's line, or a line break and the next non-blank line when the rest
is blank) as a stop string, so a completion ends where the text after the cursor begins instead of writing it a
second time. Such a prompt ends at the cursor, as SPM's does: typing only appends tokens, and token healing applies.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from waferline.engine.tokenizer import SpecialTokens, Tokenizer

Order = Literal["psm", "spm"]
ORDERS: tuple[Order, ...] = ("psm", "spm")


@dataclass(frozen=True)
class FimFamily:
    """The token strings of one model family's FIM format (each a tuple of spellings, the first found wins)."""

    name: str
    prefix: tuple[str, ...]
    suffix: tuple[str, ...]
    middle: tuple[str, ...]
    stops: tuple[str, ...]  # end-of-text and the tokens that would start another file or another FIM example
    bos: tuple[str, ...] = ()  # prepended when non-empty
    infix_suffix: bool = False  # encode the suffix without a word-start space (SentencePiece tokenizers)
    trained_orders: tuple[Order, ...] = ("psm",)  # the orders the family's models saw in training
    default_order: Order = "psm"


_QWEN_STOPS = ("<|endoftext|>", "<|file_sep|>", "<|fim_pad|>", "<|repo_name|>", "<|fim_prefix|>", "<|im_end|>")

FAMILIES: dict[str, FimFamily] = {
    f.name: f
    for f in (
        FimFamily("waferline", ("<|fim_prefix|>",), ("<|fim_suffix|>",), ("<|fim_middle|>",), _QWEN_STOPS,
                  trained_orders=("psm", "spm"), default_order="spm"),
        FimFamily("qwen2.5-coder", ("<|fim_prefix|>",), ("<|fim_suffix|>",), ("<|fim_middle|>",), _QWEN_STOPS),
        FimFamily("starcoder2", ("<fim_prefix>",), ("<fim_suffix>",), ("<fim_middle>",),
                  ("<|endoftext|>", "<file_sep>", "<fim_pad>", "<repo_name>", "<fim_prefix>"),
                  trained_orders=("psm", "spm")),
        FimFamily("deepseek-coder", ("<｜fim▁begin｜>",), ("<｜fim▁hole｜>",), ("<｜fim▁end｜>",),
                  ("<｜end▁of▁sentence｜>", "<|EOT|>"), bos=("<｜begin▁of▁sentence｜>",)),
        FimFamily("codellama", ("▁<PRE>", "<PRE>"), ("▁<SUF>", "<SUF>"), ("▁<MID>", "<MID>"),
                  ("▁<EOT>", "<EOT>", "</s>"), bos=("<s>",), infix_suffix=True, trained_orders=("psm", "spm")),
    )
}  # fmt: skip


class FimError(ValueError):
    """The tokenizer has no FIM tokens of the family asked for (or of any family)."""


@dataclass(frozen=True)
class FimTemplate:
    """A family's FIM format bound to one tokenizer's ids."""

    family: str
    tokenizer: Tokenizer
    prefix_id: int
    suffix_id: int
    middle_id: int
    stop_ids: tuple[int, ...]
    bos_id: int | None = None
    infix_suffix: bool = False
    default_order: Order = "psm"

    @classmethod
    def for_family(cls, family: str, tokenizer: Tokenizer) -> FimTemplate:
        if family not in FAMILIES:
            raise FimError(f"unknown FIM template {family!r}; known: {', '.join(FAMILIES)}")
        f = FAMILIES[family]
        prefix_id, suffix_id, middle_id = (
            tokenizer.first_token_id(*spellings) for spellings in (f.prefix, f.suffix, f.middle)
        )
        if prefix_id is None or suffix_id is None or middle_id is None:
            lacking = [s[0] for s in (f.prefix, f.suffix, f.middle) if tokenizer.first_token_id(*s) is None]
            raise FimError(f"the tokenizer lacks the {family} FIM tokens {', '.join(lacking)}")
        stops = [i for s in f.stops if (i := tokenizer.token_to_id(s)) is not None]
        return cls(
            family=family,
            tokenizer=tokenizer,
            prefix_id=prefix_id,
            suffix_id=suffix_id,
            middle_id=middle_id,
            stop_ids=tuple(dict.fromkeys(stops)),
            bos_id=tokenizer.first_token_id(*f.bos) if f.bos else None,
            infix_suffix=f.infix_suffix,
            default_order=f.default_order,
        )

    def stop_strings(self, suffix: str) -> tuple[str, ...]:
        """Text that ends a completion besides the stop tokens: none, the model sees the suffix and ends by itself."""
        return ()

    def build(self, prefix: str, suffix: str, order: Order | None = None) -> list[int]:
        """The prompt ids for completing between `prefix` and `suffix` (layouts in the module docstring)."""
        order = order or self.default_order
        if order not in ORDERS:
            raise FimError(f"unknown FIM order {order!r}; use 'psm' or 'spm'")
        tk = self.tokenizer
        p = tk.encode(prefix)
        s = tk.encode_infix(suffix) if self.infix_suffix else tk.encode(suffix)
        head = [self.bos_id] if self.bos_id is not None else []
        if order == "psm":
            return [*head, self.prefix_id, *p, self.suffix_id, *s, self.middle_id]
        return [*head, self.prefix_id, self.suffix_id, *s, self.middle_id, *p]


def detect_family(tokenizer: Tokenizer, tokenizer_config: Mapping[str, Any] | None = None) -> str | None:
    """The FIM family a tokenizer belongs to: tokenizer_config.json's "fim_template" when set, else the family whose
    FIM tokens the vocabulary holds; None when none does."""
    named = (tokenizer_config or {}).get("fim_template")
    if named:
        if named not in FAMILIES:
            raise FimError(f"tokenizer_config.json names the FIM template {named!r}; known: {', '.join(FAMILIES)}")
        return str(named)
    for name in ("qwen2.5-coder", "starcoder2", "deepseek-coder", "codellama"):
        f = FAMILIES[name]
        if all(tokenizer.first_token_id(*spellings) is not None for spellings in (f.prefix, f.suffix, f.middle)):
            # waferline's tokens are Qwen's strings; Qwen's vocabulary also has its chat tokens, waferline's has not
            if name == "qwen2.5-coder" and tokenizer.token_to_id("<|im_start|>") is None:
                return "waferline"
            return name
    return None


def fim_template(tokenizer: Tokenizer, tokenizer_config: Mapping[str, Any] | None = None) -> FimTemplate | None:
    """The bound template for a tokenizer, or None when it has no FIM tokens."""
    family = detect_family(tokenizer, tokenizer_config)
    return FimTemplate.for_family(family, tokenizer) if family else None


@dataclass(frozen=True)
class PrefixTemplate:
    """Completion from the prefix alone, for a model without FIM tokens (module docstring): the interface of
    `FimTemplate` that the local engine uses."""

    tokenizer: Tokenizer
    stop_ids: tuple[int, ...]
    bos_id: int | None = None  # prepended (the model adds a BOS to every text)
    start_id: int | None = None  # the prompt of an empty prefix (a model needs at least one token)
    family: str = "none (prefix only)"
    default_order: Order = "spm"  # the prompt ends at the cursor, as SPM's does (what token healing keys on)

    @classmethod
    def for_model(cls, tokenizer: Tokenizer, special: SpecialTokens) -> PrefixTemplate:
        bos = special.bos_id if special.add_bos else None
        start = tokenizer.first_token_id("<|endoftext|>") if bos is None else bos
        start = start if start is not None else (special.bos_id if special.bos_id is not None else special.eos_id)
        return cls(tokenizer=tokenizer, stop_ids=tuple(special.stop_ids), bos_id=bos, start_id=start)

    def stop_strings(self, suffix: str) -> tuple[str, ...]:
        """The suffix's first line (`suffix_first_line`), where a completion ends."""
        stop = suffix_first_line(suffix)
        return (stop,) if stop else ()

    def build(self, prefix: str, suffix: str, order: Order | None = None) -> list[int]:
        """The prompt ids: the prefix as plain text (the suffix shapes only `stop_strings`)."""
        if order is not None and order not in ORDERS:
            raise FimError(f"unknown FIM order {order!r}; use 'psm' or 'spm'")
        ids = [*([self.bos_id] if self.bos_id is not None else []), *self.tokenizer.encode(prefix)]
        if not ids and self.start_id is not None:
            ids = [self.start_id]
        return ids


def suffix_first_line(suffix: str) -> str:
    """The stop string a suffix gives a prefix-only completion: the rest of the cursor's line (trailing blanks
    dropped); when that is blank, a line break and the next non-blank line with its indentation, so that a short
    line such as ")" stops the completion only where it starts a line, as it does in the document."""
    first, _, rest = suffix.partition("\n")
    if first.strip():
        return first.rstrip()
    return next(("\n" + line.rstrip() for line in rest.split("\n") if line.strip()), "")
