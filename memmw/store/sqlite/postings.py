"""Persisted keyword postings and statistics: what BM25 needs, per source and term hash.

Layout: ``postings(source, term, seg, n, data)`` WITHOUT ROWID, one row per segment of
at most ``SEGMENT_MAX`` postings of one term. ``seg`` is the first chunk rowid of the
segment and ``data`` packs its postings as three arrays, each of the narrowest unsigned
width that holds its values (1, 2 or 4 bytes, named by a 3-byte header): the gaps
between consecutive rowids (the first counted from ``seg``), the term frequencies and
the chunks' lengths in terms. Most postings take 4 or 5 bytes. Chunk rowids are never reused
and only grow, so new postings always go at the end of a term's last segment; deleting
a chunk rewrites only the segments that held it. ``keyword_stats(source, chunks,
terms)`` holds the live chunk count and the total length for the BM25 length norm
(both created by migration 3 of ``memmw.store.sqlite.schema``).

Writes are buffered per transaction (``PostingsBuffer``) and applied term by term by
``flush``, so a sync touching many chunks reads and writes each term's segments once.
A query reads only its terms' rows.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from memmw.store.protocol import EMPTY_POSTINGS, Postings

#: Postings per segment row: small enough that appending to a frequent term rewrites
#: little, large enough that reading one is a handful of rows.
SEGMENT_MAX = 4096
#: Buffered postings that trigger a flush (bounds the memory of a full rebuild).
FLUSH_AT = 2_000_000

_U32 = 2**32
_WIDTHS = (1, 2, 4)

EMPTY = EMPTY_POSTINGS


def decode(seg: int, data: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(rowids, tf, lengths)`` of one stored segment."""
    wg, wt, wl = data[0], data[1], data[2]
    n = (len(data) - 3) // (wg + wt + wl)
    gaps = np.frombuffer(data, dtype=f"<u{wg}", count=n, offset=3)
    tf = np.frombuffer(data, dtype=f"<u{wt}", count=n, offset=3 + n * wg)
    dl = np.frombuffer(data, dtype=f"<u{wl}", count=n, offset=3 + n * (wg + wt))
    return np.cumsum(gaps, dtype=np.int64) + seg, tf, dl


def _width(values: np.ndarray) -> int:
    top = int(values.max()) if len(values) else 0
    return next(w for w in _WIDTHS if top < 1 << (8 * w))


def encode(seg: int, rowids: np.ndarray, tf: np.ndarray, dl: np.ndarray) -> bytes:
    """One segment's bytes (``rowids`` ascending, the first at least ``seg``)."""
    gaps = np.diff(rowids, prepend=seg)
    widths = (_width(gaps), _width(tf), _width(dl))
    return b"".join(
        [
            bytes(widths),
            gaps.astype(f"<u{widths[0]}").tobytes(),
            np.asarray(tf).astype(f"<u{widths[1]}").tobytes(),
            np.asarray(dl).astype(f"<u{widths[2]}").tobytes(),
        ]
    )


@dataclass
class _Pending:
    """Postings changes of one source not yet written."""

    add_rowid: list[np.ndarray] = field(default_factory=list)
    add_hash: list[np.ndarray] = field(default_factory=list)
    add_tf: list[np.ndarray] = field(default_factory=list)
    add_dl: list[np.ndarray] = field(default_factory=list)
    del_rowid: list[np.ndarray] = field(default_factory=list)
    del_hash: list[np.ndarray] = field(default_factory=list)
    chunks: int = 0
    length: int = 0


class PostingsBuffer:
    """Postings changes of one transaction, applied by ``flush`` (before the commit).

    Args:
        bulk: The table holds no postings but the ones this buffer writes (a full
            rebuild into an empty database): flushes then only insert segments, never
            read them back.
    """

    def __init__(self, *, bulk: bool = False) -> None:
        self.bulk = bulk
        self._pending: dict[str, _Pending] = {}
        self.size = 0

    @property
    def pending(self) -> bool:
        """True when changes wait for ``flush``."""
        return bool(self._pending)

    def add(self, source: str, rowid: int, hashes: np.ndarray, tf: np.ndarray, length: int) -> None:
        """A new chunk (its rowid is larger than every rowid already written)."""
        p = self._pending.setdefault(source, _Pending())
        p.add_rowid.append(np.full(len(hashes), rowid, dtype=np.int64))
        p.add_hash.append(hashes)
        p.add_tf.append(tf)
        p.add_dl.append(np.full(len(hashes), length, dtype=np.uint32))
        p.chunks += 1
        p.length += length
        self.size += len(hashes)

    def remove(self, source: str, rowid: int, hashes: np.ndarray, length: int) -> None:
        """A chunk deleted (its postings were written before)."""
        p = self._pending.setdefault(source, _Pending())
        p.del_rowid.append(np.full(len(hashes), rowid, dtype=np.int64))
        p.del_hash.append(hashes)
        p.chunks -= 1
        p.length -= length
        self.size += len(hashes)

    def flush(self, conn: sqlite3.Connection) -> None:
        """Write the buffered changes (inside the caller's transaction)."""
        pending, self._pending, self.size = self._pending, {}, 0
        for source, p in sorted(pending.items()):
            if p.chunks or p.length:
                conn.execute(
                    "INSERT INTO keyword_stats(source, chunks, terms) VALUES (?, ?, ?)"
                    " ON CONFLICT(source) DO UPDATE SET chunks = chunks + excluded.chunks,"
                    " terms = terms + excluded.terms",
                    (source, p.chunks, p.length),
                )
            _flush_source(conn, source, p, bulk=self.bulk)


def _cat(parts: list[np.ndarray], dtype: type | np.dtype) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)


def _groups(hashes: np.ndarray) -> dict[int, tuple[int, int]]:
    """``{hash: (start, end)}`` of a sorted hash array."""
    if not len(hashes):
        return {}
    uniq, starts = np.unique(hashes, return_index=True)
    ends = np.append(starts[1:], len(hashes))
    return {int(h): (int(s), int(e)) for h, s, e in zip(uniq, starts, ends, strict=True)}


def _flush_source(conn: sqlite3.Connection, source: str, p: _Pending, *, bulk: bool) -> None:
    a_row, a_hash = _cat(p.add_rowid, np.int64), _cat(p.add_hash, np.int64)
    a_tf, a_dl = _cat(p.add_tf, np.uint16), _cat(p.add_dl, np.uint32)
    order = np.lexsort((a_row, a_hash))
    a_row, a_hash, a_tf, a_dl = a_row[order], a_hash[order], a_tf[order], a_dl[order]
    d_row, d_hash = _cat(p.del_rowid, np.int64), _cat(p.del_hash, np.int64)
    order = np.lexsort((d_row, d_hash))
    d_row, d_hash = d_row[order], d_hash[order]
    # A chunk added and deleted within one buffer never reaches the table.
    both = np.intersect1d(a_row, d_row)
    if len(both):
        keep = ~np.isin(a_row, both)
        a_row, a_hash, a_tf, a_dl = a_row[keep], a_hash[keep], a_tf[keep], a_dl[keep]
        keep = ~np.isin(d_row, both)
        d_row, d_hash = d_row[keep], d_hash[keep]
    adds, dels = _groups(a_hash), _groups(d_hash)
    inserts: list[tuple[str, int, int, int, bytes]] = []
    deletes: list[tuple[str, int, int]] = []
    touched = sorted(adds.keys() | dels.keys())
    # Segment keys of every touched term, a few hundred terms per query.
    seg_keys: dict[int, list[tuple[int, int]]] = {}
    if not bulk:
        for start in range(0, len(touched), 500):
            part = touched[start : start + 500]
            for term, seg, n in conn.execute(
                "SELECT term, seg, n FROM postings WHERE source=?"
                f" AND term IN ({','.join('?' * len(part))}) ORDER BY term, seg",
                (source, *part),
            ):
                seg_keys.setdefault(int(term), []).append((int(seg), int(n)))
    for term in touched:
        segs: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        changed: set[int] = set()
        last: tuple[int, int] | None = None  # (seg, n) of the term's last segment
        if not bulk:
            keys = seg_keys.get(term, [])
            if keys:
                last = (int(keys[-1][0]), int(keys[-1][1]))
            if term in dels and keys:
                lo, hi = dels[term]
                gone = d_row[lo:hi]
                starts = np.asarray([k[0] for k in keys], dtype=np.int64)
                for seg in {int(starts[i]) for i in np.searchsorted(starts, gone, "right") - 1 if i >= 0}:
                    (data,) = conn.execute(
                        "SELECT data FROM postings WHERE source=? AND term=? AND seg=?",
                        (source, term, seg),
                    ).fetchone()
                    rows, tf, dl = decode(seg, data)
                    keep = ~np.isin(rows, gone)
                    segs[seg] = (rows[keep], tf[keep], dl[keep])
                    changed.add(seg)
        if term in adds:
            lo, hi = adds[term]
            rows, tf, dl = a_row[lo:hi], a_tf[lo:hi], a_dl[lo:hi]
            if last is not None and last[1] < SEGMENT_MAX and int(rows[-1]) - last[0] < _U32:
                seg = last[0]
                if seg not in segs:
                    (data,) = conn.execute(
                        "SELECT data FROM postings WHERE source=? AND term=? AND seg=?",
                        (source, term, seg),
                    ).fetchone()
                    segs[seg] = decode(seg, data)
                old = segs[seg]
                room = max(0, SEGMENT_MAX - len(old[0]))
                segs[seg] = (
                    np.concatenate([old[0], rows[:room]]),
                    np.concatenate([old[1], tf[:room]]),
                    np.concatenate([old[2], dl[:room]]),
                )
                changed.add(seg)
                rows, tf, dl = rows[room:], tf[room:], dl[room:]
            for start in range(0, len(rows), SEGMENT_MAX):
                seg = int(rows[start])
                end = start + SEGMENT_MAX
                segs[seg] = (rows[start:end], tf[start:end], dl[start:end])
                changed.add(seg)
        for seg in changed:
            rows, tf, dl = segs[seg]
            if len(rows):
                inserts.append((source, term, seg, len(rows), encode(seg, rows, tf, dl)))
            else:
                deletes.append((source, term, seg))
    if deletes:
        conn.executemany("DELETE FROM postings WHERE source=? AND term=? AND seg=?", deletes)
    if inserts:
        conn.executemany(
            "INSERT OR REPLACE INTO postings(source, term, seg, n, data) VALUES (?,?,?,?,?)",
            inserts,
        )


def read_postings(
    conn: sqlite3.Connection, term_hashes: Sequence[int], sources: Sequence[str]
) -> dict[int, Postings]:
    """Live postings of each term over ``sources`` (terms with none are absent)."""
    wanted = list(dict.fromkeys(int(h) for h in term_hashes))
    if not wanted or not sources:
        return {}
    parts: dict[int, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}
    s_marks = ",".join("?" * len(sources))
    t_marks = ",".join("?" * len(wanted))
    for term, seg, data in conn.execute(
        f"SELECT term, seg, data FROM postings WHERE source IN ({s_marks})"
        f" AND term IN ({t_marks}) ORDER BY term, seg",
        (*sources, *wanted),
    ):
        parts.setdefault(int(term), []).append(decode(int(seg), data))
    out: dict[int, Postings] = {}
    for term, segs in parts.items():
        rows = np.concatenate([s[0] for s in segs])
        tf = np.concatenate([s[1] for s in segs]).astype(np.float32)
        dl = np.concatenate([s[2] for s in segs]).astype(np.float32)
        if len(sources) > 1:  # segments of several sources interleave
            order = np.argsort(rows, kind="stable")
            rows, tf, dl = rows[order], tf[order], dl[order]
        out[term] = Postings(rows, tf, dl)
    return out


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
