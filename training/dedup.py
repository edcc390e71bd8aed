"""Near-duplicate files: MinHash signatures of word 5-grams, banded into buckets (locality-sensitive hashing).

Byte-identical copies are caught by a content hash; this catches the rest of what inflates a code corpus: a module
vendored with its header changed, the same generated table in two versions, a file copied between two packages with
a few renames. Two files whose estimated Jaccard similarity of word 5-grams is at least `threshold` are duplicates;
the first one added is kept.
"""

from __future__ import annotations

import re
import zlib

import numpy as np

WORD = re.compile(r"\w+|[^\w\s]")
PRIME = (1 << 61) - 1


class NearDuplicates:
    """Add files one by one; `add` returns the key of an earlier near-identical file, or None (and keeps it)."""

    def __init__(self, *, permutations: int = 64, bands: int = 16, shingle: int = 5, threshold: float = 0.85) -> None:
        assert permutations % bands == 0
        rng = np.random.default_rng(12345)  # fixed: the same corpus gives the same decisions on every machine
        self.a = rng.integers(1, PRIME, size=permutations, dtype=np.uint64)
        self.b = rng.integers(0, PRIME, size=permutations, dtype=np.uint64)
        self.bands, self.rows, self.shingle, self.threshold = bands, permutations // bands, shingle, threshold
        self.buckets: list[dict[bytes, list[int]]] = [{} for _ in range(bands)]
        self.signatures: list[np.ndarray] = []
        self.keys: list[str] = []

    def signature(self, text: str) -> np.ndarray | None:
        words = WORD.findall(text)
        if len(words) < self.shingle:
            return None
        grams = {
            zlib.crc32(" ".join(words[i : i + self.shingle]).encode()) for i in range(len(words) - self.shingle + 1)
        }
        h = np.fromiter(grams, dtype=np.uint64, count=len(grams))
        # (a * h + b) mod p per permutation; the products stay under 2**64 because h < 2**32 and a, b < 2**61 would
        # not, so a is reduced to 31 bits for the product (still a family of distinct hash functions).
        a = (self.a & np.uint64(0x7FFFFFFF))[:, None]
        return ((a * h[None, :] + self.b[:, None]) % np.uint64(PRIME)).min(axis=1)

    def add(self, key: str, text: str) -> str | None:
        sig = self.signature(text)
        if sig is None:
            return None  # too short to judge: only exact hashing applies
        band_keys = [sig[i * self.rows : (i + 1) * self.rows].tobytes() for i in range(self.bands)]
        for band, bk in enumerate(band_keys):
            for j in self.buckets[band].get(bk, ()):
                if float(np.mean(self.signatures[j] == sig)) >= self.threshold:
                    return self.keys[j]
        index = len(self.keys)
        self.keys.append(key)
        self.signatures.append(sig)
        for band, bk in enumerate(band_keys):
            self.buckets[band].setdefault(bk, []).append(index)
        return None
