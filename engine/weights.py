"""The safetensors files of a Hugging Face model directory: find them, check them against the config, stream them
tensor by tensor, and write them (one file, or shards with an index). Pickle weights are refused, never opened.

Also the errors every checkpoint reader raises: `CheckpointError` (a ValueError) names the file or value and what is
wrong, so the CLI prints it as one line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file
from torch import Tensor

from waferline.engine.hf import hf_weight_names, hf_weight_shape, ignorable_tensor
from waferline.engine.model import ModelArgs

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")
SINGLE_FILE, INDEX_FILE = "model.safetensors", "model.safetensors.index.json"
_SAFETENSORS_FLOATS = {"F32", "F16", "BF16", "F64"}


class CheckpointError(ValueError):
    """A checkpoint (or a name for one) that waferline cannot load; the message names the file or value."""


class CheckpointNotFoundError(CheckpointError, FileNotFoundError):
    """A file or directory the checkpoint needs does not exist."""


def read_json(path: Path, *, required: bool = True) -> dict[str, Any]:
    if not path.parent.is_dir():
        raise CheckpointNotFoundError(f"model directory {path.parent} does not exist")
    if not path.is_file():
        if not required:
            return {}
        raise CheckpointNotFoundError(f"{path} is missing (a Hugging Face model directory needs it)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{path} is not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}") from None
    except UnicodeDecodeError as e:
        raise CheckpointError(f"{path} is not UTF-8 text: {e.reason} at byte {e.start}") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{path} holds a JSON {type(data).__name__}, not an object")
    return data


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


# -- reading ---------------------------------------------------------------------------------------------------------
@dataclass
class Shard:
    """One safetensors file and the tensors it holds (name -> (shape, safetensors dtype))."""

    path: Path
    tensors: dict[str, tuple[tuple[int, ...], str]]


def pickle_refusal(files: list[Path]) -> str:
    names = ", ".join(str(f) for f in files[:3])
    return (
        f"refusing to load {names}: pickle weights (.bin, .pt, .pth) can run arbitrary code when they are loaded. "
        f"waferline loads only safetensors; convert once in a trusted environment, e.g. with transformers: "
        f"AutoModelForCausalLM.from_pretrained(dir).save_pretrained(dir, safe_serialization=True)"
    )


def weight_shards(path: Path) -> list[Shard]:
    """The safetensors files of a directory (model.safetensors, or the shards its index names), headers read."""
    if (path / SINGLE_FILE).is_file():
        files = [path / SINGLE_FILE]
        expected: dict[str, str] | None = None
    elif (path / INDEX_FILE).is_file():
        index = read_json(path / INDEX_FILE)
        weight_map = index.get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise CheckpointError(f"{path / INDEX_FILE} has no weight_map")
        expected = {str(k): str(v) for k, v in weight_map.items()}
        files = [path / name for name in dict.fromkeys(expected.values())]
        for f in files:
            if not f.is_file():
                raise CheckpointNotFoundError(f"{f} is missing ({INDEX_FILE} lists it)")
    else:
        pickles = sorted(p for p in path.iterdir() if p.suffix in PICKLE_SUFFIXES)
        if pickles:
            raise CheckpointError(pickle_refusal(pickles))
        raise CheckpointNotFoundError(f"{path} has no {SINGLE_FILE} and no {INDEX_FILE}: no weights to load")
    shards = [_read_header(f) for f in files]
    if expected is not None:
        for name, fname in expected.items():
            shard = next(s for s in shards if s.path.name == fname)
            if name not in shard.tensors:
                raise CheckpointError(f"{shard.path} lacks the tensor {name!r} that {INDEX_FILE} places there")
    return shards


def _read_header(path: Path) -> Shard:
    try:
        with safe_open(str(path), framework="pt") as f:
            tensors = {}
            for name in f.keys():  # noqa: SIM118 - safe_open is not a Mapping
                sl = f.get_slice(name)
                tensors[name] = (tuple(sl.get_shape()), str(sl.get_dtype()))
    except (SafetensorError, OSError) as e:
        raise CheckpointError(f"{path} is not a readable safetensors file (truncated or damaged?): {e}") from None
    return Shard(path, tensors)


def check_tensors(args: ModelArgs, shards: list[Shard]) -> None:
    """Every tensor the config implies is present once, with the implied shape and a float dtype; nothing else is."""
    expected = set(hf_weight_names(args))
    seen: dict[str, Path] = {}
    for shard in shards:
        for name, (shape, dtype) in shard.tensors.items():
            if name not in expected:
                if ignorable_tensor(args, name):
                    continue
                raise CheckpointError(
                    f"{shard.path}: unexpected tensor {name!r} for a {args.model_type} model with this config.json"
                )
            if name in seen:
                raise CheckpointError(f"tensor {name!r} appears in both {seen[name]} and {shard.path}")
            want = hf_weight_shape(args, name)
            if shape != want:
                raise CheckpointError(
                    f"{shard.path}: tensor {name!r} has shape {shape}, but config.json implies {want}"
                )
            if dtype not in _SAFETENSORS_FLOATS:
                raise CheckpointError(
                    f"{shard.path}: tensor {name!r} is {dtype}; waferline loads float weights (quantized "
                    f"checkpoints are not supported)"
                )
            seen[name] = shard.path
    missing = sorted(expected - seen.keys())
    if missing:
        where = shards[0].path if len(shards) == 1 else shards[0].path.parent
        raise CheckpointError(f"{where} lacks {len(missing)} tensors the config implies, e.g. {missing[0]!r}")


def stream_tensors(shards: list[Shard]) -> Iterator[tuple[str, Tensor]]:
    """(name, tensor) one at a time, read from the memory-mapped files as the consumer asks for them."""
    for shard in shards:
        with safe_open(str(shard.path), framework="pt") as f:
            for name in shard.tensors:
                yield name, f.get_tensor(name)


# -- writing ---------------------------------------------------------------------------------------------------------
def checked_state_dict(args: ModelArgs, state: Mapping[str, Tensor], dtype: torch.dtype | None) -> dict[str, Tensor]:
    names = list(hf_weight_names(args))
    missing = [n for n in names if n not in state]
    if missing:
        raise CheckpointError(f"state_dict lacks {len(missing)} tensors, e.g. {missing[0]!r}")
    extra = [n for n in state if n not in names and not ignorable_tensor(args, n)]
    if extra:
        raise CheckpointError(f"state_dict has tensors this config does not use, e.g. {extra[0]!r}")
    out = {}
    for name in names:
        t = state[name].detach()
        if tuple(t.shape) != hf_weight_shape(args, name):
            raise CheckpointError(
                f"tensor {name!r} has shape {tuple(t.shape)}, config implies {hf_weight_shape(args, name)}"
            )
        out[name] = t.to(dtype or t.dtype).contiguous()
    return out


def write_weights(tmp: Path, tensors: dict[str, Tensor], max_shard_bytes: int | None) -> None:
    meta = {"format": "pt"}
    if max_shard_bytes is None:
        save_file(tensors, str(tmp / SINGLE_FILE), metadata=meta)
        return
    groups: list[dict[str, Tensor]] = [{}]
    size = 0
    for name, t in tensors.items():
        nbytes = t.numel() * t.element_size()
        if groups[-1] and size + nbytes > max_shard_bytes:
            groups.append({})
            size = 0
        groups[-1][name] = t
        size += nbytes
    weight_map: dict[str, str] = {}
    for i, group in enumerate(groups, start=1):
        fname = f"model-{i:05d}-of-{len(groups):05d}.safetensors"
        save_file(group, str(tmp / fname), metadata=meta)
        weight_map.update(dict.fromkeys(group, fname))
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    write_json(tmp / INDEX_FILE, {"metadata": {"total_size": total}, "weight_map": weight_map})
