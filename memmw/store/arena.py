"""Scratch memory a search reuses for its postings and scores, instead of fresh arrays.

A keyword search decodes and scores ~100k postings per frequent query term. Fresh numpy
arrays of that size come from pages the allocator has just returned to the kernel, and
on a small VM the page faults of touching them cost more than the arithmetic (about a
third of a warm search). An ``Arena`` hands out views of one buffer that stays mapped:
arrays taken from it are valid until the owner's next ``reset``, so only the owner of
the arena (one search at a time, one thread) may take from it.
"""

from __future__ import annotations

import numpy as np

#: Alignment of each array taken (a cache line).
_ALIGN = 64
#: Largest buffer an arena keeps between searches; a search needing more gets fresh
#: arrays for the excess and the arena does not grow past this.
MAX_BYTES = 64 << 20


class Arena:
    """A bump allocator over one reusable buffer.

    Args:
        max_bytes: Largest buffer kept between resets (0: never keep one, every ``take``
            is a fresh array).
    """

    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._buf = np.empty(0, dtype=np.uint8)
        self._skew = 0  # bytes from the buffer's start to its first aligned address
        self._used = 0  # bytes taken from the aligned start
        self._wanted = 0  # bytes taken since the last reset, whether they fitted or not

    @property
    def capacity(self) -> int:
        """Bytes of the buffer kept."""
        return max(len(self._buf) - _ALIGN, 0)

    def reset(self) -> None:
        """Forget every array taken so far (they must no longer be used) and make room
        for the next search: the buffer grows to what the last one wanted, with a margin.
        """
        wanted = min(self._wanted + self._wanted // 4, self.max_bytes)
        if self._wanted > self.capacity and wanted > self.capacity:
            self._buf = np.empty(wanted + _ALIGN, dtype=np.uint8)
            self._skew = -self._buf.ctypes.data % _ALIGN
        self._used = self._wanted = 0

    def take(self, n: int, dtype: np.dtype | type) -> np.ndarray:
        """An uninitialised array of ``n`` items, valid until the next ``reset``."""
        dt = np.dtype(dtype)
        size = n * dt.itemsize
        start = -(-self._used // _ALIGN) * _ALIGN  # offsets count from the aligned skew
        if self.max_bytes:
            self._wanted += size + _ALIGN
        if start + size > self.capacity:
            return np.empty(n, dtype=dt)
        self._used = start + size
        at = self._skew + start
        return self._buf[at : at + size].view(dt)

    def zeros(self, n: int, dtype: np.dtype | type) -> np.ndarray:
        """``take`` filled with zeros."""
        out = self.take(n, dtype)
        out.fill(0)
        return out


#: An arena that keeps nothing: every array is fresh (for callers that keep results).
FRESH = Arena(max_bytes=0)
