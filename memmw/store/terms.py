"""Term identity shared by every store: the stable 64-bit hash keying keyword postings."""

from __future__ import annotations

import hashlib
from collections import Counter
from functools import lru_cache

import numpy as np

from memmw.text.analysis import WordMemo, split_words, stem, term_frequencies

#: Bumped when term extraction or the postings layout changes (part of the index identity).
TERMS_VERSION = 5


@lru_cache(maxsize=500_000)
def term_hash(term: str) -> int:
    """Stable signed 64-bit hash of a term (the same in every process)."""
    return int.from_bytes(
        hashlib.blake2b(term.encode("utf-8"), digest_size=8).digest(), "little", signed=True
    )


def _word_hash(word: str) -> int:
    return term_hash(stem(word))


#: Word -> hash of its one term (its stem): stemmed and hashed once per distinct word.
_WORD_HASHES: WordMemo[int] = WordMemo(_word_hash, 1_000_000)


def term_counts(text: str) -> tuple[np.ndarray, np.ndarray, int]:
    """``(term hashes, counts, length)`` of a chunk's text: its row of the term matrix.

    The terms come in first-occurrence order, as ``Counter(terms(text))`` lists them.
    """
    words, cjk = split_words(text)
    counts: dict[int, int]
    if cjk:
        counts = {term_hash(t): n for t, n in term_frequencies(text).items()}
    else:
        # Every word is one term, its stem: hash through the cache and count, both in C.
        counts = Counter(map(_WORD_HASHES.__getitem__, words))
    n = len(counts)
    length = sum(counts.values())
    hashes = np.fromiter(counts, dtype=np.int64, count=n)
    if length <= 65535:  # no count can pass the uint16 clamp
        return hashes, np.fromiter(counts.values(), dtype=np.uint16, count=n), length
    tf = np.fromiter(counts.values(), dtype=np.int64, count=n)
    return hashes, np.minimum(tf, 65535).astype(np.uint16), length
