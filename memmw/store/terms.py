"""Term identity shared by every store: the stable 64-bit hash keying keyword postings."""

from __future__ import annotations

import hashlib
from functools import lru_cache

#: Bumped when term extraction or the postings layout changes (part of the index identity).
TERMS_VERSION = 4


@lru_cache(maxsize=500_000)
def term_hash(term: str) -> int:
    """Stable signed 64-bit hash of a term (the same in every process)."""
    return int.from_bytes(
        hashlib.blake2b(term.encode("utf-8"), digest_size=8).digest(), "little", signed=True
    )
