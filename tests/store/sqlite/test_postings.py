"""Persisted keyword postings: incremental upkeep equals a clean rebuild, whatever the history."""

from __future__ import annotations

import contextlib
import sqlite3
import tempfile
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memmw import Memory, MemoryConfig
from memmw.search import keyword
from memmw.search.keyword import bm25_exhaustive, bm25_search
from memmw.store import segments as postings_mod
from memmw.store.arena import Arena
from memmw.store.cache import VERSION_KEY, RowCache
from memmw.store.protocol import EMPTY_POSTINGS as EMPTY
from memmw.store.protocol import Postings
from memmw.store.segments import PostingsBuffer, decode, encode
from memmw.store.sqlite.db import connect, snapshot, transaction
from memmw.store.sqlite.postings import SqliteSegments
from memmw.store.sqlite.schema import migrate
from memmw.store.sqlite.store import IndexStore
from memmw.store.terms import term_counts, term_hash
from memmw.text.chunking import chunk_text

from ...conftest import make_memory

WORDS = "alpha beta gamma delta tea coffee gateway port zeppelin hangar basil 猫 ミケ".split()

#: ``{term: [(path, start_line, end_line, tf, doc_len), ...]}`` sorted: postings by place.
Logical = dict[int, list[tuple[str, int, int, int, int]]]


def open_store(path: Path, *, bulk: bool = False) -> IndexStore:
    conn = connect(path)
    migrate(conn, "unicode61")
    store = IndexStore(conn, fts=False)
    if bulk:
        store.postings_buffer = PostingsBuffer(bulk=True)
    return store


def write(store: IndexStore, path: str, text: str, source: str = "memory") -> None:
    store.replace_file(
        path=path, source=source, file_hash=str(hash(text)), mtime=0.0, size=len(text),
        decay_ts=None, chunks=chunk_text(text, tokens=12, overlap=3), model="fts-only",
    )


def logical(conn: sqlite3.Connection) -> tuple[Logical, list[tuple[str, int, int]]]:
    """The postings by chunk place (rowids differ between histories), checking the layout."""
    place = {
        r: (p, s, e)
        for r, p, s, e in conn.execute("SELECT rowid, path, start_line, end_line FROM chunks")
    }
    # Tombstones name deleted chunks only, whose postings reads skip (effective content).
    dead = {r for (r,) in conn.execute("SELECT chunk_rowid FROM postings_dead")}
    assert not dead & place.keys()
    assert len(dead) <= postings_mod.DEAD_MAX
    out: Logical = {}
    previous: dict[tuple[str, int], int] = {}  # last rowid of a term's previous segment
    for source, term, seg, n, data in conn.execute(
        "SELECT source, term, seg, n, data FROM postings ORDER BY source, term, seg"
    ):
        rows, tfs, dls = decode(seg, data)
        assert 0 < len(rows) == n <= postings_mod.SEGMENT_MAX
        # Segments of a term hold ascending, disjoint rowid ranges starting at their key.
        assert rows[0] >= seg > previous.get((source, term), -1)
        assert bool(np.all(np.diff(rows) > 0))
        previous[(source, term)] = int(rows[-1])
        for r, tf, dl in zip(rows.tolist(), tfs.tolist(), dls.tolist(), strict=True):
            if r not in dead:
                out.setdefault(term, []).append((*place[r], tf, dl))
    for entries in out.values():
        entries.sort()
    # Every chunk has its term hashes, and nothing else has (they cascade with it).
    assert conn.execute(
        "SELECT COUNT(*) FROM chunk_terms t LEFT JOIN chunks c ON c.rowid=t.chunk_rowid"
        " WHERE c.rowid IS NULL"
    ).fetchone() == (0,)
    assert conn.execute("SELECT COUNT(*) FROM chunk_terms").fetchone() == (len(place),)
    stats = conn.execute("SELECT source, chunks, terms FROM keyword_stats ORDER BY source").fetchall()
    return out, [s for s in stats if s[1] or s[2]]


def expected(files: dict[str, str]) -> Logical:
    """Postings computed straight from the chunker and the term counter."""
    out: Logical = {}
    for path, text in files.items():
        for chunk in chunk_text(text, tokens=12, overlap=3):
            hashes, tf, n = term_counts(chunk.text)
            for h, f in zip(hashes.tolist(), tf.tolist(), strict=True):
                out.setdefault(h, []).append((path, chunk.start_line, chunk.end_line, f, n))
    for entries in out.values():
        entries.sort()
    return out


texts = st.lists(
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join), min_size=1, max_size=8
).map("\n".join)
ops = st.lists(
    st.tuples(st.sampled_from(["a.md", "b.md", "c.md", "d.md"]), st.none() | texts,
              st.booleans()),
    min_size=1,
    max_size=25,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=ops,
    segment_max=st.sampled_from([1, 2, 3, 4096]),
    tail_max=st.sampled_from([0, 1, 3, 256]),
    tail_segments=st.sampled_from([0, 1, 2, 8]),
    dead_max=st.sampled_from([0, 1, 5, 2048]),
)
def test_incremental_postings_equal_a_clean_rebuild(
    ops: list[tuple[str, str | None, bool]],
    segment_max: int,
    tail_max: int,
    tail_segments: int,
    dead_max: int,
) -> None:
    with tempfile.TemporaryDirectory() as tmp, mock.patch.multiple(
        postings_mod,
        SEGMENT_MAX=segment_max,
        TAIL_MAX=tail_max,
        TAIL_SEGMENTS=tail_segments,
        DEAD_MAX=dead_max,
    ):
        live = open_store(Path(tmp) / "live.sqlite")
        files: dict[str, str] = {}
        conn = live.conn
        conn.execute("BEGIN IMMEDIATE")
        for path, text, commit in ops:
            if text is None:
                live.delete_file(path, "memory")
                files.pop(path, None)
            else:
                write(live, path, text)
                files[path] = text
            if commit:  # a sync ends: flush and commit, the next one starts
                live.flush_postings()
                conn.execute("COMMIT")
                conn.execute("BEGIN IMMEDIATE")
        live.flush_postings()
        conn.execute("COMMIT")

        clean = open_store(Path(tmp) / "clean.sqlite", bulk=True)
        with transaction(clean.conn):
            for path, text in sorted(files.items()):
                write(clean, path, text)
                clean.flush_postings()  # one bulk flush per file: many small segments
        got, got_stats = logical(live.conn)
        want, want_stats = logical(clean.conn)
        assert got == want == expected(files)
        assert got_stats == want_stats
        n = sum(len(chunk_text(t, tokens=12, overlap=3)) for t in files.values())
        assert live.keyword_stats(["memory"])[0] == n
        live.conn.close()
        clean.conn.close()


def segment_fill(conn: sqlite3.Connection) -> dict[tuple[str, int], list[int]]:
    """Each term's segment sizes, in rowid order."""
    out: dict[tuple[str, int], list[int]] = {}
    for source, term, n in conn.execute("SELECT source, term, n FROM postings ORDER BY 1, 2, seg"):
        out.setdefault((source, term), []).append(n)
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    files=st.dictionaries(st.sampled_from(["a.md", "b.md", "c.md", "d.md", "e.md"]), texts,
                          min_size=1),
    segment_max=st.sampled_from([1, 2, 3, 4]),
    flush_at=st.sampled_from([1, 4, 10, 40, 2_000_000]),
    carry_max=st.sampled_from([0, 2, 5, 1000]),
)
def test_a_staged_rebuild_leaves_every_term_in_full_segments_but_its_last(
    files: dict[str, str], segment_max: int, flush_at: int, carry_max: int
) -> None:
    """The rebuild's flushes past ``FLUSH_AT`` leave no short segment before a term's last,
    and the postings are the chunks' (issue 25: today each flush left one a term)."""
    from memmw.store.sqlite import store as store_mod
    from memmw.store.sqlite.sync import staged_rebuild

    with tempfile.TemporaryDirectory() as tmp, mock.patch.multiple(
        postings_mod, SEGMENT_MAX=segment_max, CARRY_MAX=min(carry_max, flush_at // 2)
    ), mock.patch.object(store_mod, "FLUSH_AT", flush_at):
        live = open_store(Path(tmp) / "live.sqlite")
        with transaction(live.conn):
            write(live, "old.md", "an old note about zebras")
        with (
            staged_rebuild(Path(tmp) / "live.sqlite", live, "unicode61") as staged,
            staged.transaction(),
        ):
            for path, text in sorted(files.items()):
                write(staged, path, text)
        got, _ = logical(live.conn)
        assert got == expected(files)
        for key, sizes in segment_fill(live.conn).items():
            assert all(n == segment_max for n in sizes[:-1]), (key, sizes)
        live.conn.close()


@given(
    st.lists(st.tuples(st.integers(0, 2**32 - 2), st.integers(1, 65535), st.integers(1, 2**32 - 1)),
             min_size=1, max_size=40, unique_by=lambda t: t[0]),
    st.integers(0, 2**40),
)
def test_segment_encoding_round_trips(
    entries: list[tuple[int, int, int]], seg: int
) -> None:
    entries.sort()
    rows = np.asarray([seg + r for r, _, _ in entries], dtype=np.int64)
    tf = np.asarray([t for _, t, _ in entries], dtype=np.uint16)
    dl = np.asarray([d for _, _, d in entries], dtype=np.uint32)
    got = decode(seg, encode(seg, rows, tf, dl))
    assert [a.tolist() for a in got] == [rows.tolist(), tf.tolist(), dl.tolist()]
    # Small values take one byte each: a dense, short-chunk segment is 3 bytes a posting.
    small = encode(seg, np.arange(seg, seg + 10, dtype=np.int64), tf[:1].repeat(10) % 200,
                   np.full(10, 100, dtype=np.uint32))
    assert len(small) == 3 + 10 * 3


segment_lists = st.lists(
    st.tuples(
        st.integers(0, 2**33),  # seg: segments of several sources may overlap or step back
        st.lists(
            # Chunk lengths read back as int32 (no chunk holds 2**31 terms).
            st.tuples(st.integers(0, 2**32 - 1), st.integers(1, 65535), st.integers(1, 2**31 - 1)),
            min_size=1, max_size=20, unique_by=lambda t: t[0],
        ),
    ),
    min_size=1,
    max_size=6,
)


@given(segment_lists, st.sampled_from([0, 100, 1 << 16]))
def test_a_terms_segments_decode_at_once_as_one_by_one(
    segments: list[tuple[int, list[tuple[int, int, int]]]], arena_bytes: int
) -> None:
    stored = []
    for seg, entries in segments:
        entries.sort()
        rows = np.asarray([seg + r for r, _, _ in entries], dtype=np.int64)
        tf = np.asarray([t for _, t, _ in entries], dtype=np.uint16)
        dl = np.asarray([d for _, _, d in entries], dtype=np.uint32)
        stored.append((seg, encode(seg, rows, tf, dl)))
    want = [np.concatenate(parts) for parts in zip(*(decode(s, d) for s, d in stored), strict=True)]
    arena = Arena(max_bytes=arena_bytes)
    for _ in range(2):  # the second decode reuses memory holding stale values
        arena.reset()
        arena.take(arena.capacity // 8, np.int64).fill(-1)
        arena.reset()
        got = postings_mod._decode_term(stored, arena)
        assert [a.tolist() for a in got] == [a.tolist() for a in want]
    assert [a.dtype for a in got] == [np.dtype(np.int64), np.dtype(np.int32), np.dtype(np.int32)]


def test_postings_read_back_per_term_and_source(tmp_path: Path) -> None:
    store = open_store(tmp_path / "x.sqlite")
    with transaction(store.conn):
        write(store, "a.md", "tea tea coffee")
        write(store, "s.md", "tea port", source="sessions")
    got = store.postings([term_hash("tea"), term_hash("zeppelin")], ["memory", "sessions"])
    assert list(got) == [term_hash("tea")]
    tea = got[term_hash("tea")]
    assert tea.tf.tolist() == [2.0, 1.0] and tea.doc_len.tolist() == [3.0, 2.0]
    assert tea.rowids.dtype == np.int64 and bool(np.all(np.diff(tea.rowids) > 0))
    only = store.postings([term_hash("tea")], ["sessions"])[term_hash("tea")]
    assert only.tf.tolist() == [1.0]
    assert store.keyword_stats(["memory", "sessions"]) == (2, 5.0)
    assert store.keyword_stats(["sessions"]) == (1, 2.0)
    assert store.keyword_stats([]) == (0, 0.0)
    assert store.postings([term_hash("tea")], []) == {}
    store.conn.close()


def test_a_writer_reads_its_own_unflushed_changes(tmp_path: Path) -> None:
    store = open_store(tmp_path / "x.sqlite")
    with transaction(store.conn):
        write(store, "a.md", "zeppelin hangar")
        assert store.postings_buffer.pending
        assert len(store.postings([term_hash("zeppelin")], ["memory"])[term_hash("zeppelin")]) == 1
        store.delete_file("a.md", "memory")
        assert store.postings([term_hash("zeppelin")], ["memory"]) == {}
        assert store.keyword_stats(["memory"]) == (0, 0.0)
    store.conn.close()


# -- through Memory: searches after any history equal a clean rebuild's ------------------

QUERIES = ["tea coffee", "gateway port", "zeppelin", "basil alpha", "猫", "delta gamma beta"]


def ranked(mem: Memory) -> list[list[tuple[str, int, int, float]]]:
    return [
        [(h.path, h.start_line, h.end_line, round(h.score, 9)) for h in mem.search(q)]
        for q in QUERIES
    ]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(
        st.lists(
            st.tuples(st.sampled_from(["a", "b", "c"]), st.none() | texts), min_size=1, max_size=4
        ),
        min_size=1,
        max_size=4,
    ),
    dead_max=st.sampled_from([0, 2, 2048]),
)
def test_search_after_any_history_equals_a_clean_rebuild(
    steps: list[list[tuple[str, str | None]]], dead_max: int
) -> None:
    # Tombstones left unpurged (or purged at once) must not change df, N or the ranking.
    with tempfile.TemporaryDirectory() as tmp, mock.patch.object(
        postings_mod, "DEAD_MAX", dead_max
    ):
        ws = Path(tmp) / "ws"
        (ws / "memory").mkdir(parents=True)
        config = MemoryConfig(provider="none")
        with make_memory(workspace=ws, state_dir=Path(tmp) / "live", config=config) as mem:
            mem.sync()
            for step in steps:
                for name, text in step:
                    target = ws / "memory" / f"{name}.md"
                    if text is None:
                        target.unlink(missing_ok=True)
                    else:
                        target.write_text(text + "\n", encoding="utf-8")
                mem.sync()
            history = ranked(mem)
        with make_memory(workspace=ws, state_dir=Path(tmp) / "clean", config=config) as clean:
            clean.sync()
            assert ranked(clean) == history


def test_ties_break_by_path_and_line_not_by_rowid(tmp_path: Path) -> None:
    # Two files with the same text tie on every score; whichever was indexed first (the
    # smaller rowid), the earlier path wins.
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    config = MemoryConfig(provider="none")
    with make_memory(workspace=ws, state_dir=tmp_path / "s", config=config) as mem:
        (ws / "memory" / "b.md").write_text("zeppelin hangar\n", encoding="utf-8")
        mem.sync()
        (ws / "memory" / "a.md").write_text("zeppelin hangar\n", encoding="utf-8")
        mem.sync()
        hits = mem.search("zeppelin", max_results=1)
        assert [h.path for h in hits] == ["memory/a.md"]


@pytest.mark.parametrize("backend", ["fts5", "memory"])
def test_fts_rows_only_for_the_fts5_backend(tmp_path: Path, backend: str) -> None:
    from memmw import StoreConfig

    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "a.md").write_text("the zeppelin hangar\n", encoding="utf-8")
    config = MemoryConfig(provider="none", store=StoreConfig(keyword_backend=backend))  # type: ignore[arg-type]
    with make_memory(workspace=ws, state_dir=tmp_path / "s", config=config) as mem:
        mem.sync()
        assert [h.path for h in mem.search("zeppelin")] == ["memory/a.md"]
        conn = connect(mem.db_path)
        try:
            fts = conn.execute("SELECT COUNT(*) FROM chunks_fts").fetchone()[0]
            stats = conn.execute("SELECT chunks FROM keyword_stats").fetchone()[0]
        finally:
            conn.close()
    assert (fts, stats) == ((1, 1) if backend == "fts5" else (0, 1))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    n_chunks=st.integers(30, 400),
    deleted=st.floats(0, 0.5),
    segment_max=st.sampled_from([2, 7, 64, 4096]),
    limit=st.integers(1, 30),
    appended=st.floats(0, 0.7),
    batches=st.integers(1, 4),
    stride=st.sampled_from([1, 3, 70_000]),
    tail_segments=st.sampled_from([1, 8]),
    dead_max=st.sampled_from([0, 5, 2048]),
)
def test_keyword_search_over_stored_segments_equals_exhaustive_scoring(
    seed: int,
    n_chunks: int,
    deleted: float,
    segment_max: int,
    limit: int,
    appended: float,
    batches: int,
    stride: int,
    tail_segments: int,
    dead_max: int,
) -> None:
    """BM25 over the stored segments, decoded on demand (df from the headers and the
    tombstones, chunks looked up in the frequent terms' segments without decoding them),
    gives the exhaustive answer over the chunks' own postings, whatever the history: a
    build, then syncs appending chunks (tail segments rewritten, new ones, merges) and
    deleting some (tombstones, purges once more than ``DEAD_MAX``), rowids with gaps up to
    offsets of 4 bytes. Same hits, scores, ties and matched counts."""
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(12)]
    weights = np.array([0.9, 0.8, 0.5, 0.3, 0.1, 0.05, 0.02, 0.02, 0.01, 0.01, 0.01, 0.01])
    hashes = np.array([term_hash(w) for w in vocab], dtype=np.int64)
    # Every chunk's postings, drawn up front: {rowid: (term hashes, tf, length)}.
    chunks: dict[int, tuple[np.ndarray, np.ndarray, int]] = {}
    for k in range(n_chunks):
        have = rng.random(len(vocab)) < weights
        if not have.any():
            have[0] = True
        tf = rng.integers(1, 4, size=int(have.sum())).astype(np.uint16)
        chunks[1 + k * stride] = (hashes[have], tf, int(tf.sum()) + 5)
    rowids = list(chunks)
    built = max(1, round(n_chunks * (1 - appended)))
    # The build, then each sync: its new chunks (rowids only grow), then its deletions.
    steps = [rowids[:built]] + [list(a) for a in np.array_split(rowids[built:], batches)]
    live: dict[int, tuple[np.ndarray, np.ndarray, int]] = {}
    with tempfile.TemporaryDirectory() as tmp, mock.patch.multiple(
        postings_mod, SEGMENT_MAX=segment_max, TAIL_MAX=min(segment_max, 256),
        TAIL_SEGMENTS=tail_segments, DEAD_MAX=dead_max,
    ):
        store = open_store(Path(tmp) / "index.sqlite")
        for new in steps:
            with transaction(store.conn):
                for rowid in new:
                    terms, tf, length = chunks[int(rowid)]
                    store.postings_buffer.add("memory", int(rowid), terms, tf, length)
                    live[int(rowid)] = chunks[int(rowid)]
                store.flush_postings()
            with transaction(store.conn):
                for rowid in list(live):
                    if rng.random() < deleted / len(steps):
                        terms, _, length = live.pop(rowid)
                        store.postings_buffer.remove("memory", rowid, terms, length)
                store.flush_postings()
        n_docs, total = store.keyword_stats(["memory"])
        assert (n_docs, total) == (len(live), sum(c[2] for c in live.values()))
        query = [int(h) for h in rng.choice(hashes, size=rng.integers(2, 6), replace=False)]
        # The reference: each query term's postings straight from the live chunks.
        reference = []
        for h in query:
            rows = sorted(r for r, c in live.items() if h in c[0].tolist())
            where = [int(np.flatnonzero(live[r][0] == h)[0]) for r in rows]
            reference.append(Postings(
                np.asarray(rows, dtype=np.int64),
                np.asarray([live[r][1][w] for r, w in zip(rows, where, strict=True)], np.int32),
                np.asarray([live[r][2] for r in rows], dtype=np.int32),
            ))
        lazy = store.postings(query, ["memory"], Arena())
        # The lazy document frequency is the live one.
        assert [len(lazy.get(h, EMPTY)) for h in query] == [len(p) for p in reference]
        with (
            mock.patch.object(keyword, "LOOKUP_COST", 0),
            mock.patch.object(keyword, "PRUNE_MIN_POSTINGS", 0),
        ):
            got = bm25_search([lazy.get(h, EMPTY) for h in query], n_docs, total, limit)
        want = bm25_exhaustive(reference, n_docs, float(total), limit)
        assert [(h.rowid, h.bm25, h.matched) for h in got] == [
            (h.rowid, h.bm25, h.matched) for h in want
        ]
        store.conn.close()


# -- the process's cache of segments (memmw.store.cache) ---------------------------------


class _RolledBack(Exception):
    pass


_CACHE_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.integers(0, 3), st.lists(st.sampled_from(WORDS), max_size=30)),
        st.tuples(st.just("delete"), st.integers(0, 3), st.just([])),
        # A writer that reads its own changes (filling the cache at its new version), then
        # rolls back: that version is never committed.
        st.tuples(st.just("abandon"), st.integers(0, 3), st.lists(st.sampled_from(WORDS), max_size=30)),
        st.tuples(st.just("read"), st.just(0), st.just([])),
    ),
    max_size=14,
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=_CACHE_OPS, bound=st.sampled_from([1 << 8, 1 << 12, 1 << 30]), small=st.booleans())
def test_postings_read_through_the_cache_are_those_stored_whoever_wrote_since(
    ops: list[tuple[str, int, list[str]]], bound: int, small: bool
) -> None:
    """Invariant: a read through the process's cache of segments (any bound) gives what a
    read of the table gives in the same snapshot, after any writes by another connection,
    reads of a writer's own uncommitted changes and rollbacks (every write of segments
    replaces the postings version: ``SqliteSegments.write``)."""
    limits = (
        {"SEGMENT_MAX": 4, "TAIL_MAX": 2, "DEAD_MAX": 3}
        if small
        else {"SEGMENT_MAX": postings_mod.SEGMENT_MAX}
    )
    hashes = [term_hash(w) for w in WORDS]
    with tempfile.TemporaryDirectory() as tmp, mock.patch.multiple(postings_mod, **limits), \
            mock.patch.object(postings_mod, "SEGMENTS", RowCache(bound)):
        writer = open_store(Path(tmp) / "x.sqlite")
        reader = IndexStore(connect(Path(tmp) / "x.sqlite", readonly=True), fts=False)

        def check(store: IndexStore) -> None:
            cached = store.postings(hashes, ["memory"])
            direct = postings_mod.read_postings(SqliteSegments(store.conn), hashes, ["memory"])
            assert cached.keys() == direct.keys()
            for h, p in direct.items():
                q = cached[h]
                for a, b in ((q.rowids, p.rowids), (q.tf, p.tf), (q.doc_len, p.doc_len)):
                    assert a.tolist() == b.tolist()

        try:
            for op, i, words in ops:
                path = f"memory/n{i}.md"
                if op == "write":
                    with writer.transaction():
                        write(writer, path, " ".join(words) or "tea")
                elif op == "delete":
                    with writer.transaction():
                        writer.delete_file(path, "memory")
                elif op == "abandon":
                    with contextlib.suppress(_RolledBack), writer.transaction():
                        write(writer, path, " ".join(words) or "tea")
                        check(writer)
                        raise _RolledBack
                with snapshot(reader.conn):
                    check(reader)
                    check(reader)  # the second read answers from the cache
        finally:
            writer.conn.close()
            reader.conn.close()


def test_every_write_of_segments_replaces_the_postings_version(tmp_path: Path) -> None:
    store = open_store(tmp_path / "x.sqlite")
    seen = {store.get_meta(VERSION_KEY)}
    for text in ["tea", "tea coffee", "zeppelin"]:
        with store.transaction():
            write(store, "a.md", text)
        seen.add(store.get_meta(VERSION_KEY))
    assert None not in seen and len(seen) == 4
    with store.transaction():  # no segment written (a tombstone only): the version stays
        write(store, "a.md", "")
    assert store.get_meta(VERSION_KEY) in seen
    store.conn.close()
