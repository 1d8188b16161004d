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

Postings segments are kept by ``memmw.store.cache.SEGMENTS`` instead, under the
namespace's postings version that a snapshot reads with its ``BEGIN`` (nothing is sent to
the server for them; sending each segment's version held and comparing it in the server
was measured to cost as much as sending the segments).
"""

from __future__ import annotations

from memmw.store.cache import RowCache
from memmw.store.protocol import ChunkRow

#: Bytes of chunk rows (text, term hashes, path) kept per process: some thousands of chunks.
CHUNK_CACHE_BYTES = 16 << 20


#: Chunk rows ``(xmin, row)`` by ``(scope, rowid)``.
CHUNKS: RowCache[tuple[int, ChunkRow]] = RowCache(CHUNK_CACHE_BYTES)
