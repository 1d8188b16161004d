"""The SQLite tables of the keyword postings (``memmw.store.segments`` has the layout).

``postings(source, term, seg, n, data)`` WITHOUT ROWID, one row per segment;
``postings_dead(source, chunk_rowid, hashes)`` the tombstones (migration 4);
``keyword_stats(source, chunks, terms)`` the live chunk count and total length of each
source (migration 3 of ``memmw.store.sqlite.schema``); the meta row ``postings_version``
(migration 7), which every write of segments replaces by a new random value in its own
transaction, keys the segments a process keeps (``memmw.store.cache``).
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterable, Sequence

from memmw.store.arena import FRESH, Arena
from memmw.store.cache import VERSION_KEY
from memmw.store.protocol import TermPostings
from memmw.store.segments import read_postings as _read_postings


class SqliteSegments:
    """``memmw.store.segments.SegmentTable`` over one SQLite connection."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self._versioned = False

    def add_stats(self, source: str, chunks: int, length: int) -> None:
        self.conn.execute(
            "INSERT INTO keyword_stats(source, chunks, terms) VALUES (?, ?, ?)"
            " ON CONFLICT(source) DO UPDATE SET chunks = chunks + excluded.chunks,"
            " terms = terms + excluded.terms",
            (source, chunks, length),
        )

    def add_dead(self, source: str, dead: list[tuple[int, bytes]]) -> None:
        self.conn.executemany(
            "INSERT INTO postings_dead(source, chunk_rowid, hashes) VALUES (?, ?, ?)",
            [(source, r, h) for r, h in dead],
        )

    def dead_count(self, source: str) -> int:
        (n,) = self.conn.execute(
            "SELECT COUNT(*) FROM postings_dead WHERE source=?", (source,)
        ).fetchone()
        return int(n)

    def take_dead(self, source: str) -> list[tuple[int, bytes]]:
        rows = self.conn.execute(
            "SELECT chunk_rowid, hashes FROM postings_dead WHERE source=?", (source,)
        ).fetchall()
        self.conn.execute("DELETE FROM postings_dead WHERE source=?", (source,))
        return [(int(r), bytes(h)) for r, h in rows]

    def segment_keys(
        self, source: str, terms: Sequence[int], small: int
    ) -> Iterable[tuple[int, int, int, bytes | None]]:
        return self.conn.execute(
            "SELECT term, seg, n, CASE WHEN n <= ? THEN data END FROM postings"
            f" WHERE source=? AND term IN ({','.join('?' * len(terms))}) ORDER BY term, seg",
            (small, source, *terms),
        )

    def segment(self, source: str, term: int, seg: int) -> bytes:
        (data,) = self.conn.execute(
            "SELECT data FROM postings WHERE source=? AND term=? AND seg=?", (source, term, seg)
        ).fetchone()
        return bytes(data)

    def write(
        self,
        source: str,
        inserts: list[tuple[int, int, int, bytes]],
        deletes: list[tuple[int, int]],
    ) -> None:
        if (inserts or deletes) and not self._versioned:
            # The one writer of the segments: whatever a process kept of them under the
            # old version is never read again (a flush makes one SqliteSegments).
            self.conn.execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                (VERSION_KEY, uuid.uuid4().hex),
            )
            self._versioned = True
        if deletes:
            self.conn.executemany(
                "DELETE FROM postings WHERE source=? AND term=? AND seg=?",
                [(source, t, s) for t, s in deletes],
            )
        if inserts:
            self.conn.executemany(
                "INSERT OR REPLACE INTO postings(source, term, seg, n, data) VALUES (?,?,?,?,?)",
                [(source, t, s, n, d) for t, s, n, d in inserts],
            )

    def dead_rowids(self, sources: Sequence[str]) -> Iterable[int]:
        marks = ",".join("?" * len(sources))
        return (
            r
            for (r,) in self.conn.execute(
                f"SELECT chunk_rowid FROM postings_dead WHERE source IN ({marks})", tuple(sources)
            )
        )

    def segments(
        self, sources: Sequence[str], terms: Sequence[int]
    ) -> Iterable[tuple[int, int, bytes]]:
        return self.conn.execute(
            f"SELECT term, seg, data FROM postings WHERE source IN ({','.join('?' * len(sources))})"
            f" AND term IN ({','.join('?' * len(terms))}) ORDER BY term, seg",
            (*sources, *terms),
        )


def read_postings(
    conn: sqlite3.Connection,
    term_hashes: Sequence[int],
    sources: Sequence[str],
    arena: Arena = FRESH,
) -> dict[int, TermPostings]:
    """Live postings of each term over ``sources`` (``memmw.store.segments.read_postings``),
    the segments through the process's cache at the connection's postings version."""
    row = conn.execute("SELECT value FROM meta WHERE key=?", (VERSION_KEY,)).fetchone()
    version = None if row is None else f"sqlite:{row[0]}"
    return _read_postings(SqliteSegments(conn), term_hashes, sources, arena, version)


def read_stats(conn: sqlite3.Connection, sources: Sequence[str]) -> tuple[int, int]:
    """``(live chunks, total terms)`` over ``sources``."""
    if not sources:
        return 0, 0
    marks = ",".join("?" * len(sources))
    row = conn.execute(
        f"SELECT COALESCE(SUM(chunks), 0), COALESCE(SUM(terms), 0) FROM keyword_stats"
        f" WHERE source IN ({marks})",
        tuple(sources),
    ).fetchone()
    return int(row[0]), int(row[1])
