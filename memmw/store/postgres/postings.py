"""The PostgreSQL tables of the keyword postings (``memmw.store.segments`` has the layout).

``memmw.postings_segments(namespace_id, source, term_hash, seg, n, data)`` one row per
segment (data stored out of line, uncompressed: a read copies it, never inflates it);
``memmw.postings_dead(namespace_id, source, chunk_rowid, hashes)`` the tombstones;
``memmw.source_stats`` the live chunk count and total length of each source, and its
tombstoned rowids again as one int64 array (``dead``, what a read needs of them). A query
reads its terms' segments in one round trip and scores them in the process with the one
BM25 of ``memmw.search.keyword``; only the namespace's writer (its advisory lock) writes
these rows, inside its transactions, so readers see whole segments of one commit.

Writes go through ``PgPostingsLog``: every add and removal of a writer, in order, flushed
through a ``PostingsBuffer`` before anything reads the postings and at the end of each
write; savepoints mark it and a rollback drops what it added and re-queues what the
rolled-back flushes had written (the server undid those rows).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from memmw.store.cache import VERSION_KEY
from memmw.store.segments import PostingsBuffer

if TYPE_CHECKING:
    import psycopg


class PgSegments:
    """``memmw.store.segments.SegmentTable`` over one namespace of one connection."""

    def __init__(self, conn: psycopg.Connection[Any], namespace_id: int) -> None:
        self.conn = conn
        self.ns = namespace_id
        self._dead: tuple[list[str], np.ndarray] | None = None
        #: A snapshot's ``source_stats`` rows, read with its BEGIN (``SourceStats``): the
        #: tombstones come from them (a read whose terms are all held in the process's
        #: cache sends no statement: ``memmw.store.segments`` asks for none).
        self.known: SourceStats | None = None
        self._versioned = False

    def add_stats(self, source: str, chunks: int, length: int) -> None:
        self.conn.execute(
            "INSERT INTO memmw.source_stats (namespace_id, source, n_docs, total_len)"
            " VALUES (%s, %s, %s, %s) ON CONFLICT (namespace_id, source) DO UPDATE"
            " SET n_docs = memmw.source_stats.n_docs + excluded.n_docs,"
            " total_len = memmw.source_stats.total_len + excluded.total_len",
            (self.ns, source, chunks, length),
        )

    def add_dead(self, source: str, dead: list[tuple[int, bytes]]) -> None:
        with self.conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO memmw.postings_dead (namespace_id, source, chunk_rowid, hashes)"
                " VALUES (%s, %s, %s, %s)",
                [(self.ns, source, r, h) for r, h in dead],
            )
        rowids = np.array([r for r, _ in dead], dtype=">i8").tobytes()
        self.conn.execute(
            "INSERT INTO memmw.source_stats (namespace_id, source, n_docs, total_len, dead)"
            " VALUES (%s, %s, 0, 0, %s) ON CONFLICT (namespace_id, source) DO UPDATE"
            " SET dead = memmw.source_stats.dead || excluded.dead",
            (self.ns, source, rowids),
        )

    def dead_count(self, source: str) -> int:
        row = self.conn.execute(
            "SELECT count(*) FROM memmw.postings_dead WHERE namespace_id = %s AND source = %s",
            (self.ns, source),
        ).fetchone()
        return int(row[0]) if row else 0

    def take_dead(self, source: str) -> list[tuple[int, bytes]]:
        rows = self.conn.execute(
            "DELETE FROM memmw.postings_dead WHERE namespace_id = %s AND source = %s"
            " RETURNING chunk_rowid, hashes",
            (self.ns, source),
        ).fetchall()
        self.conn.execute(
            "UPDATE memmw.source_stats SET dead = ''::bytea WHERE namespace_id = %s"
            " AND source = %s",
            (self.ns, source),
        )
        return [(int(r), bytes(h)) for r, h in rows]

    def segment_keys(
        self, source: str, terms: Sequence[int], small: int
    ) -> Iterable[tuple[int, int, int, bytes | None]]:
        return self.conn.cursor(binary=True).execute(
            "SELECT term_hash, seg, n, CASE WHEN n <= %s THEN data END"
            " FROM memmw.postings_segments WHERE namespace_id = %s AND source = %s"
            " AND term_hash = ANY(%s) ORDER BY term_hash, seg",
            (small, self.ns, source, list(terms)),
        ).fetchall()

    def segment(self, source: str, term: int, seg: int) -> bytes:
        row = self.conn.cursor(binary=True).execute(
            "SELECT data FROM memmw.postings_segments WHERE namespace_id = %s AND source = %s"
            " AND term_hash = %s AND seg = %s",
            (self.ns, source, term, seg),
        ).fetchone()
        assert row is not None
        return bytes(row[0])

    def clear(self) -> None:
        """Delete the namespace's postings, tombstones and statistics."""
        for table in ("postings_segments", "postings_dead", "source_stats"):
            self.conn.execute(
                f"DELETE FROM memmw.{table} WHERE namespace_id = %s", (self.ns,)
            )
        self._new_version()

    def _new_version(self) -> None:
        """Replace the namespace's postings version (``memmw.store.cache``): the segments
        of this transaction are not those any process kept under the old one."""
        if not self._versioned:
            self.conn.execute(
                "INSERT INTO memmw.meta (namespace_id, key, value) VALUES (%s, %s, %s)"
                " ON CONFLICT (namespace_id, key) DO UPDATE SET value = excluded.value",
                (self.ns, VERSION_KEY, uuid.uuid4().hex),
            )
            self._versioned = True

    def write(
        self,
        source: str,
        inserts: list[tuple[int, int, int, bytes]],
        deletes: list[tuple[int, int]],
    ) -> None:
        if inserts or deletes:
            self._new_version()  # the one writer of the segments
        if deletes:
            self.conn.execute(
                "DELETE FROM memmw.postings_segments p USING unnest(%s::bigint[], %s::bigint[])"
                " AS d(t, s) WHERE p.namespace_id = %s AND p.source = %s AND p.term_hash = d.t"
                " AND p.seg = d.s",
                ([t for t, _ in deletes], [s for _, s in deletes], self.ns, source),
            )
        if inserts:
            self.conn.execute(
                "INSERT INTO memmw.postings_segments (namespace_id, source, term_hash, seg, n,"
                " data) SELECT %s, %s, t, s, n, d FROM unnest(%s::bigint[], %s::bigint[],"
                " %s::integer[], %s::bytea[]) AS u(t, s, n, d)"
                " ON CONFLICT (namespace_id, source, term_hash, seg)"
                " DO UPDATE SET n = excluded.n, data = excluded.data",
                (
                    self.ns,
                    source,
                    [t for t, _, _, _ in inserts],
                    [s for _, s, _, _ in inserts],
                    [n for _, _, n, _ in inserts],
                    [d for _, _, _, d in inserts],
                ),
            )

    def dead_rowids(self, sources: Sequence[str]) -> Iterable[int]:
        if self.known is not None:
            return self.known.dead(sources)
        if self._dead is not None and self._dead[0] == list(sources):
            return self._dead[1]  # read with the segments (one round trip)
        row = self.conn.cursor(binary=True).execute(
            "SELECT string_agg(dead, ''::bytea) FROM memmw.source_stats"
            " WHERE namespace_id = %s AND source = ANY(%s)",
            (self.ns, list(sources)),
        ).fetchone()
        return _rowids(row[0] if row else None)

    def segments(
        self, sources: Sequence[str], terms: Sequence[int]
    ) -> Iterable[tuple[int, int, bytes]]:
        """The terms' segments, and (outside a snapshot, which read them with its BEGIN)
        the sources' tombstones in the same statement, kept for ``dead_rowids``.

        One statement, one round trip, bytea in binary (no hex to encode and decode).
        """
        src = list(sources)
        query = (
            "SELECT 0, term_hash, seg, data FROM memmw.postings_segments"
            " WHERE namespace_id = %(ns)s AND source = ANY(%(src)s)"
            " AND term_hash = ANY(%(terms)s)"
        )
        if self.known is None:
            # The tombstones (up to DEAD_MAX a source, many while syncs delete chunks) as
            # one int64 array: the sources' rows of source_stats.
            query += (
                " UNION ALL SELECT 1, NULL, NULL, string_agg(dead, ''::bytea)"
                " FROM memmw.source_stats WHERE namespace_id = %(ns)s AND source = ANY(%(src)s)"
            )
        rows = self.conn.cursor(binary=True).execute(
            query, {"ns": self.ns, "src": src, "terms": list(terms)}
        ).fetchall()
        out: list[tuple[int, int, bytes]] = []
        dead = _rowids(None)
        for kind, term, seg, data in rows:
            if kind == 0:
                out.append((int(term), int(seg), bytes(data)))
            else:
                dead = _rowids(data)
        # By term and seg, sorted here: the server's sort would cost it more.
        out.sort(key=lambda row: (row[0], row[1]))
        if self.known is None:
            self._dead = (src, dead)
        return out


@dataclass(frozen=True)
class SourceStats:
    """A snapshot's ``source_stats`` rows: ``{source: (live chunks, total length,
    tombstoned rowids as big-endian int64 or None)}``, and the newest decay date of the
    namespace's files, all read with its BEGIN."""

    rows: dict[str, tuple[int, int, bytes | None]]
    newest: float | None

    def keyword_stats(self, sources: Sequence[str]) -> tuple[int, float]:
        """``(live chunks, total terms)`` of ``sources``."""
        got = [self.rows[s] for s in dict.fromkeys(sources) if s in self.rows]
        return sum(r[0] for r in got), float(sum(r[1] for r in got))

    def dead(self, sources: Sequence[str]) -> np.ndarray:
        """The tombstoned rowids of ``sources``."""
        return _rowids(b"".join(self.rows[s][2] or b"" for s in dict.fromkeys(sources)
                                if s in self.rows))


#: One logged change: ``(source, rowid, hashes, tf or None for a removal, length)``.
_Op = tuple[str, int, np.ndarray, "np.ndarray | None", int]


@dataclass
class PgPostingsLog:
    """A writer's postings changes in order; ``ops[:flushed]`` are in the tables (or, in a
    staged rebuild, held back by its buffer)."""

    ops: list[_Op] = field(default_factory=list)
    flushed: int = 0
    #: Postings logged and not flushed, and those a rebuild's buffer holds back (a staged
    #: rebuild flushes past ``FLUSH_AT``).
    size: int = 0
    #: A staged rebuild's buffer (``begin_bulk``), kept across its flushes: each term's
    #: full segments are written, the rest held back for the next flush.
    bulk: PostingsBuffer | None = None
    #: Where the rebuild's ops start, and whether the rows it wrote must be deleted
    #: before the next flush (a savepoint that rolled back a flush of it).
    bulk_start: int = 0
    wipe: bool = False

    @property
    def pending(self) -> bool:
        return self.flushed < len(self.ops) or (self.bulk is not None and self.bulk.pending)

    def begin_bulk(self) -> None:
        """A staged rebuild into an emptied namespace starts (nothing pending)."""
        self.bulk, self.bulk_start, self.wipe = PostingsBuffer(bulk=True), len(self.ops), False

    def end_bulk(self) -> None:
        """Back to a fresh buffer per flush (after the rebuild's last flush or its rollback)."""
        self.bulk, self.wipe = None, False

    def add(self, source: str, rowid: int, hashes: np.ndarray, tf: np.ndarray, length: int) -> None:
        self.ops.append((source, rowid, hashes, tf, length))
        self.size += len(hashes)

    def remove(self, source: str, rowid: int, hashes: np.ndarray, length: int) -> None:
        self.ops.append((source, rowid, hashes, None, length))
        self.size += len(hashes)

    def mark(self) -> tuple[int, int]:
        """The state to return to if the savepoint opened now rolls back."""
        return len(self.ops), self.flushed

    def rollback(self, mark: tuple[int, int]) -> None:
        """Forget what was logged since ``mark``; re-queue what was flushed since."""
        added, flushed = mark
        del self.ops[added:]
        if self.bulk is not None and self.flushed > flushed:
            # The server undid a flush of the rebuild, which wrote postings its buffer
            # held back before: the rebuild's postings are written again from its start.
            self.bulk, self.wipe = PostingsBuffer(bulk=True), True
            self.flushed = self.bulk_start
        self.flushed = min(self.flushed, flushed)
        self.size = sum(len(op[2]) for op in self.ops[self.flushed :])
        if self.bulk is not None:
            self.size += self.bulk.size

    def flush(self, table: PgSegments, *, carry: bool = False) -> None:
        """Write the pending changes through one ``PostingsBuffer`` (a rebuild's own,
        which holds each term's short last piece back with ``carry``)."""
        if not self.pending:
            return
        if self.wipe:
            table.clear()
            self.wipe = False
        buffer = self.bulk if self.bulk is not None else PostingsBuffer()
        for source, rowid, hashes, tf, length in self.ops[self.flushed :]:
            if tf is None:
                buffer.remove(source, rowid, hashes, length)
            else:
                buffer.add(source, rowid, hashes, tf, length)
        buffer.flush(table, carry=carry)
        self.flushed = len(self.ops)
        self.size = buffer.size

    def settle(self) -> None:
        """Everything is committed: forget the log."""
        if not self.pending:
            self.ops.clear()
            self.flushed = 0


def _rowids(packed: bytes | None) -> np.ndarray:
    """Tombstoned rowids from their big-endian int64 array (none for NULL)."""
    if not packed:
        return np.zeros(0, dtype=np.int64)
    return np.frombuffer(packed, dtype=">i8").astype(np.int64)
