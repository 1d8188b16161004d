"""The search arena: views of one kept buffer, reused after each reset, bounded."""

from __future__ import annotations

import numpy as np

from memmw.store.arena import FRESH, Arena


def test_arrays_come_from_one_buffer_that_the_next_search_reuses() -> None:
    arena = Arena(max_bytes=1 << 20)
    arena.reset()
    first = arena.take(1000, np.int64)  # nothing kept yet: a fresh array
    assert first.base is None and arena.capacity == 0
    arena.reset()  # grows to what the last search wanted, with a margin
    assert 8000 <= arena.capacity <= 1 << 20
    a = arena.take(1000, np.int64)
    b = arena.zeros(10, np.float32)
    assert a.base is not None and b.base is not None
    assert not np.shares_memory(a, b)
    assert b.tolist() == [0.0] * 10 and a.dtype == np.int64 and len(a) == 1000
    assert a.ctypes.data % 64 == 0 and b.ctypes.data % 64 == 0
    arena.reset()
    again = arena.take(1000, np.int64)
    assert np.shares_memory(again, a)  # the same memory: no fresh pages to fault in


def test_an_arena_never_keeps_more_than_its_limit() -> None:
    arena = Arena(max_bytes=4096)
    arena.take(10_000, np.float64)
    arena.reset()
    assert arena.capacity == 4096
    kept = arena.take(1, np.int8)
    big = arena.take(10_000, np.float64)  # does not fit: fresh, still correct
    assert big.base is None and len(big) == 10_000
    arena.reset()  # at its limit: the same buffer, not a new one each search
    assert np.shares_memory(arena.take(1, np.int8), kept)


def test_the_fresh_arena_hands_out_new_arrays_only() -> None:
    a = FRESH.take(100, np.int32)
    FRESH.reset()
    b = FRESH.take(100, np.int32)
    assert FRESH.capacity == 0 and not np.shares_memory(a, b)
    assert FRESH.zeros(3, np.float32).tolist() == [0.0, 0.0, 0.0]
