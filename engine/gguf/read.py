"""Loading a GGUF file of a Llama- or Qwen2-family model: shape, tokenizer and special tokens from its metadata,
weights dequantised into the engine's own formats as they are placed.

Every block format the `gguf` package dequantises is read (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K, ...): each tensor
is turned into float32 one at a time and handed to `Transformer.load`, which places it in the device's weight
format (int8 for the CPU's fast path), so a quantised file is never held as float32 whole. Only byte-level BPE
tokenizers (`tokenizer.ggml.model = "gpt2"`, what Qwen2.5-Coder, Llama 3 and SmolLM2 files carry) with a
pre-tokenizer in llama.cpp's table (pretokenizers.py) are read; anything else is refused with the reason, as is a
file that is not GGUF or is cut short.
"""

from __future__ import annotations

import dataclasses
import io
import json
import mmap
from collections.abc import Iterator
from json.encoder import encode_basestring  # json's own string escaper (its C form)
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from waferline.engine.checkpoint import CheckpointError, LoadedModel
from waferline.engine.fim import FimError, fim_template
from waferline.engine.gguf.header import HeaderError, read_header
from waferline.engine.gguf.names import (
    ARCHITECTURES,
    ROPE_FREQS,
    from_gguf_rows,
    hf_name,
    llama3_freq_factors,
)
from waferline.engine.gguf.pretokenizers import PRE_TOKENIZERS, PreTokenizer, pre_tokenizer
from waferline.engine.hf import from_hf, hf_weight_shape
from waferline.engine.model import ModelArgs, Transformer
from waferline.engine.tokenizer import SpecialTokens, Tokenizer
from waferline.hardware import Device
from waferline.hardware.blocks import BLOCK_FORMATS, BlockWeight, Weight

CONTROL, USER_DEFINED = 3, 4  # gguf.TokenType values of tokens that are never split out of text
FIM_TEMPLATE_KEY = "waferline.fim_template"  # written by engine/gguf/write.py: the FIM layout the model was trained on
LLAMA3_DEFAULT_SCALING = {  # what Llama 3.1/3.2 files were converted with (GGUF keeps only the resulting factors)
    "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class GgufTensor:
    """One tensor: `shape` in GGUF order (the innermost dimension first); `data` a read-only view of the file's bytes
    in the dtype and shape gguf's reader gives (a row of bytes per row of blocks, for a block format)."""

    name: str
    tensor_type: Any  # gguf.GGMLQuantizationType
    shape: tuple[int, ...]
    file: np.ndarray  # the whole file's bytes, memory-mapped
    offset: int
    dtype: np.dtype
    data_shape: tuple[int, ...]

    @property
    def data(self) -> np.ndarray:
        return np.ndarray(self.data_shape, self.dtype, buffer=self.file, offset=self.offset)


# The numpy dtype a tensor's data is read as, where it is not a block format (those are read as bytes, a row each).
ELEMENT_DTYPES = {"F16": np.float16, "F32": np.float32, "F64": np.float64, "I8": np.int8, "I16": np.int16,
                  "I32": np.int32, "I64": np.int64}  # fmt: skip


class GgufFile:
    """A GGUF file opened for reading: its metadata as Python values (engine/gguf/header.py reads them, not gguf's
    reader, which makes numpy objects of every vocabulary entry) and its tensors by name (memory-mapped)."""

    def __init__(self, path: Path) -> None:
        from gguf.quants import quant_shape_to_byte_shape

        self.path = path
        try:
            with open(path, "rb") as fh:
                self._mmap = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
            self._map = np.frombuffer(self._mmap, dtype=np.uint8)
            with memoryview(self._mmap) as view:
                header = read_header(view)
        except (HeaderError, ValueError, OSError) as e:
            raise CheckpointError(f"{path} is not a readable GGUF file ({type(e).__name__}: {e})") from None
        if header.big_endian:
            raise CheckpointError(
                f"{path} is a big-endian GGUF file; waferline, as llama.cpp, reads little-endian ones"
            )
        self._values = header.metadata
        self._errors = header.errors
        self.tensors = {}
        for t in header.tensors:
            dims = tuple(reversed(t.shape))
            dtype = ELEMENT_DTYPES.get(t.tensor_type.name)
            if dtype is None:
                dtype, dims = np.uint8, quant_shape_to_byte_shape(dims, t.tensor_type)
            self.tensors[t.name] = GgufTensor(
                t.name, t.tensor_type, t.shape, self._map, t.offset, np.dtype(dtype), tuple(dims)
            )

    def get(self, key: str, default: Any = None) -> Any:
        if key in self._errors:
            raise CheckpointError(f"{self.path}: metadata {key} cannot be read ({self._errors[key]})")
        value = self._values.get(key)
        return default if value is None else value

    def require(self, key: str) -> Any:
        value = self.get(key)
        if value is None:
            raise CheckpointError(f"{self.path}: metadata lacks {key}, which a model file needs")
        return value

    def forget_vocabulary(self) -> None:
        """Drop the parsed vocabulary and merges (the reader's numpy objects of every entry, most of its memory) once
        the tokenizer is built from them."""
        for key in ("tokens", "merges", "token_type", "scores"):
            self._values.pop(f"tokenizer.ggml.{key}", None)

    def weight(self, name: str) -> Tensor | BlockWeight:
        """One tensor as its GGUF blocks (one copy of the file's bytes, not expanded) when it is a matrix in a
        block format a backend may read as it is (hardware/blocks.py's BLOCK_FORMATS), else as `tensor` gives it."""
        t = self.tensors[name]
        kind = t.tensor_type.name
        if kind not in BLOCK_FORMATS or kind == "F32" or len(t.shape) != 2:
            return self.tensor(name)
        out, n_in = int(t.shape[1]), int(t.shape[0])
        data = np.asarray(t.data, dtype=np.uint8)
        if n_in % BLOCK_FORMATS[kind][1] or data.size != out * n_in // BLOCK_FORMATS[kind][1] * BLOCK_FORMATS[kind][2]:
            raise CheckpointError(f"{self.path}: tensor {name} ({kind}) holds {data.size} bytes for {(out, n_in)}")
        copy = data.reshape(-1).copy()
        self._done_with(t)
        return BlockWeight(torch.from_numpy(copy), (out, n_in), ((kind, out),))

    def tensor(self, name: str) -> Tensor:
        """One tensor as float32, in numpy's (row-major) shape."""
        from gguf import GGMLQuantizationType, quants

        t = self.tensors[name]
        try:
            if t.tensor_type == GGMLQuantizationType.F32:
                array = np.asarray(t.data, dtype=np.float32)
            else:
                array = quants.dequantize(t.data, t.tensor_type)
        except (NotImplementedError, ValueError) as e:
            raise CheckpointError(f"{self.path}: tensor {name} ({t.tensor_type.name}) cannot be read: {e}") from None
        shape = tuple(reversed(t.shape))
        copy = np.array(array, dtype=np.float32).reshape(shape)  # a copy: the file is read-only
        self._done_with(t)
        return torch.from_numpy(copy)

    def _done_with(self, t: GgufTensor) -> None:
        """Tell the kernel that this process is done with a tensor's pages once they are copied (they stay in the page
        cache; reading them again faults them back in), so that a load's peak holds each tensor once, not twice."""
        if hasattr(mmap, "MADV_DONTNEED"):  # Linux, macOS
            start = t.offset // mmap.PAGESIZE * mmap.PAGESIZE
            end = min(len(self._mmap), t.offset + int(np.prod(t.data_shape)) * t.dtype.itemsize)
            self._mmap.madvise(mmap.MADV_DONTNEED, start, end - start)


def model_args(f: GgufFile) -> ModelArgs:
    """The model's shape from the file's metadata; a clear error for an architecture the decoder does not run."""
    arch = f.require("general.architecture")
    model_type = next((m for m, a in ARCHITECTURES.items() if a == arch), None)
    if model_type is None:
        raise CheckpointError(
            f"{f.path}: architecture {arch!r} is not supported; waferline runs {', '.join(ARCHITECTURES.values())} "
            f"(Llama, CodeLlama, DeepSeek-Coder, Qwen2, Qwen2.5-Coder, Qwen3)"
        )
    k = f"{arch}."
    n_heads = int(f.require(k + "attention.head_count"))
    dim = int(f.require(k + "embedding_length"))
    tokens = f.get("tokenizer.ggml.tokens") or []
    scaling: dict[str, Any] | None = None
    kind = f.get(k + "rope.scaling.type")
    if kind == "linear":
        scaling = {"rope_type": "linear", "factor": float(f.require(k + "rope.scaling.factor"))}
    elif kind not in (None, "none"):
        raise CheckpointError(f"{f.path}: rope scaling {kind!r} is not supported (waferline runs none and 'linear')")
    try:
        args = ModelArgs(
            model_type=model_type,
            vocab_size=int(f.get(k + "vocab_size") or len(tokens) or f.tensors["token_embd.weight"].shape[1]),
            dim=dim,
            n_layers=int(f.require(k + "block_count")),
            n_heads=n_heads,
            n_kv_heads=int(f.get(k + "attention.head_count_kv") or n_heads),
            intermediate_size=int(f.require(k + "feed_forward_length")),
            max_seq_len=int(f.require(k + "context_length")),
            rope_theta=float(f.get(k + "rope.freq_base") or 10000.0),
            rope_scaling=scaling,
            norm_eps=float(f"{float(f.get(k + 'attention.layer_norm_rms_epsilon') or 1e-6):.7g}"),  # stored as float32
            qkv_bias="blk.0.attn_q.bias" in f.tensors,
            tie_embeddings="output.weight" not in f.tensors,
            head_dim=int(f.get(k + "attention.key_length") or dim // n_heads),
        )
    except (ValueError, TypeError, AssertionError, KeyError) as e:
        raise CheckpointError(f"{f.path}: the metadata does not describe a model waferline runs ({e})") from None
    if ROPE_FREQS in f.tensors:  # Llama 3.1 scaling: only the factors are stored; check the usual parameters made them
        scaled = dataclasses.replace(args, rope_scaling=dict(LLAMA3_DEFAULT_SCALING))
        if not torch.allclose(f.tensor(ROPE_FREQS).flatten(), llama3_freq_factors(scaled), rtol=1e-4):
            raise CheckpointError(f"{f.path}: its rope frequency factors are not Llama 3's usual ones (not supported)")
        args = scaled
    return args


def file_pre_tokenizer(f: GgufFile) -> PreTokenizer:
    """The row of llama.cpp's pre-tokenizer table the file names; a clear error naming the known ones otherwise."""
    model = f.require("tokenizer.ggml.model")
    if model != "gpt2":
        raise CheckpointError(
            f"{f.path}: tokenizer.ggml.model is {model!r}; waferline reads byte-level BPE ('gpt2') tokenizers only"
        )
    name = f.get("tokenizer.ggml.pre")
    row = pre_tokenizer(name)
    if row is None:
        raise CheckpointError(
            f"{f.path}: pre-tokenizer {name!r} is not known to waferline (known: {', '.join(sorted(PRE_TOKENIZERS))})"
        )
    return row


def tokenizer_json(f: GgufFile) -> str:
    """The file's byte-level BPE vocabulary as a tokenizers JSON document. The vocabulary and merges are written one
    item at a time (a dict and a list of 49k strings made at once leave their small-object pools resident)."""
    pre = file_pre_tokenizer(f)
    tokens = f.require("tokenizer.ggml.tokens")
    merges = f.get("tokenizer.ggml.merges") or []
    types = f.get("tokenizer.ggml.token_type") or []
    special = [
        {"id": i, "content": str(tokens[i]), "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True}
        for i, kind in enumerate(types) if int(kind) in (CONTROL, USER_DEFINED)
    ]  # fmt: skip
    document = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": special, "normalizer": None,
        "pre_tokenizer": pre.document(),
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": pre.ignore_merges, "vocab": _VOCAB, "merges": _MERGES},
    }  # fmt: skip
    head, rest = json.dumps(document, ensure_ascii=False).split(json.dumps(_VOCAB))
    middle, tail = rest.split(json.dumps(_MERGES))
    out = io.StringIO()
    out.write(head)
    out.write("{")
    for i, t in enumerate(tokens):  # a token held twice: the JSON key twice, its last id kept (as in a dict)
        out.write(("," if i else "") + encode_basestring(str(t)) + f":{i}")
    out.write("}")
    out.write(middle)
    out.write("[")
    for i, m in enumerate(merges):
        out.write(("," if i else "") + encode_basestring(str(m)))
    out.write("]")
    out.write(tail)
    return out.getvalue()


_VOCAB, _MERGES = "\x00vocab\x00", "\x00merges\x00"  # placeholders in tokenizer_json's document (never a token: they
# are JSON-escaped there as \u0000)


def special_tokens(f: GgufFile, vocab_size: int) -> SpecialTokens:
    def token_id(name: str) -> int | None:
        value = f.get(f"tokenizer.ggml.{name}_token_id")
        if value is None:
            return None
        if not 0 <= int(value) < vocab_size:
            raise CheckpointError(f"{f.path}: tokenizer.ggml.{name}_token_id={value} is not a token id")
        return int(value)

    eos, bos = token_id("eos"), token_id("bos")
    stops = [i for i in (eos, token_id("eot"), token_id("eom"), token_id("fim_sep")) if i is not None]
    return SpecialTokens(
        bos_id=bos,
        eos_id=eos,
        stop_ids=tuple(dict.fromkeys(stops)),
        pad_id=token_id("padding"),
        # llama.cpp's default for the pre-tokenizer (Llama 3's is to add one) when the file does not say
        add_bos=bool(f.get("tokenizer.ggml.add_bos_token", file_pre_tokenizer(f).add_bos)) and bos is not None,
    )


def hf_tensors(f: GgufFile, args: ModelArgs) -> Iterator[tuple[str, Weight]]:
    """The file's tensors in Hugging Face naming and row order, one at a time (matrices in Q4_0, Q4_1 and Q8_0 as
    their blocks: `GgufFile.weight`)."""
    for name in f.tensors:
        hf = hf_name(name)
        if hf is None:
            if name == ROPE_FREQS:
                continue
            raise CheckpointError(f"{f.path}: tensor {name!r} is not part of a {args.model_type} model waferline runs")
        t = f.weight(name)
        if tuple(t.shape) != hf_weight_shape(args, hf):
            raise CheckpointError(
                f"{f.path}: tensor {name} has shape {tuple(t.shape)}, the metadata implies {hf_weight_shape(args, hf)}"
            )
        yield hf, from_gguf_rows(args, hf, t)


def release_freed_memory() -> None:
    """Give the memory of the file's parse back to the system: gguf's reader makes several numpy objects of every
    vocabulary entry and merge (~160 MB for a 49,152-token vocabulary), and glibc keeps what they freed, so a 92 MB
    Q4_0 file left the process ~2x its size resident; malloc_trim returns the free pages (where there is glibc)."""
    import contextlib
    import ctypes
    import ctypes.util
    import gc

    gc.collect()
    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to trim this way
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)


def load_gguf(path: Path, device: Device) -> LoadedModel:
    f = GgufFile(path)
    args = model_args(f)
    document = tokenizer_json(f)
    try:
        tokenizer = Tokenizer.from_str(document)
    except Exception as e:  # the tokenizers library raises a bare Exception for what it cannot build
        raise CheckpointError(f"{path}: its tokenizer cannot be built ({e})") from None
    named = f.get(FIM_TEMPLATE_KEY)
    try:
        fim = fim_template(tokenizer, {"fim_template": named} if named else None)
    except FimError as e:
        raise CheckpointError(f"{path}: {e}") from None
    special = special_tokens(f, args.vocab_size)
    f.forget_vocabulary()
    del document
    release_freed_memory()  # before the weights are placed, so that they fill the pages the vocabulary's parse freed
    model = Transformer(args, device)
    try:
        model.load(from_hf(args, hf_tensors(f, args)))
    except CheckpointError:
        raise
    except ValueError as e:  # from_hf's checks of names and shapes
        raise CheckpointError(f"{path}: {e}") from None
    del f
    release_freed_memory()
    return LoadedModel(
        name=path.stem,
        args=args,
        model=model,
        tokenizer=tokenizer,
        special=special,
        fim=fim,
        dtype=device.dtype,
        backend=device.name,
        path=path,
    )
