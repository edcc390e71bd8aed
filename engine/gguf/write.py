"""Exporting a Hugging Face model directory (Llama or Qwen2 layout, byte-level BPE tokenizer) as one GGUF file.

The file carries what llama.cpp needs to run the model as waferline does: the shape, the tokenizer (vocabulary,
merges, the pre-tokenizer's name, control tokens), BOS/EOS and the FIM token ids that llama-server's `/infill`
builds its prompt from, plus `waferline.fim_template` so that waferline reads the same layout back. 2-D weights are
written as F32, F16, Q8_0, Q4_0, Q4_1, Q5_0 or Q5_1 (the `gguf` package quantises the blocks), norms and biases
always as F32, as llama.cpp's own converter does. The file appears complete or not at all (written beside the
target, then renamed).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from waferline.engine.checkpoint import (
    CheckpointError,
    args_from_config,
    load_tokenizer,
    special_tokens_from_files,
)
from waferline.engine.fim import detect_family
from waferline.engine.gguf.names import ARCHITECTURES, EXPORT_PRE_TOKENIZERS, gguf_name, to_gguf_rows
from waferline.engine.gguf.read import CONTROL, FIM_TEMPLATE_KEY
from waferline.engine.weights import read_json, stream_tensors, weight_shards

KINDS = ("f32", "f16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1")
NORMAL = 1  # gguf.TokenType.NORMAL
FIM_TOKENS = {  # tokenizer.ggml.<key>_token_id -> the token's text in waferline's and Qwen2.5-Coder's vocabularies
    "fim_pre": "<|fim_prefix|>", "fim_suf": "<|fim_suffix|>", "fim_mid": "<|fim_middle|>",
    "fim_pad": "<|fim_pad|>", "fim_rep": "<|repo_name|>", "fim_sep": "<|file_sep|>",
}  # fmt: skip


def export_gguf(model_dir: str | Path, out: str | Path, kind: str = "q8_0", *, overwrite: bool = False) -> Path:
    """Write `model_dir` as the GGUF file `out` with 2-D weights in `kind` (one of KINDS)."""
    import gguf

    model_dir, out = Path(model_dir), Path(out)
    if kind not in KINDS:
        raise CheckpointError(f"unknown GGUF weight type {kind!r}; choose {', '.join(KINDS)}")
    if out.exists() and not overwrite:
        raise CheckpointError(f"{out} already exists (pass --overwrite to replace it)")
    cfg = read_json(model_dir / "config.json")
    args = args_from_config(cfg, model_dir / "config.json")
    if args.rope_scaling:
        raise CheckpointError(f"{model_dir}: exporting a model with rope scaling is not supported")
    tokenizer, tokenizer_config = load_tokenizer(model_dir, args)
    special = special_tokens_from_files(model_dir, tokenizer, args, cfg, tokenizer_config)
    document = json.loads(tokenizer.backend_tokenizer.to_str())
    arch = ARCHITECTURES[args.model_type]
    qtype = {"f32": gguf.GGMLQuantizationType.F32, "f16": gguf.GGMLQuantizationType.F16,
             "q8_0": gguf.GGMLQuantizationType.Q8_0, "q4_0": gguf.GGMLQuantizationType.Q4_0,
             "q4_1": gguf.GGMLQuantizationType.Q4_1, "q5_0": gguf.GGMLQuantizationType.Q5_0,
             "q5_1": gguf.GGMLQuantizationType.Q5_1}[kind]  # fmt: skip
    file_type = {"f32": gguf.LlamaFileType.ALL_F32, "f16": gguf.LlamaFileType.MOSTLY_F16,
                 "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0, "q4_0": gguf.LlamaFileType.MOSTLY_Q4_0,
                 "q4_1": gguf.LlamaFileType.MOSTLY_Q4_1, "q5_0": gguf.LlamaFileType.MOSTLY_Q5_0,
                 "q5_1": gguf.LlamaFileType.MOSTLY_Q5_1}[kind]  # fmt: skip

    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    tmp.chmod(0o644)
    try:
        w = gguf.GGUFWriter(tmp, arch)
        w.add_name(model_dir.resolve().name)
        w.add_file_type(int(file_type))
        w.add_context_length(args.max_seq_len)
        w.add_embedding_length(args.dim)
        w.add_block_count(args.n_layers)
        w.add_feed_forward_length(args.intermediate_size)
        w.add_head_count(args.n_heads)
        w.add_head_count_kv(args.n_kv_heads)
        w.add_key_length(args.head_dim)
        w.add_value_length(args.head_dim)
        w.add_rope_dimension_count(args.head_dim)
        w.add_rope_freq_base(args.rope_theta)
        w.add_layer_norm_rms_eps(args.norm_eps)
        w.add_vocab_size(args.vocab_size)
        _add_tokenizer(w, document, args.vocab_size, model_dir)
        for name, value in (("bos", special.bos_id), ("eos", special.eos_id), ("padding", special.pad_id)):
            if value is not None:
                w.add_uint32(f"tokenizer.ggml.{name}_token_id", value)
        w.add_add_bos_token(special.add_bos)
        family = detect_family(tokenizer, tokenizer_config)
        if family is not None:
            w.add_string(FIM_TEMPLATE_KEY, family)
        for key, token in FIM_TOKENS.items():
            if (i := tokenizer.token_to_id(token)) is not None:
                w.add_uint32(f"tokenizer.ggml.{key}_token_id", i)
        for hf, t in stream_tensors(weight_shards(model_dir)):
            if hf == "lm_head.weight" and args.tie_embeddings:
                continue
            array = to_gguf_rows(args, hf, t.float()).numpy()
            if array.ndim == 1 or kind == "f32":
                w.add_tensor(gguf_name(hf), np.ascontiguousarray(array, dtype=np.float32))
            elif kind == "f16":
                w.add_tensor(gguf_name(hf), array.astype(np.float16))
            else:
                w.add_tensor(gguf_name(hf), gguf.quants.quantize(array, qtype), raw_dtype=qtype)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        tmp.replace(out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return out


def _add_tokenizer(w: Any, document: dict[str, Any], vocab_size: int, model_dir: Path) -> None:
    model = document.get("model") or {}
    if model.get("type") != "BPE" or model.get("byte_fallback"):
        raise CheckpointError(f"{model_dir}: only byte-level BPE tokenizers can be exported to GGUF")
    pre = _pre_tokenizer_name(document.get("pre_tokenizer"))
    if pre is None:
        raise CheckpointError(
            f"{model_dir}: the tokenizer's pre-tokenizer is none llama.cpp knows by name "
            f"({', '.join(EXPORT_PRE_TOKENIZERS)}); llama.cpp would split text differently"
        )
    vocab: dict[str, int] = model["vocab"]
    tokens = [""] * vocab_size
    types = [NORMAL] * vocab_size
    for text, i in vocab.items():
        tokens[i] = text
    for added in document.get("added_tokens") or []:
        tokens[added["id"]] = added["content"]
        types[added["id"]] = CONTROL if added.get("special") else NORMAL
    for i, text in enumerate(tokens):
        if not text:  # ids past the tokenizer's vocabulary (a padded embedding)
            tokens[i], types[i] = f"[PAD{i}]", 5  # gguf.TokenType.UNUSED
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges") or []]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)


def _pre_tokenizer_name(pre: Any) -> str | None:
    """The llama.cpp name of a tokenizers pre-tokenizer (a Split by a known expression, then ByteLevel)."""
    steps = pre.get("pretokenizers") if isinstance(pre, dict) and pre.get("type") == "Sequence" else None
    if not steps or len(steps) != 2 or steps[1].get("type") != "ByteLevel" or steps[0].get("type") != "Split":
        return None
    regex = (steps[0].get("pattern") or {}).get("Regex")
    return next((name for name, expr in EXPORT_PRE_TOKENIZERS.items() if expr == regex), None)
