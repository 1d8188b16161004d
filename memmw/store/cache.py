"""What a process keeps of the index between searches: a bounded LRU (``RowCache``) and
the keyword postings segments a search read (``SEGMENTS``).

``SEGMENTS`` holds each term's stored segments as read, keyed by the *postings version*
of the index they were read from: a value every write of segments replaces by a new
random one in the same transaction (``SqliteSegments.write`` and ``PgSegments.write``;
a PostgreSQL namespace cleared for a rebuild gets one too). A snapshot that reads
the version it was keyed with therefore sees exactly the segments kept for it, whoever
wrote since, in this process or another; a version is never reused (a rolled-back write's
is never committed, a rebuilt or recreated index starts from a new one). The tombstones
and the statistics, which every write may change, are never kept: each search reads them.
(Rows changed by other software than memmw, which leaves the version as it was, are not
seen by a process that kept them: the index is memmw's to write.)

Measured at 1.41M chunks (``benchmarks/keyword_scale.py``'s workspace, its 320 LoCoMo
questions in one fresh process): 84% of the segment bytes the searches read had been read
by an earlier one (the people and words a memory is about recur); an LRU of 64, 128, 192
and 256 MB would answer 54, 70, 79 and 83% of them (replayed over the reads' trace). At
192 MB the search process peaked at 440 MB RSS against 380 at 128, and its per-question
best time over three fresh processes summed to 3443 against 3672 ms.

PostgreSQL reads the version with the meta rows of a snapshot's ``BEGIN``: a search whose
terms are all held sends no segment (a writer reading its own transaction reads them from
the tables).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    from memmw.store.segments import TermSegments

V = TypeVar("V")

#: The meta key of an index's postings version (both stores).
VERSION_KEY = "postings_version"
#: Bytes of postings segments kept per process (the most a search process adds to its
#: memory for them).
SEGMENT_CACHE_BYTES = 192 << 20


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


#: One term's stored segments over some sources, joined, by ``(postings version, sources,
#: term)``.
SEGMENTS: RowCache[TermSegments] = RowCache(SEGMENT_CACHE_BYTES)
