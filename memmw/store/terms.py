"""Packed per-chunk term frequencies: the sparse matrix behind in-process BM25."""

from __future__ import annotations

import hashlib
from collections import Counter
from functools import lru_cache

import numpy as np

from memmw.text.analysis import terms

#: Bumped when term extraction or packing changes (part of the index identity).
TERMS_VERSION = 3

#: One entry per distinct term of a chunk: 64-bit term hash and its count.
ENTRY = np.dtype([("h", "<i8"), ("tf", "<u2")])


@lru_cache(maxsize=500_000)
def term_hash(term: str) -> int:
    """Stable signed 64-bit hash of a term (the same in every process)."""
    return int.from_bytes(
        hashlib.blake2b(term.encode("utf-8"), digest_size=8).digest(), "little", signed=True
    )


def pack_terms(text: str) -> tuple[bytes, int]:
    """``(blob, n_terms)``: the chunk's distinct term hashes with counts, and its length."""
    counts = Counter(terms(text))
    arr = np.empty(len(counts), dtype=ENTRY)
    if counts:
        arr["h"] = [term_hash(t) for t in counts]
        arr["tf"] = np.minimum(
            np.fromiter(counts.values(), dtype=np.int64, count=len(counts)), 65535
        )
    return arr.tobytes(), sum(counts.values())


def unpack_terms(blob: bytes) -> np.ndarray:
    """The structured array packed by ``pack_terms``."""
    return np.frombuffer(blob, dtype=ENTRY)
