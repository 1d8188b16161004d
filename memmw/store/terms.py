"""Term identity shared by every store: the stable 64-bit hash keying keyword postings."""

from __future__ import annotations

import hashlib
from functools import lru_cache

import numpy as np

from memmw.text.analysis import term_frequencies

#: Bumped when term extraction or the postings layout changes (part of the index identity).
TERMS_VERSION = 4


@lru_cache(maxsize=500_000)
def term_hash(term: str) -> int:
    """Stable signed 64-bit hash of a term (the same in every process)."""
    return int.from_bytes(
        hashlib.blake2b(term.encode("utf-8"), digest_size=8).digest(), "little", signed=True
    )


def term_counts(text: str) -> tuple[np.ndarray, np.ndarray, int]:
    """``(term hashes, counts, length)`` of a chunk's text: its row of the term matrix."""
    counts = term_frequencies(text)
    n = len(counts)
    hashes = np.fromiter(map(term_hash, counts), dtype=np.int64, count=n)
    tf = np.fromiter(counts.values(), dtype=np.int64, count=n)
    return hashes, np.minimum(tf, 65535).astype(np.uint16), int(tf.sum())
