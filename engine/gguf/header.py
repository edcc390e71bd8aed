"""A GGUF file's header (its metadata and its tensors' descriptions) read straight from the file's bytes.

gguf's `GGUFReader` makes a numpy view of every part of every value: for a 49,152-token vocabulary and its merges that
is ~200,000 numpy objects, ~6 s and ~120 MB at its peak, and the small-object heap it leaves behind kept ~15 MB of a
load resident. The format (https://github.com/ggml-org/ggml/blob/master/docs/gguf.md) is a short sequence of
length-prefixed records, so it is read here into plain Python values in one pass; gguf still supplies the enums and the
block sizes, and reads the tensors' blocks. Every read is bounds-checked: a file that is cut or garbled gets a
`HeaderError` that says where, never an over-read or a loop over a made-up count.
"""

from __future__ import annotations

import array
import dataclasses
import struct
import sys
from collections.abc import Iterator, Sequence
from typing import Any, overload

from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

MAGIC = b"GGUF"
VERSIONS = (2, 3)  # version 1 had 32-bit lengths; nothing current writes it
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4  # GGML_MAX_DIMS
# GGUFValueType's numbering: the scalar kinds as struct formats; 8 is a string, 9 an array.
SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
STRING, ARRAY = 8, 9
# Arrays at least this long (a vocabulary, its merges, token types and scores) are kept compact, not as a Python object
# an item: a 49k-token vocabulary's strings are ~3 MB of small objects, and once freed the small-object heap kept ~5 MB
# of it resident, pinned by whatever was made beside them and outlived them.
COMPACT_ITEMS = 1024
ARRAY_CODES = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 10: "Q", 11: "q", 12: "d"}  # array.array's


class HeaderError(ValueError):
    """The bytes are not a GGUF header this reader understands."""


@dataclasses.dataclass(frozen=True)
class TensorInfo:
    """One tensor's description: `shape` in GGUF order (the innermost dimension first); `offset` and `nbytes` place
    its data in the file."""

    name: str
    tensor_type: GGMLQuantizationType
    shape: tuple[int, ...]
    offset: int
    nbytes: int


@dataclasses.dataclass
class Header:
    version: int
    metadata: dict[str, Any]  # key -> a Python value (int, float, bool, str, a list of them; long arrays compact:
    # a StringArray, an array.array of numbers)
    errors: dict[str, str]  # key -> why its value could not be read (a string that is not UTF-8), the rest still read
    tensors: list[TensorInfo]
    data_offset: int
    big_endian: bool  # written on a big-endian machine: the header is read, the tensors' bytes are that machine's


class StringArray(Sequence[str]):
    """A long array of strings as one buffer of their UTF-8 bytes and their ends: an item is decoded when read."""

    def __init__(self, blob: bytes, ends: array.array[int]) -> None:
        self._blob, self._ends = blob, ends

    def __len__(self) -> int:
        return len(self._ends)

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...
    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        n = len(self._ends)
        if not -n <= i < n:
            raise IndexError("StringArray index out of range")
        i %= n
        start = self._ends[i - 1] if i else 0
        return self._blob[start : self._ends[i]].decode("utf-8")

    def __iter__(self) -> Iterator[str]:
        blob, start = self._blob, 0
        for end in self._ends:
            yield blob[start:end].decode("utf-8")
            start = end

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StringArray):
            return self._blob == other._blob and self._ends == other._ends
        return (
            isinstance(other, Sequence)
            and len(other) == len(self)
            and all(a == b for a, b in zip(self, other, strict=True))
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"StringArray({len(self)} strings)"


class _Cursor:
    def __init__(self, data: memoryview | bytes, order: str) -> None:
        self.data, self.order, self.at = data, order, 0

    def need(self, n: int, what: str) -> None:
        if n < 0 or self.at + n > len(self.data):
            raise HeaderError(f"the file ends inside {what} (byte {self.at} of {len(self.data)} needs {n} more)")

    def scalar(self, fmt: str, what: str) -> Any:
        size = struct.calcsize(fmt)
        self.need(size, what)
        (value,) = struct.unpack_from(self.order + fmt, self.data, self.at)
        self.at += size
        return value

    def raw_string(self, what: str) -> bytes:
        n = self.scalar("Q", what)
        self.need(n, what)
        out = bytes(self.data[self.at : self.at + n])
        self.at += n
        return out

    def string(self, what: str) -> str:
        raw = self.raw_string(what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise HeaderError(f"{what} is not UTF-8 ({e})") from None

    def value(self, kind: int, what: str) -> Any:
        """One value of GGUF type `kind`; a string that is not UTF-8 raises UnicodeDecodeError after the cursor has
        passed it, so that the caller may record it and read on."""
        if kind in SCALARS:
            return self.scalar(SCALARS[kind], what)
        if kind == STRING:
            return self.raw_string(what).decode("utf-8")
        if kind != ARRAY:
            raise HeaderError(f"{what} has an unknown value type {kind}")
        item = self.scalar("I", what)
        count = self.scalar("Q", what)
        smallest = struct.calcsize(SCALARS[item]) if item in SCALARS else 8 if item in (STRING, ARRAY) else 1
        self.need(count * smallest, f"{what}'s {count} items")  # a made-up count stops here, not after a long loop
        if item in ARRAY_CODES and count >= COMPACT_ITEMS:  # a long array of numbers as an array.array
            numbers = array.array(ARRAY_CODES[item])
            end = self.at + count * numbers.itemsize
            numbers.frombytes(self.data[self.at : end])
            if (self.order == ">") != (sys.byteorder == "big"):
                numbers.byteswap()
            self.at = end
            return numbers
        if item in SCALARS:  # one unpack for the whole array
            fmt = f"{self.order}{count}{SCALARS[item]}"
            values = list(struct.unpack_from(fmt, self.data, self.at))
            self.at += struct.calcsize(fmt)
            return values
        if item == STRING:
            return self._strings(count, what)
        values, bad = [], None
        for _ in range(count):  # arrays of arrays
            try:
                values.append(self.value(item, what))
            except UnicodeDecodeError as e:
                bad = bad or e
                values.append([])
        if bad is not None:
            raise bad
        return values

    def _strings(self, count: int, what: str) -> list[str] | StringArray:
        """`count` strings: a list, or from COMPACT_ITEMS on a StringArray (each item checked to be UTF-8 here)."""
        data, length, bad = self.data, struct.Struct(self.order + "Q"), None
        compact = count >= COMPACT_ITEMS
        out: list[str] = []
        blob, ends = bytearray(), array.array("Q")
        at, end = self.at, len(self.data)
        for _ in range(count):
            if at + 8 > end:
                self.at = at
                self.need(8, what)
            (n,) = length.unpack_from(data, at)
            at += 8
            if at + n > end:
                self.at = at
                self.need(n, what)
            raw = data[at : at + n]
            at += n
            try:
                text = str(raw, "utf-8")
            except UnicodeDecodeError as e:
                bad, text = bad or e, ""
                raw = b""
            if compact:
                blob += raw
                ends.append(len(blob))
            else:
                out.append(text)
        self.at = at
        if bad is not None:
            raise bad
        return StringArray(bytes(blob), ends) if compact else out


def read_header(data: memoryview | bytes) -> Header:
    """The header of a whole GGUF file's bytes (a memory map's view: only the header's pages are touched)."""
    if bytes(data[:4]) != MAGIC:
        raise HeaderError("it does not start with GGUF's magic bytes")
    c = _Cursor(data, "<")
    c.at = 4
    version = c.scalar("I", "the version")
    if version & 0xFFFF == 0:  # written on a big-endian machine
        c.order, c.at = ">", 4
        version = c.scalar("I", "the version")
    if version not in VERSIONS:
        raise HeaderError(f"it is GGUF version {version}; versions {VERSIONS} are read")
    n_tensors = c.scalar("Q", "the tensor count")
    n_values = c.scalar("Q", "the metadata count")
    c.need(n_values * 13 + n_tensors * 24, f"{n_values} metadata entries and {n_tensors} tensor descriptions")
    metadata: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for i in range(n_values):
        key = c.string(f"metadata entry {i}'s key")
        kind = c.scalar("I", f"{key}'s type")
        try:
            metadata[key] = c.value(kind, key)
        except UnicodeDecodeError as e:
            errors[key] = f"a string in it is not UTF-8 ({e})"
    infos = []
    for i in range(n_tensors):
        name = c.string(f"tensor {i}'s name")
        n_dims = c.scalar("I", f"tensor {name}'s dimension count")
        if not 1 <= n_dims <= MAX_DIMS:
            raise HeaderError(f"tensor {name} has {n_dims} dimensions")
        shape = tuple(c.scalar("Q", f"tensor {name}'s shape") for _ in range(n_dims))
        code = c.scalar("I", f"tensor {name}'s type")
        try:
            kind = GGMLQuantizationType(code)
        except ValueError:
            raise HeaderError(f"tensor {name} has an unknown type {code}") from None
        infos.append((name, kind, shape, c.scalar("Q", f"tensor {name}'s offset")))
    alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
        raise HeaderError(f"general.alignment is {alignment!r}, not a power of two")
    data_offset = -(-c.at // alignment) * alignment
    tensors, seen = [], set()
    for name, kind, shape, offset in infos:
        if name in seen:
            raise HeaderError(f"tensor {name} is described twice")
        seen.add(name)
        if kind not in GGML_QUANT_SIZES:
            raise HeaderError(f"tensor {name}'s type {kind.name} has no known block size")
        block, size = GGML_QUANT_SIZES[kind]
        elements = 1
        for n in shape:
            elements *= n
        if shape[0] % block:
            raise HeaderError(f"tensor {name}'s rows of {shape[0]} are not whole {kind.name} blocks of {block}")
        nbytes = elements // block * size
        start = data_offset + offset
        if start + nbytes > len(data):
            raise HeaderError(f"tensor {name}'s {nbytes} bytes at {start} lie past the file's end ({len(data)})")
        tensors.append(TensorInfo(name, kind, shape, start, nbytes))
    return Header(version, metadata, errors, tensors, data_offset, c.order == ">")
