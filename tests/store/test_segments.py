"""A bulk ``PostingsBuffer`` (a full rebuild): whatever the chunks and the flushes, the
stored postings are the chunks' and every term's segments are full but its last. A term's
segments read back (``TermSegments``, ``SegmentPostings``) answer as the decoded postings."""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Iterator
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from memmw.store import segments
from memmw.store.arena import FRESH
from memmw.store.protocol import lookup_sorted
from memmw.store.segments import PostingsBuffer, SegmentPostings, TermSegments, decode, encode
from memmw.store.sqlite.postings import SqliteSegments
from memmw.store.sqlite.schema import migrate

#: ``{(source, term): [(rowid, tf, length), ...]}`` in rowid order.
Stored = dict[tuple[str, int], list[tuple[int, int, int]]]


def stored(conn: sqlite3.Connection) -> tuple[Stored, dict[tuple[str, int], list[tuple[int, int]]]]:
    """The postings as stored, and each term's segments as ``(seg, n)``, checking the layout."""
    out: Stored = {}
    layout: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for source, term, seg, n, data in conn.execute(
        "SELECT source, term, seg, n, data FROM postings ORDER BY source, term, seg"
    ):
        rows, tf, dl = decode(seg, data)
        assert 0 < len(rows) == n <= segments.SEGMENT_MAX
        assert rows[0] >= seg
        assert int(rows[-1]) - seg < 2**32
        assert bool(np.all(np.diff(rows) > 0))
        entries = out.setdefault((source, term), [])
        assert not entries or entries[-1][0] < seg  # disjoint, ascending rowid ranges
        entries += zip(rows.tolist(), tf.tolist(), dl.tolist(), strict=True)
        layout.setdefault((source, term), []).append((seg, n))
    return out, layout


def assert_filled(layout: dict[tuple[str, int], list[tuple[int, int]]]) -> None:
    """Every segment of a term but its last is full (or ends where the next rowid is 2**32
    or more past its key: offsets from a key are 32-bit)."""
    for key, segs in layout.items():
        for (seg, n), (after, _) in itertools.pairwise(segs):
            assert n == segments.SEGMENT_MAX or after - seg >= 2**32, (key, segs)


@pytest.fixture
def conn() -> Iterator[sqlite3.Connection]:
    db = sqlite3.connect(":memory:", isolation_level=None)
    migrate(db, "unicode61")
    yield db
    db.close()


chunk = st.tuples(
    st.sampled_from(["memory", "sessions"]),
    st.integers(1, 2**33).filter(lambda g: g < 64 or g > 2**31),  # rowid gap: mostly small
    st.dictionaries(st.sampled_from([-(2**63), -7, 0, 1, 2, 3, 2**63 - 1]),
                    st.integers(1, 70000), min_size=1, max_size=5),
    st.sampled_from(["", "", "", "carry", "carry", "read"]),  # what follows the chunk
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow,
          HealthCheck.function_scoped_fixture])
@given(
    chunks=st.lists(chunk, min_size=1, max_size=60),
    segment_max=st.sampled_from([1, 2, 3, 5]),
    carry_max=st.sampled_from([0, 1, 3, 8, 1000]),
    big_gaps=st.booleans(),
)
# A term with a full segment and a short one in one flush, written again.
@example(chunks=[("memory", 0, {1: 1}, ""), ("memory", 0, {1: 1}, ""),
                 ("memory", 0, {1: 1}, "read"), ("memory", 0, {1: 1}, "")],
         segment_max=2, carry_max=0, big_gaps=False)
# A term compacted without a write in that flush (its new last segment is short),
# written again.
@example(chunks=[("memory", 0, {1: 1}, "carry"), ("memory", 0, {1: 1}, ""),
                 ("memory", 0, {1: 1}, "carry"), ("memory", 0, {2: 1}, "read"),
                 ("memory", 0, {1: 1}, "")],
         segment_max=2, carry_max=0, big_gaps=False)
def test_a_bulk_buffer_stores_the_chunks_postings_in_full_segments(
    conn: sqlite3.Connection,
    chunks: list[tuple[str, int, dict[int, int], str]],
    segment_max: int,
    carry_max: int,
    big_gaps: bool,
) -> None:
    conn.execute("DELETE FROM postings")
    conn.execute("DELETE FROM keyword_stats")
    table = SqliteSegments(conn)
    buffer = PostingsBuffer(bulk=True)
    want: Stored = {}
    rowid = 0
    with mock.patch.multiple(segments, SEGMENT_MAX=segment_max, CARRY_MAX=carry_max):
        for source, gap, terms, then in chunks:
            rowid += gap if big_gaps else 1 + gap % 50
            hashes = np.fromiter(terms, dtype=np.int64)
            tf = np.fromiter(terms.values(), dtype=np.int64).clip(1, 65535).astype(np.uint16)
            length = int(tf.sum()) % 2**32
            buffer.add(source, rowid, hashes, tf, length)
            for h, f in zip(hashes.tolist(), tf.tolist(), strict=True):
                want.setdefault((source, h), []).append((rowid, f, length))
            if then == "carry":  # past FLUSH_AT: full segments only, the rest held back
                buffer.flush(table, carry=True)
            elif then == "read":  # a read in the rebuild: everything written
                buffer.flush(table)
        buffer.flush(table)
        assert not buffer.pending
        got, layout = stored(conn)
        assert got == want
        assert_filled(layout)
    stats = dict(conn.execute("SELECT source, chunks FROM keyword_stats"))
    for source in {c[0] for c in chunks}:
        assert stats[source] == sum(1 for c in chunks if c[0] == source)


def test_the_postings_held_back_count_toward_the_buffer_size(conn: sqlite3.Connection) -> None:
    """What a flush holds back stays bounded by ``CARRY_MAX`` and is counted in ``size``
    (so ``FLUSH_AT`` still bounds the buffer's memory)."""
    table = SqliteSegments(conn)
    buffer = PostingsBuffer(bulk=True)
    with mock.patch.multiple(segments, SEGMENT_MAX=4, CARRY_MAX=6):
        for rowid in range(1, 40):
            terms = np.asarray([rowid % 5, 100 + rowid % 3], dtype=np.int64)
            buffer.add("memory", rowid, terms, np.ones(2, dtype=np.uint16), 2)
            if rowid % 7 == 0:
                buffer.flush(table, carry=True)
                assert buffer.size <= 6
                assert buffer.pending or not buffer.size
        buffer.flush(table)
        got, layout = stored(conn)
        assert_filled(layout)
    assert sum(len(v) for v in got.values()) == 2 * 39


def test_compact_rewrites_only_terms_with_a_short_segment_before_their_last(
    conn: sqlite3.Connection,
) -> None:
    """Incremental appends (no merging here) leave short segments; ``compact`` cuts the
    candidate terms that have one before their last again, from it on, and nothing else."""
    table = SqliteSegments(conn)
    with mock.patch.multiple(segments, SEGMENT_MAX=3, TAIL_MAX=0, TAIL_SEGMENTS=100):
        for rowid in range(1, 12):
            buffer = PostingsBuffer()
            # Term 1: one posting a flush; term 2: three a flush (full segments).
            for r in (rowid * 3, rowid * 3 + 1, rowid * 3 + 2):
                hashes = [1, 2] if r == rowid * 3 else [2]
                buffer.add("memory", r, np.asarray(hashes, dtype=np.int64),
                           np.ones(len(hashes), dtype=np.uint16), 1)
            buffer.flush(table)
        before, layout = stored(conn)
        assert [n for _, n in layout[("memory", 1)]] == [1] * 11
        term_2 = layout[("memory", 2)]
        # Both are candidates, and a term nothing holds: term 1's postings, once.
        assert segments.compact(table, "memory", np.asarray([1, 2, 3])) == 11
        after, layout = stored(conn)
        assert_filled(layout)
        assert segments.compact(table, "memory", np.asarray([1, 2, 3])) == 0
    assert after == before
    assert [n for _, n in layout[("memory", 1)]] == [3, 3, 3, 2]
    assert layout[("memory", 2)] == term_2


# -- reading a term's segments back ------------------------------------------------------


@st.composite
def term_segments(draw: st.DrawFn) -> tuple[list[tuple[int, bytes]], np.ndarray, np.ndarray,
                                             np.ndarray]:
    """One term's stored segments: ascending rowids (gaps up to past 2**32, so offsets of
    every width), tf and lengths of every width, cut into segments of any size, or into
    runs of segments of one size (which decode as one strided block when their widths
    agree: each column's values come from a small palette, so they often do)."""
    n = draw(st.integers(0, 60))

    def column(values: list[int]) -> list[int]:
        palette = draw(st.lists(st.sampled_from(values), min_size=1, max_size=3))
        return draw(st.lists(st.sampled_from(palette), min_size=n, max_size=n))

    gaps = column([1, 1, 2, 7, 300, 70_000, 2**31])
    rows = np.cumsum(np.asarray([draw(st.integers(0, 5)), *gaps], dtype=np.int64))[1:]
    tf = np.asarray(column([1, 2, 255, 256, 70_000]), dtype=np.int64)
    dl = np.asarray(column([1, 40, 255, 300, 2**17]), dtype=np.int64)
    if n > 1 and draw(st.booleans()):
        cuts = list(range(draw(st.integers(1, n - 1)), n, draw(st.integers(1, n - 1))))
    else:
        cuts = sorted(draw(st.sets(st.integers(1, max(n - 1, 1)), max_size=8))) if n > 1 else []
    segs: list[tuple[int, bytes]] = []
    last = -1
    for lo, hi in itertools.pairwise([0, *cuts, n]):
        if hi - lo and int(rows[hi - 1]) - int(rows[lo]) < 2**32:
            # A segment's key is at most its first rowid, past the segment before.
            seg = max(int(rows[lo]) - draw(st.sampled_from([0, 0, 1])), last + 1)
            segs.append((seg, encode(seg, rows[lo:hi], tf[lo:hi], dl[lo:hi])))
            last = int(rows[hi - 1])
    kept = np.concatenate([decode(seg, data)[0] for seg, data in segs]) if segs else rows[:0]
    keep = np.isin(rows, kept)
    return segs, rows[keep], tf[keep], dl[keep]


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(stored_term=term_segments(), data=st.data())
def test_a_terms_segments_read_back_answer_as_its_decoded_postings(
    stored_term: tuple[list[tuple[int, bytes]], np.ndarray, np.ndarray, np.ndarray],
    data: st.DataObject,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Whatever the widths, gaps, cuts and tombstones: ``len``, ``last``, the arrays and a
    lookup of any ascending rowids (before, between, inside and past the segments) are
    those of the live postings decoded one by one."""
    segs, rows, tf, dl = stored_term
    # Tombstones of this term's chunks and of others' (before, between and past its
    # rowids), some of them twice.
    mine = data.draw(st.lists(st.sampled_from(rows.tolist())) if len(rows) else st.just([]))
    others = data.draw(st.lists(st.integers(-3, 2**33).filter(lambda r: r not in set(rows.tolist()))))
    dead = np.asarray(sorted(mine + others), dtype=np.int64)
    live = ~np.isin(rows, dead)
    monkeypatch.setattr(segments, "SKIP", data.draw(st.sampled_from([1, 2, 3, 5, 128])))
    packed = TermSegments(segs)
    assert packed.starts.tolist() == [seg for seg, _ in segs]
    assert [bytes(packed.data(i)) for i in range(len(packed))] == [d for _, d in segs]
    post = SegmentPostings(packed, dead, FRESH)
    assert len(post) == int(live.sum())
    assert post.last == (int(rows[-1]) if len(rows) else -1)
    probes = sorted({*rows.tolist(), *(r + d for r in rows.tolist() for d in (-1, 1)),
                     *data.draw(st.lists(st.integers(-3, 2**33), max_size=10))})
    wanted = np.asarray(sorted(data.draw(st.sets(st.sampled_from(probes)) if probes else
                                         st.just(set()))), dtype=np.int64)
    expect = lookup_sorted(rows[live], tf[live], dl[live], wanted)
    got = post.lookup(wanted)
    for g, e in zip(got, expect, strict=True):
        assert g.tolist() == e.tolist()
    # Both ways of finding chunks, whichever the cost estimate picks; skip lists of
    # every block size, so blocks end inside segments and at their ends.
    every = lookup_sorted(rows, tf, dl, wanted)
    for by_skips in (False, True):
        found, at, pos = packed.find(wanted, by_skips)
        assert found.tolist() == every[0].tolist()
        assert packed.read(at[found], pos[found], 1).tolist() == every[1][found].tolist()
        assert packed.read(at[found], pos[found], 2).tolist() == every[2][found].tolist()
    assert post.rowids.tolist() == rows[live].tolist()
    assert post.tf.tolist() == tf[live].tolist()
    assert post.doc_len.tolist() == dl[live].tolist()
    # Once decoded, lookups answer from the arrays, the same.
    for g, e in zip(post.lookup(wanted), expect, strict=True):
        assert g.tolist() == e.tolist()
