"""A copy of a GGUF file with its 2-D weights quantised, or some metadata changed or removed (the `gguf` package
reads and writes; no llama.cpp needed), for the tests that need a file llama.cpp's converter would have written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gguf
import numpy as np

REMOVE = object()  # a `changes` value that drops the key


def finish(w: gguf.GGUFWriter) -> None:
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def rewrite_gguf(
    src: Path, out: Path, qtype: gguf.GGMLQuantizationType | None = None, changes: dict[str, Any] | None = None
) -> Path:
    """A copy of `src` at `out` with its 2-D weights quantised to `qtype` and the metadata in `changes` replaced
    (keys not in the file are added as strings, bools or uint32s; a value of REMOVE drops the key)."""
    changes = dict(changes or {})
    reader = gguf.GGUFReader(src)
    w = gguf.GGUFWriter(out, reader.fields["general.architecture"].contents())
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        value = changes.pop(name, field.contents())
        if value is REMOVE:
            continue
        kind = field.types[0]
        if kind == gguf.GGUFValueType.ARRAY:
            w.add_array(name, value)
        else:
            w.add_key_value(name, value, kind)
    for name, value in changes.items():
        if value is not REMOVE:
            kinds = {bool: gguf.GGUFValueType.BOOL, int: gguf.GGUFValueType.UINT32}
            w.add_key_value(name, value, kinds.get(type(value), gguf.GGUFValueType.STRING))
    for t in reader.tensors:
        array = np.array(t.data, dtype=np.float32).reshape([int(x) for x in reversed(t.shape.tolist())])
        if qtype is not None and array.ndim == 2:
            w.add_tensor(t.name, gguf.quants.quantize(array, qtype), raw_dtype=qtype)
        else:
            w.add_tensor(t.name, array)
    finish(w)
    return out
