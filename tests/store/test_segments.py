"""A bulk ``PostingsBuffer`` (a full rebuild): whatever the chunks and the flushes, the
stored postings are the chunks' and every term's segments are full but its last."""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Iterator
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memmw.store import segments
from memmw.store.segments import PostingsBuffer, decode
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
    terms that have one before their last again, from it on, and nothing else."""
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
        assert list(table.underfilled("memory", 3)) == [1]
        assert segments.compact(table, "memory") == 11  # term 1's postings, once
        after, layout = stored(conn)
        assert_filled(layout)
        assert list(table.underfilled("memory", 3)) == []
    assert after == before
    assert [n for _, n in layout[("memory", 1)]] == [3, 3, 3, 2]
