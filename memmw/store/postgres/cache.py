"""Rows a search read before, kept in the process and checked against the server's row version.

A search reads the same hot rows again and again: the postings segments of frequent terms
and the chunk rows of the best hits. ``RowCache`` keeps them (least recently used first out,
bounded by bytes) with the version the server gave each: its key and ``xmin``, the
transaction that wrote that row version. A later read sends the versions it holds and the
server returns the data of the rows whose version differs (written since, or never read)
and only the key and version of the others, so nothing stale is ever used: a row written
again, even with the same bytes, has a new ``xmin`` and is read again; a row deleted is not
returned at all.

Why ``(key, xmin)`` names one row version's content: PostgreSQL keeps one visible version
per key in a committed snapshot, and a version's ``xmin`` is the id of the transaction that
wrote it, never changed afterwards (freezing keeps it; ``VACUUM FULL`` copies it). Two
committed versions of one key share an ``xmin`` only if one transaction wrote both, and then
only the last is ever visible outside it; only snapshots (committed rows) fill the cache.
Transaction ids come back after 2^32 transactions: the segments also compare their
postings count, and a process would have to hold the entry through all of them.

One cache per process (``SEGMENTS``, ``CHUNKS``), shared by every store and thread of it:
entries are keyed by the server, database and namespace (``scope``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

V = TypeVar("V")

#: Bytes of postings segments kept per process (the hot terms of an agent of some 100k
#: chunks; a frequent term's segments are a few hundred KB).
SEGMENT_CACHE_BYTES = 64 << 20
#: Bytes of chunk rows (text and term hashes) kept per process.
CHUNK_CACHE_BYTES = 16 << 20


class RowCache(Generic[V]):
    """A thread-safe LRU map, bounded by the bytes its values hold.

    Args:
        max_bytes: The most bytes of values kept (each value's size is given by ``put``);
            a value larger than a quarter of it is not kept.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[Hashable, tuple[V, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    @property
    def size(self) -> int:
        """Bytes of the values kept."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: Hashable) -> V | None:
        """The value kept for ``key`` (now the most recently used), or None."""
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return None
            self._items.move_to_end(key)
            return item[0]

    def put(self, key: Hashable, value: V, nbytes: int) -> None:
        """Keep ``value`` for ``key``; the least recently used go past the bound."""
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            if nbytes * 4 > self.max_bytes:
                return
            self._items[key] = (value, nbytes)
            self._bytes += nbytes
            while self._bytes > self.max_bytes:
                _, (_, n) = self._items.popitem(last=False)
                self._bytes -= n

    def clear(self) -> None:
        """Forget everything."""
        with self._lock:
            self._items.clear()
            self._bytes = 0


#: Segment = ``(version, data)``; version = ``xmin << 32 | postings count``.
Segments = dict[int, tuple[int, bytes]]
#: One term's segments in one source, by ``seg``: key ``(scope, source, term hash)``.
SEGMENTS: RowCache[Segments] = RowCache(SEGMENT_CACHE_BYTES)
#: Chunk rows ``(xmin, row)`` by ``(scope, rowid)``.
CHUNKS: RowCache[tuple[int, object]] = RowCache(CHUNK_CACHE_BYTES)
