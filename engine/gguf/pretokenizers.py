"""The pre-tokenizers a GGUF file names (`tokenizer.ggml.pre`), as llama.cpp defines them, for byte-level BPE.

A byte-level BPE tokenizer first splits text into words by regular expressions, then merges each word's bytes.
Which expressions is not in the file, only a name: llama.cpp keeps the table (`llama_vocab::impl::load` maps the
name to a type, `llm_tokenizer_bpe` the type to its expressions, in llama-vocab.cpp), and a file written by
llama.cpp's converter tokenizes as its source model did only with that table. This module is the same table for the
names whose expressions the `tokenizers` library can run, reimplemented from llama.cpp 0.3.36's (the llama.cpp that
llama-cpp-python 0.3.36 vendors, which the tests build): each expression is applied in turn to the pieces the
previous ones left, a match and the text between matches each becoming a piece, which is the tokenizers library's
Split with behaviour "Isolated" in a Sequence. llama.cpp spells case-insensitive contractions `'[sS]` where the
Hugging Face files write `(?i:'s)`; the spellings here are llama.cpp's, since parity with llama.cpp is what is tested
(tests/engine/test_gguf_pretokenizers.py, token for token against llama-server's /tokenize).

Two of llama.cpp's per-name settings change the tokens: `ignore_merges` (a word that is itself a token is taken whole,
without merging, as Llama 3 does) and the BOS default (`add_bos`, used when the file has no
`tokenizer.ggml.add_bos_token`). `clean_spaces` only changes llama.cpp's detokenizer; waferline decodes bytes as they
are. Names whose splitting llama.cpp does in custom code (kimi-k2, afmoe), whose tokenizer is not byte-level (gemma4's
SentencePiece-style vocabulary) or whose expressions are long Unicode tables (deepseek-llm, deepseek-v3) are refused
with the list of known names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# The building blocks of llama.cpp's expressions.
_CONTRACTIONS = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"


def _cl100k(digits: str, punctuation_tail: str = r"[\r\n]*") -> str:
    """The Llama 3 / Qwen2 family's expression (GPT-4's cl100k split) with its digit run and punctuation tail."""
    return (
        _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|" + digits + r"| ?[^\s\p{L}\p{N}]+" + punctuation_tail
        + r"|\s*[\r\n]+|\s+(?!\S)|\s+"
    )  # fmt: skip


@dataclass(frozen=True)
class PreTokenizer:
    """One row of llama.cpp's table: the expressions, applied in turn, and the settings that change tokens."""

    splits: tuple[str, ...]
    ignore_merges: bool = False
    add_bos: bool = False  # llama.cpp's default when the file does not say (tokenizer.ggml.add_bos_token)

    def document(self) -> dict[str, Any]:
        """The tokenizers library's pre_tokenizer JSON: the splits, then the byte mapping without a split of its own."""
        steps: list[dict[str, Any]] = [
            {"type": "Split", "pattern": {"Regex": r}, "behavior": "Isolated", "invert": False} for r in self.splits
        ]
        steps.append({"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False})
        return {"type": "Sequence", "pretokenizers": steps}


_LLAMA3 = PreTokenizer((_cl100k(r"\p{N}{1,3}"),), ignore_merges=True, add_bos=True)
_LLAMA3_SPLIT = PreTokenizer((_cl100k(r"\p{N}{1,3}"),))  # dbrx, smaug-bpe: Llama 3's expression, no other setting
_QWEN2 = PreTokenizer((_cl100k(r"\p{N}"),))
_GPT2_ROW = PreTokenizer((_GPT2,))
_STARCODER = PreTokenizer((r"\p{N}", _GPT2))  # each digit its own piece, then GPT-2's split
_DEEPSEEK_CODER = PreTokenizer((r"[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", "[一-龥ࠀ-一가-\ud7ff]+", r"\p{N}"))
_DEFAULT = PreTokenizer((r"[\p{P}\$\+<=>\^~\|]+", _GPT2, r"\p{N}+", "[0-9][0-9][0-9]"))
_FALCON = PreTokenizer((r"[\p{P}\$\+<=>\^~\|`]+", _GPT2, "[0-9][0-9][0-9]"))
_TEKKEN = PreTokenizer(
    (
        r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+"
        r"|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*"
        r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    ),
    ignore_merges=True,
    add_bos=True,
)
_SEED_CODER = PreTokenizer(
    (_CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+",)
)

# (the names of tokenizer.ggml.pre, the row they share), grouped as llama.cpp groups them
_GROUPS: tuple[tuple[tuple[str, ...], PreTokenizer], ...] = (
    (("default",), _DEFAULT),
    (("llama-bpe", "llama3", "llama-v3", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
      "jina-v5-nano"), _LLAMA3),
    (("dbrx", "smaug-bpe"), _LLAMA3_SPLIT),
    (("qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez", "stablelm2", "hunyuan", "solar-open",
      "grok-2"), _QWEN2),
    (("gpt-2", "phi-2", "mpt", "olmo", "jais", "mellum", "a.x-4.0", "exaone4", "gigachat", "trillion",
      "granite-docling"), _GPT2_ROW),
    (("starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b", "mellum2"), _STARCODER),
    (("deepseek-coder",), _DEEPSEEK_CODER),
    (("falcon",), _FALCON),
    (("tekken",), _TEKKEN),
    (("seed-coder",), _SEED_CODER),
)  # fmt: skip
PRE_TOKENIZERS: dict[str, PreTokenizer] = {name: row for names, row in _GROUPS for name in names}
# one name of each distinct row, for the parity test and the docs
REPRESENTATIVES: tuple[str, ...] = tuple(names[0] for names, _ in _GROUPS)


def pre_tokenizer(name: str | None) -> PreTokenizer | None:
    """The row for a file's `tokenizer.ggml.pre` (llama.cpp reads a missing name as "default"); None when unknown."""
    return PRE_TOKENIZERS.get(name or "default")
