"""Keyword postings stored as segments, the same in every store: what BM25 needs, per
source and term hash.

Layout (``memmw.store.sqlite.postings`` and ``memmw.store.postgres.postings`` hold the
tables): one row per segment of
at most ``SEGMENT_MAX`` postings of one term. ``seg`` is the first chunk rowid of the
segment and ``data`` packs its postings as three arrays, each of the narrowest unsigned
width that holds its values (1, 2 or 4 bytes, named by a 3-byte header): each rowid's
offset from ``seg``, the term frequencies and the chunks' lengths in terms. Most
postings take 5 bytes. Offsets rather than gaps: a search looks a chunk up in a
frequent term's segment by binary search over the stored bytes, decoding nothing. Per source, the live chunk count
and the total length (the BM25 length norm) are kept next to them.

Incremental writes touch little: chunk rowids are never reused and only grow, so new
postings go after a term's last segment, rewriting it only while it holds at most
``TAIL_MAX`` postings and otherwise starting a new segment; once a term ends in more
than ``TAIL_SEGMENTS`` segments that are not full, an append merges them. A deleted
chunk becomes a tombstone (its rowid and term hashes) that reads skip, and ``keyword_stats`` drops it at once, so df, N and the average length
count live chunks only; when a source has more than ``DEAD_MAX`` tombstones a flush
purges them from the segments that hold them (the chunk's term hashes, kept in its
tombstone, name those segments).

Writes are buffered per transaction (``PostingsBuffer``) and applied term by term by
``flush``, so a sync touching many chunks reads and writes each term's segments once.
A query reads only its terms' rows. A store gives this module its tables through
``SegmentTable``; the writer's lock of each store makes a flush the only writer of them.

A full rebuild (one bulk buffer, in both stores) leaves every term in full segments but
its last one (reads then take the fewest rows and per-segment steps): a flush past
``FLUSH_AT`` (``carry``) writes only each term's full segments and holds the rest back for
the next flush (fewer than ``SEGMENT_MAX`` postings a term, at most ``CARRY_MAX`` in all,
counted in ``FLUSH_AT``), so most postings are written once. Past ``CARRY_MAX``, pieces
are written as short segments ("spilled": first of the terms spilled before, then of
those with the fewest new postings), and the next flush that holds nothing back rewrites
(``compact``) the terms left with a short segment before their last one, from that
segment on: a posting is written at most twice (once more for each read inside the
rebuild that flushes while a compaction is due).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from memmw.store.arena import FRESH, Arena
from memmw.store.cache import SEGMENTS
from memmw.store.protocol import EMPTY_POSTINGS, Postings, TermPostings, find_sorted

#: Postings per segment row: small enough that appending to a frequent term rewrites
#: little, large enough that reading one is a handful of rows.
SEGMENT_MAX = 4096
#: A term's last segment is rewritten by an append while it stays this small; a larger
#: one gets a new segment after it instead (appends then write only the new postings).
TAIL_MAX = 256
#: Trailing segments of a term that are not full, beyond which an append merges them.
TAIL_SEGMENTS = 8
#: Tombstoned chunks of a source beyond which a flush purges them from the segments.
DEAD_MAX = 2048
#: Postings between two entries of a term's skip list (``TermSegments.skips``).
SKIP = 128
#: ``TermSegments.find`` goes through the skip list when ``chunks + SKIP_FIXED`` is less
#: than ``touched segments * SKIP_SEGMENT``. Measured on 1.41M chunks' terms of 52, 178 and
#: 344 segments, 24 to 30,000 sorted chunks: the skip list costs about 0.1 us more a
#: chunk and 60 us more a call, a segment's binary search about 1.2 us.
SKIP_FIXED = 600
SKIP_SEGMENT = 12
#: Buffered postings that trigger a flush (bounds the memory of a full rebuild).
FLUSH_AT = 2_000_000
#: Postings a bulk buffer holds back at most after a flush (each term's last, short
#: piece; they count toward ``FLUSH_AT``, so a flush writes at least the rest of it).
CARRY_MAX = FLUSH_AT // 2

_U32 = 2**32
_WIDTHS = (1, 2, 4)
_UINT: dict[int, np.dtype[np.unsignedinteger]] = {
    1: np.dtype("<u1"), 2: np.dtype("<u2"), 4: np.dtype("<u4")
}

EMPTY = EMPTY_POSTINGS
_NONE = np.zeros(0, dtype=np.int64)


class SegmentTable(Protocol):
    """One store's segment and tombstone tables, as a flush and a read use them."""

    def add_stats(self, source: str, chunks: int, length: int) -> None:
        """Add to the live chunk count and total length of ``source``."""
        ...

    def add_dead(self, source: str, dead: list[tuple[int, bytes]]) -> None:
        """Tombstones: ``(chunk rowid, its term hashes as little-endian int64)``."""
        ...

    def dead_count(self, source: str) -> int:
        """Tombstones of ``source``."""
        ...

    def take_dead(self, source: str) -> list[tuple[int, bytes]]:
        """Every tombstone of ``source``, deleted."""
        ...

    def segment_keys(
        self, source: str, terms: Sequence[int], small: int
    ) -> Iterable[tuple[int, int, int, bytes | None]]:
        """``(term, seg, n, data when n <= small else None)`` of ``terms``, by term and seg."""
        ...

    def segment(self, source: str, term: int, seg: int) -> bytes:
        """One segment's data."""
        ...

    def write(
        self,
        source: str,
        inserts: list[tuple[int, int, int, bytes]],
        deletes: list[tuple[int, int]],
    ) -> None:
        """Delete ``(term, seg)`` segments, then insert or replace ``(term, seg, n, data)``."""
        ...

    def dead_rowids(self, sources: Sequence[str]) -> Iterable[int]:
        """Tombstoned chunk rowids of ``sources`` (asked right after ``segments``)."""
        ...

    def segments(
        self, sources: Sequence[str], terms: Sequence[int]
    ) -> Iterable[tuple[int, int, bytes]]:
        """``(term, seg, data)`` of ``terms`` over ``sources``, by term and seg."""
        ...


def decode(seg: int, data: bytes | memoryview) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(rowids, tf, lengths)`` of one stored segment."""
    offsets, tf, dl = views(data)
    return offsets.astype(np.int64) + seg, tf, dl


def views(data: bytes | memoryview) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(offsets from seg, tf, lengths)`` of one stored segment: views of its bytes."""
    wg, wt, wl = data[0], data[1], data[2]
    n = (len(data) - 3) // (wg + wt + wl)
    # Positional arguments: frombuffer parses keywords slower than it copies a view.
    return (
        np.frombuffer(data, _UINT[wg], n, 3),
        np.frombuffer(data, _UINT[wt], n, 3 + n * wg),
        np.frombuffer(data, _UINT[wl], n, 3 + n * (wg + wt)),
    )


def _width(values: np.ndarray) -> int:
    top = int(values.max()) if len(values) else 0
    return next(w for w in _WIDTHS if top < 1 << (8 * w))


def encode(seg: int, rowids: np.ndarray, tf: np.ndarray, dl: np.ndarray) -> bytes:
    """One segment's bytes (``rowids`` ascending, the first at least ``seg``)."""
    gaps = np.asarray(rowids, dtype=np.int64) - seg  # offsets from the segment's key
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
    dead: list[tuple[int, np.ndarray]] = field(default_factory=list)  # (rowid, hashes)
    chunks: int = 0
    length: int = 0


class PostingsBuffer:
    """Postings changes of one transaction, applied by ``flush`` (before the commit).

    Args:
        bulk: The table holds no postings but the ones this buffer writes (a full
            rebuild into an empty database): flushes then insert segments without reading
            any back, each term's full ones first (``flush(carry=True)``), and a flush
            that holds nothing back compacts the terms left with a short segment before
            their last.
    """

    def __init__(self, *, bulk: bool = False) -> None:
        self.bulk = bulk
        self._pending: dict[str, _Pending] = {}
        self.size = 0
        #: Bulk: the postings held back by the last ``flush(carry=True)``, per source.
        self._carry: dict[str, _Carry] = {}
        #: Bulk, per source and sorted: the terms that got a short segment by a flush
        #: holding back (spilled first again), the terms whose last segment may be short,
        #: and the terms written after one (``compact`` rewrites them at the next flush
        #: that holds nothing back).
        self._spilled: dict[str, np.ndarray] = {}
        self._short: dict[str, np.ndarray] = {}
        self._due: dict[str, np.ndarray] = {}

    @property
    def pending(self) -> bool:
        """True when changes wait for ``flush`` (held-back postings, a compaction due)."""
        return bool(self._pending) or bool(self._carry) or bool(self._due)

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
        p.dead.append((rowid, hashes))
        p.chunks -= 1
        p.length -= length
        self.size += len(hashes)

    def clear(self) -> None:
        """Forget every buffered change (its transaction rolled back)."""
        self._pending, self.size, self._carry = {}, 0, {}
        self._spilled, self._short, self._due = {}, {}, {}

    def flush(self, table: SegmentTable, *, carry: bool = False) -> None:
        """Write the buffered changes (inside the caller's transaction).

        Args:
            carry: A bulk buffer writes each term's full segments only and holds the
                rest back for the next flush (a flush to bound memory, not before a read
                or a commit). Without it, everything is written and, in bulk, the terms
                left with a short segment before their last are compacted.
        """
        pending, self._pending, self.size = self._pending, {}, 0
        held, self._carry = self._carry, {}
        for source in sorted(pending.keys() | held.keys()):
            p = pending.get(source) or _Pending()
            if p.chunks or p.length:
                table.add_stats(source, p.chunks, p.length)
            if not self.bulk:
                _flush_source(table, source, p)
                continue
            kept, spilled, written, short = _flush_bulk(
                table, source, p, held.get(source), self._spilled.get(source, _NONE),
                carry=carry,
            )
            before = self._short.get(source, _NONE)
            after = np.intersect1d(written, before, assume_unique=True)
            if len(after):
                self._due[source] = np.union1d(self._due.get(source, _NONE), after)
            self._short[source] = np.union1d(np.setdiff1d(before, written, assume_unique=True), short)
            self._spilled[source] = spilled
            if kept is not None:
                self._carry[source] = kept
                self.size += len(kept.rowid)
        if not carry:
            for source, terms in sorted(self._due.items()):
                compact(table, source, terms)
                # Cut again, a compacted term's last segment may be short.
                self._short[source] = np.union1d(self._short[source], terms)
                self._spilled.pop(source, None)
            self._due.clear()


@dataclass
class _Carry:
    """Postings of one source a bulk buffer held back, by term then rowid."""

    rowid: np.ndarray
    hash: np.ndarray
    tf: np.ndarray
    dl: np.ndarray


def _pieces(rows: np.ndarray) -> list[tuple[int, int]]:
    """``(start, end)`` of the segments ``rows`` (one term's, ascending) are cut into: full
    ones (``SEGMENT_MAX``), each offset from its first rowid below 2**32, the rest last."""
    out: list[tuple[int, int]] = []
    start, n = 0, len(rows)
    while start < n:
        end = min(start + SEGMENT_MAX, n)
        if int(rows[end - 1]) - int(rows[start]) >= _U32:  # never with real rowids
            end = int(np.searchsorted(rows, int(rows[start]) + _U32, "left"))
        out.append((start, end))
        start = end
    return out


def _flush_bulk(
    table: SegmentTable, source: str, p: _Pending, held: _Carry | None, spilled: np.ndarray,
    *, carry: bool,
) -> tuple[_Carry | None, np.ndarray, np.ndarray, np.ndarray]:
    """Write one source's postings of a bulk buffer (the table holds only what it wrote).

    ``carry``: each term's last piece, when short, is held back, at most ``CARRY_MAX``
    postings in all. Past that, pieces are written short ("spilled"), of the terms in
    ``spilled`` first (spilled before: ``compact`` rewrites them from there on anyway),
    then of those with the fewest postings in this flush (the least to rewrite later).

    Returns the postings held back, ``spilled`` with the terms spilled now, the terms
    written and those whose last segment written is short (both sorted).
    """
    a_row, a_hash, a_tf, a_dl = _sorted_adds(p)
    if held is not None:
        # Merged in, not sorted again: a held-back posting goes before the new ones of
        # its term (its rowid is older).
        at_old = np.arange(len(held.rowid)) + np.searchsorted(a_hash, held.hash, "left")
        at_new = np.arange(len(a_row)) + np.searchsorted(held.hash, a_hash, "right")
        a_row, a_hash, a_tf, a_dl = (
            _interleave(o, at_old, n, at_new)
            for o, n in ((held.rowid, a_row), (held.hash, a_hash), (held.tf, a_tf),
                         (held.dl, a_dl))
        )
    if p.dead:
        # Deleted chunks: never written when added since the last flush, else tombstones
        # (some of their postings may be written), as in an incremental flush.
        died = np.fromiter((r for r, _ in p.dead), dtype=np.int64, count=len(p.dead))
        keep = ~np.isin(a_row, died)
        a_row, a_hash, a_tf, a_dl = a_row[keep], a_hash[keep], a_tf[keep], a_dl[keep]
        born = {int(part[0]) for part in p.add_rowid if len(part)}
        gone = [(r, h.astype("<i8").tobytes()) for r, h in p.dead if r not in born]
        if gone:
            table.add_dead(source, gone)
    inserts: list[tuple[int, int, int, bytes]] = []
    back: list[tuple[bool, int, int, int, int, int]] = []  # (clean, new, size, term, start, end)

    def put(term: int, start: int, end: int) -> None:
        seg = int(a_row[start])
        inserts.append((term, seg, end - start,
                        encode(seg, a_row[start:end], a_tf[start:end], a_dl[start:end])))

    groups = _groups(a_hash)
    clean: list[bool] = []
    fresh_counts: list[int] = []
    if carry and groups:
        terms = np.fromiter(groups, dtype=np.int64, count=len(groups))
        at = np.minimum(np.searchsorted(spilled, terms), max(len(spilled) - 1, 0))
        clean = (spilled[at] != terms).tolist() if len(spilled) else [True] * len(terms)
        sizes = np.fromiter((hi - lo for lo, hi in groups.values()), dtype=np.int64,
                            count=len(groups))
        if held is not None:  # less the held-back ones: the term's new postings
            sizes -= np.searchsorted(held.hash, terms, "right")
            sizes += np.searchsorted(held.hash, terms, "left")
        fresh_counts = sizes.tolist()
    for i, (term, (lo, hi)) in enumerate(groups.items()):
        pieces = _pieces(a_row[lo:hi])
        start, end = pieces[-1]
        if carry and end - start < SEGMENT_MAX:
            pieces.pop()
            back.append((clean[i], fresh_counts[i], end - start, term, lo + start, lo + end))
        for start, end in pieces:
            put(term, lo + start, lo + end)
    total = sum(b[2] for b in back)
    if total > CARRY_MAX:
        back.sort()
        n = 0
        while total > CARRY_MAX:
            _, _, size, term, start, end = back[n]
            put(term, start, end)
            total -= size
            n += 1
        out = np.fromiter((b[3] for b in back[:n]), dtype=np.int64, count=n)
        spilled = np.union1d(spilled, out)
        back = back[n:]
    if inserts:
        table.write(source, inserts, [])
    last = {term: n for term, _, n, _ in inserts}  # each term's last segment written
    written = np.fromiter(sorted(last), dtype=np.int64, count=len(last))
    short = np.fromiter(sorted(t for t, n in last.items() if n < SEGMENT_MAX), dtype=np.int64)
    if not back:
        return None, spilled, written, short
    keep = np.zeros(len(a_row), dtype=bool)
    for *_, start, end in back:
        keep[start:end] = True
    kept = _Carry(a_row[keep], a_hash[keep], a_tf[keep], a_dl[keep])
    return kept, spilled, written, short


def _interleave(a: np.ndarray, at_a: np.ndarray, b: np.ndarray, at_b: np.ndarray) -> np.ndarray:
    """``a`` and ``b`` in one array, at the positions ``at_a`` and ``at_b``."""
    out = np.empty(len(a) + len(b), dtype=np.result_type(a, b))
    out[at_a] = a
    out[at_b] = b
    return out


def compact(table: SegmentTable, source: str, candidates: np.ndarray) -> int:
    """Rewrite the terms among ``candidates`` that hold a short segment before their last
    one: their segments from the first short one on, cut again into full segments (the
    last one excepted). Postings and their order stay the same; returns how many were
    written."""
    terms = sorted(int(t) for t in candidates)
    written = 0
    for first in range(0, len(terms), 100):  # bounds the memory: ~100 terms' short tails
        keys, small = _segment_keys(table, source, terms[first : first + 100], SEGMENT_MAX - 1)
        inserts: list[tuple[int, int, int, bytes]] = []
        deletes: list[tuple[int, int]] = []
        for term, segs in keys.items():
            at = next((i for i, (_, n) in enumerate(segs) if n < SEGMENT_MAX), len(segs))
            old = [seg for seg, _ in segs[at:]]
            if len(old) < 2:
                continue
            rows, tf, dl = _decode_term(
                [(seg, small.get((term, seg)) or table.segment(source, term, seg)) for seg in old]
            )
            new = set()
            for start, end in _pieces(rows):
                seg = int(rows[start])
                new.add(seg)
                inserts.append(
                    (term, seg, end - start, encode(seg, rows[start:end], tf[start:end],
                                                    dl[start:end]))
                )
            deletes += [(term, seg) for seg in old if seg not in new]
            written += len(rows)
        if inserts or deletes:
            table.write(source, inserts, deletes)
    return written


def _cat(parts: list[np.ndarray], dtype: type | np.dtype) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)


def _groups(hashes: np.ndarray) -> dict[int, tuple[int, int]]:
    """``{hash: (start, end)}`` of a sorted hash array."""
    if not len(hashes):
        return {}
    # Sorted already: the groups start where the hash changes (no second sort by unique).
    starts = [0, *(np.flatnonzero(hashes[1:] != hashes[:-1]) + 1).tolist()]
    ends = [*starts[1:], len(hashes)]
    return dict(zip(hashes[starts].tolist(), zip(starts, ends, strict=True), strict=True))


def _dead_arrays(rows: list[tuple[int, bytes]]) -> tuple[np.ndarray, np.ndarray]:
    """``(rowids, hashes)`` of tombstoned chunks, one entry per (chunk, term)."""
    hashes = [np.frombuffer(blob, dtype="<i8") for _, blob in rows]
    rowids = [np.full(len(h), r, dtype=np.int64) for (r, _), h in zip(rows, hashes, strict=True)]
    return _cat(rowids, np.int64), _cat([h.astype(np.int64) for h in hashes], np.int64)


def _sorted_adds(p: _Pending) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(rowids, hashes, tf, lengths)`` of the postings added to ``p``, by term then rowid."""
    a_row, a_hash = _cat(p.add_rowid, np.int64), _cat(p.add_hash, np.int64)
    a_tf, a_dl = _cat(p.add_tf, np.uint16), _cat(p.add_dl, np.uint32)
    order = np.lexsort((a_row, a_hash))
    return a_row[order], a_hash[order], a_tf[order], a_dl[order]


def _segment_keys(
    table: SegmentTable, source: str, terms: Sequence[int], small: int
) -> tuple[dict[int, list[tuple[int, int]]], dict[tuple[int, int], bytes]]:
    """``{term: [(seg, n), ...]}`` of ``terms`` and the data of their segments of at most
    ``small`` postings, in statements of 500 terms (one per term cost a sync more than
    the rest of its flush)."""
    keys: dict[int, list[tuple[int, int]]] = {}
    data_of: dict[tuple[int, int], bytes] = {}
    for start in range(0, len(terms), 500):
        for term, seg, n, data in table.segment_keys(source, terms[start : start + 500], small):
            keys.setdefault(int(term), []).append((int(seg), int(n)))
            if data is not None:
                data_of[(int(term), int(seg))] = bytes(data)
    return keys, data_of


def _flush_source(table: SegmentTable, source: str, p: _Pending) -> None:
    a_row, a_hash, a_tf, a_dl = _sorted_adds(p)
    # A chunk added and deleted within one buffer never reaches the table.
    born = {int(part[0]) for part in p.add_rowid if len(part)} if p.dead else set()
    gone = [(r, h) for r, h in p.dead if r not in born]
    died = {r for r, _ in p.dead if r in born}
    if died:
        keep = ~np.isin(a_row, np.fromiter(died, dtype=np.int64, count=len(died)))
        a_row, a_hash, a_tf, a_dl = a_row[keep], a_hash[keep], a_tf[keep], a_dl[keep]
    d_row = d_hash = np.zeros(0, dtype=np.int64)
    if gone:
        # Deleted chunks become tombstones: rewriting every segment that holds one costs
        # a sync far more than skipping them at read time until they are many.
        table.add_dead(source, [(r, h.astype("<i8").tobytes()) for r, h in gone])
        if table.dead_count(source) > DEAD_MAX:
            rows = table.take_dead(source)
            d_row, d_hash = _dead_arrays([(int(r), bytes(h)) for r, h in rows])
            order = np.lexsort((d_row, d_hash))
            d_row, d_hash = d_row[order], d_hash[order]
    adds, dels = _groups(a_hash), _groups(d_hash)
    touched = sorted(adds.keys() | dels.keys())
    # Segment keys of every touched term, with the data of the small ones (which an
    # append rewrites).
    seg_keys, small = _segment_keys(table, source, touched, TAIL_MAX)
    inserts: list[tuple[int, int, int, bytes]] = []
    deletes: list[tuple[int, int]] = []
    for term in touched:
        _flush_term(table, source, term, seg_keys.get(term, []), small, inserts, deletes,
                    dels=d_row[slice(*dels[term])] if term in dels else None,
                    adds=(a_row[slice(*adds[term])], a_tf[slice(*adds[term])],
                          a_dl[slice(*adds[term])]) if term in adds else None)
    if inserts or deletes:
        table.write(source, inserts, deletes)


Segment = tuple[np.ndarray, np.ndarray, np.ndarray]


def _flush_term(
    table: SegmentTable,
    source: str,
    term: int,
    keys: list[tuple[int, int]],
    small: dict[tuple[int, int], bytes],
    inserts: list[tuple[int, int, int, bytes]],
    deletes: list[tuple[int, int]],
    *,
    dels: np.ndarray | None,
    adds: Segment | None,
) -> None:
    """Queue the segment writes of one term: purge ``dels``, then append ``adds``."""
    segs: dict[int, Segment] = {}  # segments read (and maybe changed), by key

    def load(seg: int) -> Segment:
        if seg not in segs:
            data = small.get((term, seg))
            if data is None:
                data = table.segment(source, term, seg)
            segs[seg] = decode(seg, data)
        return segs[seg]

    changed: set[int] = set()
    if dels is not None and keys:
        starts = np.asarray([k[0] for k in keys], dtype=np.int64)
        for seg in {int(starts[i]) for i in np.searchsorted(starts, dels, "right") - 1 if i >= 0}:
            rows, tf, dl = load(seg)
            keep = ~np.isin(rows, dels)
            segs[seg] = (rows[keep], tf[keep], dl[keep])
            changed.add(seg)
    if adds is not None:
        # The live segments after the purge: (key, postings).
        live = [(s, len(segs[s][0]) if s in segs else n) for s, n in keys]
        live = [(s, n) for s, n in live if n]
        rows, tf, dl = adds
        # Trailing segments that are not full: an append rewrites the last one when it is
        # small, else starts a new one, and merges them all once they are too many.
        tail = 0
        while tail < len(live) and live[-1 - tail][1] < SEGMENT_MAX:
            tail += 1
        if live and live[-1][1] + len(rows) <= TAIL_MAX and int(rows[-1]) - live[-1][0] < _U32:
            merge = [live[-1][0]]
        elif tail and tail + -(-len(rows) // SEGMENT_MAX) > TAIL_SEGMENTS and (
            int(rows[-1]) - live[-tail][0] < _U32
        ):
            merge = [s for s, _ in live[-tail:]]
        else:
            merge = []
        if merge:
            old = [load(s) for s in merge]
            rows = np.concatenate([o[0] for o in old] + [rows])
            tf = np.concatenate([o[1] for o in old] + [tf])
            dl = np.concatenate([o[2] for o in old] + [dl])
            for s in merge:
                segs[s] = (rows[:0], tf[:0], dl[:0])  # emptied unless a piece reuses the key
                changed.add(s)
        for start in range(0, len(rows), SEGMENT_MAX):
            end = start + SEGMENT_MAX
            seg = merge[0] if merge and start == 0 else int(rows[start])
            segs[seg] = (rows[start:end], tf[start:end], dl[start:end])
            changed.add(seg)
    for seg in changed:
        rows, tf, dl = segs[seg]
        if len(rows):
            inserts.append((term, seg, len(rows), encode(seg, rows, tf, dl)))
        else:
            deletes.append((term, seg))


def _decode_term(
    segments: Sequence[tuple[int, bytes]] | TermSegments, arena: Arena = FRESH
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(rowids, tf, lengths)`` of one term's segments (in ``seg`` order), decoded at once
    into memory taken from ``arena`` (``TermSegments.decode``)."""
    packed = segments if isinstance(segments, TermSegments) else TermSegments(segments)
    return packed.decode(arena)


class TermSegments:
    """One term's stored segments (over the sources read), joined in one buffer: what a
    read keeps in ``SEGMENTS``, and what ``SegmentPostings`` looks chunks up in.

    ``starts`` are the segments' keys (in the order read: ascending for one source),
    ``counts`` their postings, ``base`` where each one's bytes start in ``blob`` and
    ``widths`` its three byte widths (offsets, tf, lengths), one row a segment. A lookup
    then reads the few stored values it wants straight from ``blob`` at computed
    addresses, for every segment at once, instead of a dozen array calls per segment.
    """

    __slots__ = (
        "_layout", "_offsets", "_rows", "_skips", "base", "blob", "counts", "nbytes", "starts",
        "widths",
    )

    def __init__(self, segments: Sequence[tuple[int, bytes]]) -> None:
        # Four zero bytes after the last segment: a read of up to four bytes at any
        # posting's address stays inside the buffer.
        self.blob = b"".join([*(d for _, d in segments), bytes(4)])
        starts, counts, bases, widths = [], [], [], []
        at = 0
        for seg, data in segments:  # a few segments a term: plain Python beats arrays
            w = (data[0], data[1], data[2])
            starts.append(seg)
            counts.append((len(data) - 3) // (w[0] + w[1] + w[2]))
            bases.append(at)
            widths.append(w)
            at += len(data)
        self.starts = np.array(starts, dtype=np.int64)
        self.counts = np.array(counts, dtype=np.int64)
        self.base = np.array(bases, dtype=np.int64)
        self.widths = np.array(widths, dtype=np.int64).reshape(-1, 3)
        self._rows = list(zip(starts, counts, bases, widths, strict=True))
        #: What the cache charges for it: the buffer, about 400 bytes a segment for its
        #: entries in the arrays and lists here (measured with ``sys.getsizeof``), and the
        #: skip list's three int64 arrays once made (``skips``).
        skips = sum(-(-n // SKIP) for n in counts)
        self.nbytes = len(self.blob) + 400 * len(segments) + 24 * skips + 512
        self._skips: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._offsets: list[np.ndarray | None] = [None] * len(segments)
        #: Where each segment's three columns start, and each column's width when every
        #: segment has the same (0 otherwise): made by the first ``read``.
        self._layout: tuple[tuple[np.ndarray, ...], tuple[int, ...]] | None = None

    def __len__(self) -> int:
        return len(self.starts)

    def data(self, i: int) -> memoryview:
        """Segment ``i``'s bytes as stored (a view of ``blob``)."""
        start = int(self.base[i])
        size = 3 + int(self.counts[i]) * int(self.widths[i].sum())
        return memoryview(self.blob)[start : start + size]

    def _runs(self) -> list[tuple[int, int]]:
        """``(first, end)`` of each run of consecutive segments with the same count and
        widths (so the same size): a run's columns are 2-D views of ``blob`` with a fixed
        stride. A frequent term's full segments are one or a few runs."""
        runs: list[tuple[int, int]] = []
        rows = self._rows
        for i, (_, n, _, w) in enumerate(rows):
            if n == 0:
                continue
            if runs and runs[-1][1] == i and rows[i - 1][1] == n and rows[i - 1][3] == w:
                runs[-1] = (runs[-1][0], i + 1)
            else:
                runs.append((i, i + 1))
        return runs

    def decode(self, arena: Arena = FRESH) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(rowids, tf, lengths)`` of every posting (int64, int32, int32), in segment
        order, in memory taken from ``arena``.

        Each run of same-sized segments is three strided views of the buffer, and each
        output column one ufunc pass over them: the rowids are the stored offsets plus
        their segment's key, added as they are cast (a frequent term's 300-odd segments
        take a few calls, and no per-posting temporary is made).
        """
        total = int(self.counts.sum())
        if not total:
            return EMPTY.rowids, EMPTY.tf, EMPTY.doc_len
        rows = arena.take(total, np.int64)
        tf = arena.take(total, np.int32)
        dl = arena.take(total, np.int32)
        at = 0
        for first, end in self._runs():
            _, n, base, (wg, wt, wl) = self._rows[first]
            shape, stride = (end - first, n), 3 + n * (wg + wt + wl)
            out = slice(at, at + shape[0] * n)
            gaps, tfs, dls = (
                np.ndarray(shape, _UINT[w], self.blob, base + 3 + skip, (stride, w))
                for skip, w in ((0, wg), (n * wg, wt), (n * (wg + wt), wl))
            )
            np.add(gaps, self.starts[first:end, None], out=rows[out].reshape(shape))
            np.copyto(tf[out].reshape(shape), tfs, casting="unsafe")
            np.copyto(dl[out].reshape(shape), dls, casting="unsafe")
            at = out.stop
        return rows, tf, dl

    def offsets(self, i: int) -> np.ndarray:
        """Segment ``i``'s stored rowid offsets (a view of ``blob``, made once)."""
        got = self._offsets[i]
        if got is None:
            _, n, base, (wg, _, _) = self._rows[i]
            got = self._offsets[i] = np.frombuffer(self.blob, _UINT[wg], n, base + 3)
        return got

    def skips(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every ``SKIP``-th posting of each segment: its rowid (ascending over the term's
        segments of one source), segment and position, made once."""
        if self._skips is None:
            per = -(-self.counts // SKIP)
            at = np.repeat(np.arange(len(per)), per)
            pos = (np.arange(len(at)) - np.repeat(np.cumsum(per) - per, per)) * SKIP
            self._skips = (self.starts[at] + self.read(at, pos, 0), at, pos)
        return self._skips

    def find(
        self, rowids: np.ndarray, by_skips: bool | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(found, segment, position)`` of each of ``rowids`` (ascending; one source's
        segments): where it is stored, if it is.

        Few chunks scattered over many segments are found through the skip list: one
        binary search over it puts each in a block of ``SKIP`` postings, then a binary
        search in every block at once reads the stored offsets from ``blob``. Many chunks
        are found segment by segment, a binary search over each touched segment's offsets.
        ``by_skips`` chooses the way (by default, the one estimated cheaper).
        """
        if not len(self.starts) or not len(rowids):
            none = np.zeros(len(rowids), dtype=np.int64)
            return none.astype(bool), none, none
        at = np.searchsorted(self.starts, rowids, "right") - 1
        np.maximum(at, 0, out=at)  # before the first segment: looked up there, not found
        touched = np.flatnonzero(np.diff(at, prepend=-1))  # where each segment's chunks begin
        if by_skips is None:
            by_skips = len(rowids) + SKIP_FIXED < len(touched) * SKIP_SEGMENT
        if by_skips:
            return self._find_by_skips(rowids)
        want = rowids - self.starts[at]  # offsets within their segments
        pos = np.empty(len(rowids), dtype=np.int64)
        starts = touched.tolist()
        segs = at[starts].tolist()
        starts.append(len(rowids))
        # The wanted offsets in each stored width: a binary search over offsets of another
        # dtype would convert all of the segment's first. Clipped into the width, a value
        # may land on a stored one it is not: presence is checked on the exact value below.
        widths = self.widths[segs, 0].tolist()
        by_width = {w: np.clip(want, 0, (1 << (8 * w)) - 1).astype(_UINT[w]) for w in set(widths)}
        for i, w, lo, hi in zip(segs, widths, starts, starts[1:], strict=False):
            pos[lo:hi] = self.offsets(i).searchsorted(by_width[w][lo:hi])
        n = self.counts[at]
        np.minimum(pos, n - 1, out=pos)
        np.maximum(pos, 0, out=pos)
        return (self.read(at, pos, 0) == want) & (n > 0), at, pos

    def _find_by_skips(self, rowids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        keys, segs, starts = self.skips()
        j = np.searchsorted(keys, rowids, "right") - 1
        # Before the first posting: looked up in the first block, not found there.
        np.maximum(j, 0, out=j)
        at, lo = segs[j], starts[j]
        n = self.counts[at]
        hi = np.minimum(lo + SKIP, n)
        want = rowids - self.starts[at]
        for _ in range(SKIP.bit_length()):  # lower bound of ``want`` in [lo, hi)
            mid = (lo + hi) >> 1
            less = self.read(at, np.minimum(mid, n - 1), 0) < want
            open_ = lo < hi
            lo = np.where(open_ & less, mid + 1, lo)
            hi = np.where(open_ & ~less, mid, hi)
        pos = np.minimum(lo, n - 1)
        return self.read(at, pos, 0) == want, at, pos

    def read(self, at: np.ndarray, pos: np.ndarray, column: int) -> np.ndarray:
        """The stored values (int64) of ``column`` (0 offsets, 1 tf, 2 lengths) at
        posting ``pos`` of segment ``at``, element by element."""
        if self._layout is None:
            w, n = self.widths, self.counts
            first = self.base + 3
            self._layout = (
                (first, first + n * w[:, 0], first + n * (w[:, 0] + w[:, 1])),
                # A column's width when every segment has the same (the usual case), or 0.
                tuple(int(w[0, c]) if len(w) and bool((w[:, c] == w[0, c]).all()) else 0
                      for c in range(3)),
            )
        starts, uniform = self._layout
        buf = np.frombuffer(self.blob, np.uint8)
        fixed = uniform[column]
        if fixed:
            addr = starts[column][at] + pos * fixed
            out: np.ndarray = buf[addr].astype(np.int64)
            for k in range(1, fixed):  # little-endian
                out |= buf[addr + k].astype(np.int64) << (8 * k)
            return out
        width = self.widths[at, column]
        addr = starts[column][at] + pos * width
        out = buf[addr].astype(np.int64)
        for k in (1, 2, 3):  # byte k counts where the width has it
            wide = width > k
            if wide.all():
                out |= buf[addr + k].astype(np.int64) << (8 * k)
            elif wide.any():
                out[wide] |= buf[addr[wide] + k].astype(np.int64) << (8 * k)
            else:
                break
        return out


class SegmentPostings:
    """One term's live postings in one source, as its stored segments, decoded on demand.

    ``len`` (the live document frequency) reads only the segments' headers, and the
    stored offsets where tombstoned chunks would be; ``lookup`` reads only the wanted chunks'
    stored values; the arrays decode every segment once. What the MaxScore path of
    ``memmw.search.keyword`` needs to skip a frequent term's postings.
    """

    def __init__(self, packed: TermSegments, dead: np.ndarray, arena: Arena) -> None:
        self._packed = packed
        self._dead = dead
        self._arena = arena
        self._full: Postings | None = None
        n = int(packed.counts.sum())
        if len(dead) and len(packed):
            # The tombstoned chunks this term has postings of, found in the stored offsets
            # (nothing decoded: syncs delete chunks all over, and a frequent term that
            # MaxScore skips is never decoded). A rowid tombstoned twice counts once.
            found = packed.find(dead)[0]
            found[1:] &= dead[1:] != dead[:-1]
            n -= int(np.count_nonzero(found))
        self._len = n

    def __len__(self) -> int:
        return self._len

    def _decode_all(self) -> Postings:
        if self._full is None:
            p = _live(*_decode_term(self._packed, self._arena), self._dead, self._arena)
            self._full = p if p is not None else EMPTY
        return self._full

    @property
    def rowids(self) -> np.ndarray:
        return self._decode_all().rowids

    @property
    def tf(self) -> np.ndarray:
        return self._decode_all().tf

    @property
    def doc_len(self) -> np.ndarray:
        return self._decode_all().doc_len

    @property
    def last(self) -> int:
        """The last stored rowid (a tombstoned chunk's, maybe: a bound, not a posting)."""
        packed = self._packed
        if not len(packed):
            return -1
        i = len(packed) - 1
        n = int(packed.counts[i])
        return int(packed.starts[i]) + int(packed.offsets(i)[-1]) if n else int(packed.starts[i])

    def lookup(self, rowids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(present, tf, doc_len)`` at each of ``rowids`` (ascending); 0 where absent.

        Each wanted chunk is found in the stored offsets (``TermSegments.find``), and its
        stored tf and length read from the joined buffer for all chunks at once: nothing
        is decoded.
        """
        if self._full is not None:
            return self._full.lookup(rowids)
        packed = self._packed
        if not len(rowids) or not len(packed):
            zero = np.zeros(len(rowids), dtype=np.int32)
            return np.zeros(len(rowids), dtype=bool), zero, zero
        has, at, pos = packed.find(rowids)
        if len(self._dead):
            has &= ~find_sorted(self._dead, rowids)[0]
        tf = np.where(has, packed.read(at, pos, 1), 0).astype(np.int32)
        dl = np.where(has, packed.read(at, pos, 2), 0).astype(np.int32)
        return has, tf, dl


def _live(
    rows: np.ndarray, tf: np.ndarray, dl: np.ndarray, dead: np.ndarray, arena: Arena
) -> Postings | None:
    """The postings without tombstoned chunks (None when none is left)."""
    if len(dead) and len(rows):
        # Skip deleted chunks not yet purged (a few thousand at most): look each up.
        found, at = find_sorted(rows, dead)
        gone = at[found]
        if len(gone):
            keep = np.ones(len(rows), dtype=bool)
            keep[gone] = False
            n = int(np.count_nonzero(keep))
            rows, tf, dl = (
                np.compress(keep, a, out=arena.take(n, a.dtype)) for a in (rows, tf, dl)
            )
    return Postings(rows, tf, dl) if len(rows) else None


def read_postings(
    table: SegmentTable,
    term_hashes: Sequence[int],
    sources: Sequence[str],
    arena: Arena = FRESH,
    version: str | None = None,
) -> dict[int, TermPostings]:
    """Live postings of each term over ``sources`` (terms with none are absent), in
    memory taken from ``arena``: decoded on demand (``SegmentPostings``) for one source,
    merged at once for several (their segments interleave).

    ``version``: the postings version the table is read at (``memmw.store.cache``): the
    segments of a term read before at that version come from the process's cache
    (``SEGMENTS``), the others are read and kept there. The tombstones are read every time.
    """
    wanted = list(dict.fromkeys(int(h) for h in term_hashes))
    if not wanted or not sources:
        return {}
    if version is not None:
        return _cached_postings(table, wanted, sources, version, arena)
    return _live_postings(_term_segments(table, sources, wanted), sources, table, arena)


def _term_segments(
    table: SegmentTable, sources: Sequence[str], terms: list[int]
) -> dict[int, TermSegments]:
    """Each of ``terms``'s stored segments over ``sources``, joined (none for a term with
    none)."""
    out: dict[int, list[tuple[int, bytes]]] = {t: [] for t in terms}
    for term, seg, data in table.segments(sources, terms):
        out[int(term)].append((int(seg), data))
    return {t: TermSegments(segs) for t, segs in out.items()}


def _dead_rowids(table: SegmentTable, sources: Sequence[str]) -> np.ndarray:
    held = table.dead_rowids(sources)
    return np.sort(
        held.astype(np.int64) if isinstance(held, np.ndarray) else np.fromiter(held, np.int64)
    )


def _cached_postings(
    table: SegmentTable, terms: list[int], sources: Sequence[str], version: str, arena: Arena
) -> dict[int, TermPostings]:
    """``read_postings`` with each term's segments through ``SEGMENTS`` at ``version``."""
    keys = {t: (version, tuple(sources), t) for t in terms}
    held = {t: SEGMENTS.get(keys[t]) for t in terms}
    missing = [t for t, v in held.items() if v is None]
    for t, segs in (_term_segments(table, sources, missing) if missing else {}).items():
        # An absent term is kept too (as no segments): its arrays' own bytes count.
        SEGMENTS.put(keys[t], segs, segs.nbytes)
        held[t] = segs
    return _live_postings({t: v for t, v in held.items() if v is not None}, sources, table, arena)


def _live_postings(
    segments: dict[int, TermSegments],
    sources: Sequence[str],
    table: SegmentTable,
    arena: Arena,
) -> dict[int, TermPostings]:
    """Each term's live postings from its stored segments (terms with none, or none left,
    are absent): decoded on demand for one source, merged at once for several."""
    dead = _dead_rowids(table, sources)
    out: dict[int, TermPostings] = {}
    for term, segs in segments.items():
        if not segs:
            continue
        if len(sources) == 1:
            lazy = SegmentPostings(segs, dead, arena)
            if len(lazy):
                out[term] = lazy
            continue
        rows, tf, dl = _decode_term(segs, arena)
        # Segments of several sources interleave: one stable sort by rowid.
        order = np.argsort(rows, kind="stable")
        rows, tf, dl = (np.take(a, order, out=arena.take(len(a), a.dtype)) for a in (rows, tf, dl))
        live = _live(rows, tf, dl, dead, arena)
        if live is not None:
            out[term] = live
    return out
