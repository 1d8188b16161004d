"""Chunk rows a search read before, kept in the process and checked against the server's
row version.

Searches read the same hot chunks again and again (their text and term hashes are most of
what ``chunks`` reads and sends). ``CHUNKS`` keeps them, least recently used out first,
bounded by bytes, with the version the server gave each: ``xmin``, the transaction that
wrote that row version. A snapshot's ``chunks`` sends the rowids it holds; the server
returns every wanted row's rowid and ``xmin`` and the columns of the others, and a held
row is used only when its ``xmin`` is the server's (else it is read again), so nothing
stale is ever answered: a deleted chunk is not returned at all, and a row written again
has a new ``xmin``.

Why ``(rowid, xmin)`` names one row version's content: a committed snapshot sees one
version per key, and a version's ``xmin`` is the id of the transaction that wrote it,
never changed afterwards (freezing keeps it, ``VACUUM FULL`` copies it). Two committed
versions of one key share an ``xmin`` only if one transaction wrote both, and then only
the last is ever visible outside it; only snapshots (committed rows) fill the cache.
(Chunk rows are never updated in place anyway: rowids are not reused.) Transaction ids
repeat only after 2^32 transactions, which a process would have to outlive holding the row.

One cache per process, shared by every store and thread of it: entries are keyed by the
DSN and namespace (``scope``) and the rowid.

Postings segments are not cached: measured at 25k chunks per agent, sending the versions
held and comparing them in the server cost as much as sending the segments in binary.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

from memmw.store.protocol import ChunkRow

V = TypeVar("V")

#: Bytes of chunk rows (text, term hashes, path) kept per process: some thousands of chunks.
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


#: Chunk rows ``(xmin, row)`` by ``(scope, rowid)``.
CHUNKS: RowCache[tuple[int, ChunkRow]] = RowCache(CHUNK_CACHE_BYTES)
