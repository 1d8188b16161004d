"""Store conformance: the contract of ``memmw.store.protocol`` that every store keeps.

Every test talks to the store only through the protocol and runs once per factory in
``tests/store/conftest.py`` (SQLite today; PostgreSQL when ``MEMMW_TEST_PG_DSN`` is set).
"""

from __future__ import annotations

import contextlib
import os
import threading
import uuid
from collections.abc import Callable, Sequence

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from memmw.errors import IndexBusyError
from memmw.notes.syntax import parse_note
from memmw.store.protocol import (
    ChunkRow,
    GraphRows,
    LockHolder,
    Store,
    StoreReader,
    StoreWriter,
    VectorStats,
)
from memmw.store.terms import term_hash
from memmw.store.vectors import to_blob
from memmw.text.analysis import term_frequencies
from memmw.text.chunking import Chunk, chunk_text

from ..conftest import make_memory

#: ``make(agent_id="main") -> Store`` (the ``store_factory`` fixture of conftest.py).
StoreFactory = Callable[..., Store]

SOURCES = ("memory",)
BOTH = ("memory", "sessions")


def chunks_of(text: str) -> list[Chunk]:
    return chunk_text(text, tokens=40, overlap=0)


def put_file(
    writer: StoreWriter,
    path: str,
    text: str,
    *,
    source: str = "memory",
    file_hash: str | None = None,
    mtime: float = 1000.0,
    decay_ts: float | None = None,
) -> list[int]:
    return writer.replace_file(
        path=path,
        source=source,
        file_hash=file_hash or f"h-{path}-{len(text)}",
        mtime=mtime,
        size=len(text.encode()),
        decay_ts=decay_ts,
        chunks=chunks_of(text),
        model="fts-only",
    )


def seed(store: Store, files: dict[str, str], *, source: str = "memory") -> dict[str, list[int]]:
    with store.write() as writer, writer.transaction():
        return {path: put_file(writer, path, text, source=source) for path, text in files.items()}


NOTES = {
    "MEMORY.md": "The gateway runs on port 8080.\nAlice prefers green tea.\n",
    "memory/2026-01-02.md": "We planned the kubernetes migration.\nThe gateway moved.\n",
    "memory/2026-01-03.md": "Bob fixed the backup cron job.\n",
}


def test_the_sqlite_store_satisfies_the_protocol(store: Store) -> None:
    assert isinstance(store, Store)
    with store.write() as writer:
        assert isinstance(writer, StoreWriter)
    with store.read() as reader:
        assert isinstance(reader, StoreReader)


# -- files and chunks -------------------------------------------------------------------


def test_a_new_store_is_empty_and_unpublished(store: Store) -> None:
    assert not store.published()
    with store.write() as writer:
        assert writer.generation() == 0
        assert writer.identity() is None
    assert store.exists()
    with store.read() as reader:
        assert reader.counts() == {}
        assert reader.file_records("memory") == {}
        assert reader.chunk_rowids(SOURCES) == []


def test_file_records_round_trip(store: Store) -> None:
    with store.write() as writer, writer.transaction():
        put_file(writer, "MEMORY.md", NOTES["MEMORY.md"], file_hash="abc", mtime=12.5)
        put_file(writer, "sessions/a.jsonl", "hello there\n", source="sessions", file_hash="s1")
    with store.read() as reader:
        size = len(NOTES["MEMORY.md"].encode())
        assert reader.file_records("memory") == {"MEMORY.md": ("abc", 12.5, size)}
        assert set(reader.file_records("sessions")) == {"sessions/a.jsonl"}
        assert set(reader.counts()) == {"memory", "sessions"}
    with store.write() as writer, writer.transaction():
        writer.update_file_stat("MEMORY.md", "memory", mtime=99.0, size=7)
    with store.read() as reader:
        assert reader.file_records("memory") == {"MEMORY.md": ("abc", 99.0, 7)}


def test_chunk_rows_carry_what_ranking_needs(store: Store) -> None:
    text = "Alpha line one.\nBeta line two.\n"
    with store.write() as writer, writer.transaction():
        ids = put_file(writer, "memory/2026-01-02.md", text, decay_ts=1_767_312_000.0)
    with store.read() as reader:
        rows = reader.chunks([*ids, 10**9])
    assert set(rows) == set(ids)  # unknown ids are left out
    expected = chunks_of(text)
    for rowid, chunk in zip(ids, expected, strict=True):
        row = rows[rowid]
        assert isinstance(row, ChunkRow)
        assert (row.rowid, row.path, row.source) == (rowid, "memory/2026-01-02.md", "memory")
        assert (row.start_line, row.end_line, row.text) == (chunk.start_line, chunk.end_line, chunk.text)
        assert row.decay_ts == 1_767_312_000.0
        counts = term_frequencies(row.text)
        assert row.n_terms == sum(counts.values())
        assert set(row.term_hashes().tolist()) == {term_hash(t) for t in counts}
        assert row.piece_lines()[0] == chunk.start_line


def test_replacing_a_file_removes_its_old_chunks_and_never_reuses_ids(store: Store) -> None:
    first = seed(store, {"MEMORY.md": "The zeppelin hangar opens in May.\n"})["MEMORY.md"]
    second = seed(store, {"MEMORY.md": "The gateway runs on port 8080.\n"})["MEMORY.md"]
    assert min(second) > max(first)
    with store.read() as reader:
        assert reader.chunks(first) == {}
        assert set(reader.chunks(second)) == set(second)
        assert reader.chunk_rowids(SOURCES) == sorted(second)
        assert reader.postings([term_hash("zeppelin")], SOURCES) == {}
        assert set(reader.postings([term_hash("gateway")], SOURCES)) == {term_hash("gateway")}


def test_deleting_a_file_removes_everything_derived_from_it(store: Store) -> None:
    ids = seed(store, NOTES)
    with store.write() as writer, writer.transaction():
        writer.write_vectors([(ids["MEMORY.md"][0], _hash_of(writer, ids["MEMORY.md"][0]), to_blob([1.0, 0.0]))])
        writer.delete_file("MEMORY.md", "memory")
        writer.delete_file("not-indexed.md", "memory")  # no error
    with store.read() as reader:
        assert "MEMORY.md" not in reader.file_records("memory")
        assert reader.chunks(ids["MEMORY.md"]) == {}
        assert reader.postings([term_hash("tea")], SOURCES) == {}
        assert reader.vector_stats().vectors == 0
        assert reader.counts()["memory"]["files"] == 2


def test_counts_by_source(store: Store) -> None:
    seed(store, NOTES)
    seed(store, {"sessions/a.jsonl": "user: hello\n"}, source="sessions")
    with store.read() as reader:
        counts = reader.counts()
        assert counts["memory"]["files"] == 3 and counts["sessions"]["files"] == 1
        assert counts["memory"]["chunks"] == len(reader.chunk_rowids(SOURCES))
        assert len(reader.chunk_rowids(BOTH)) == counts["memory"]["chunks"] + counts["sessions"]["chunks"]


def test_a_failed_transaction_writes_nothing(store: Store) -> None:
    seed(store, {"MEMORY.md": "kept\n"})
    with pytest.raises(RuntimeError), store.write() as writer, writer.transaction():
        put_file(writer, "memory/new.md", "never committed\n")
        writer.delete_file("MEMORY.md", "memory")
        writer.set_meta("k", "v")
        raise RuntimeError("boom")
    with store.read() as reader:
        assert set(reader.file_records("memory")) == {"MEMORY.md"}
        assert reader.get_meta("k") is None


_WORDS = ("gateway", "zeppelin", "tea", "atlas", "harbour")
#: One writer's transactions: committed, raising, or raising inside a committed one.
_TRANSACTIONS = st.lists(
    st.tuples(
        st.sampled_from(["commit", "raise", "nested-raise"]),
        st.sampled_from(["MEMORY.md", "memory/a.md", "memory/b.md"]),
        st.none() | st.lists(st.sampled_from(_WORDS), min_size=1, max_size=4).map(" ".join),
    ),
    min_size=1,
    max_size=6,
)


def _apply(writer: StoreWriter, path: str, text: str | None) -> None:
    if text is None:
        writer.delete_file(path, "memory")
    else:
        put_file(writer, path, text + "\n")


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(steps=_TRANSACTIONS)
@example(steps=[("commit", "MEMORY.md", "gateway"), ("raise", "memory/a.md", "zeppelin"),
                ("commit", "memory/b.md", "gateway tea")])
def test_one_writer_keeps_exactly_what_its_committed_transactions_wrote(
    store_factory: StoreFactory, steps: list[tuple[str, str, str | None]]
) -> None:
    """Whatever a rolled-back transaction (or savepoint) buffered, nothing of it reaches
    the writer's later transactions: files, postings and statistics are the committed
    writes' alone."""
    store = store_factory(f"tx{uuid.uuid4().hex[:8]}")
    notes: dict[str, str] = {}
    with store.write() as writer:
        for kind, path, text in steps:
            if kind == "raise":
                with contextlib.suppress(RuntimeError), writer.transaction():
                    _apply(writer, path, text)
                    raise RuntimeError("rolled back")
                continue
            with writer.transaction():
                if kind == "nested-raise":
                    _apply(writer, "memory/before.md", "harbour atlas")  # before the savepoint
                    notes["memory/before.md"] = "harbour atlas"
                    with contextlib.suppress(RuntimeError), writer.transaction():
                        _apply(writer, path, text)
                        raise RuntimeError("rolled back")
                    path = "memory/after.md"  # and a write after it
                _apply(writer, path, text)
            if text is None:
                notes.pop(path, None)
            else:
                notes[path] = text
    with store.read() as reader:
        assert set(reader.file_records("memory")) == set(notes)
        rows = reader.chunks(reader.chunk_rowids(SOURCES))
        assert reader.keyword_stats(SOURCES)[0] == len(rows)
        for word in _WORDS:
            want = sorted(r for r, row in rows.items() if word in row.text.split())
            got = reader.postings([term_hash(word)], SOURCES).get(term_hash(word))
            assert (sorted(got.rowids.tolist()) if got is not None else []) == want, word


# -- meta, identity, generation ----------------------------------------------------------


def test_meta_and_identity(store: Store) -> None:
    identity = {"provider": "fake", "model": "m", "vectorDims": 8, "sources": ["memory"]}
    with store.write() as writer, writer.transaction():
        writer.set_meta("workspace", "/ws")
        writer.set_meta("gone", "x")
        writer.delete_meta("gone")
        writer.delete_meta("never-set")
        writer.set_identity(identity)
    assert store.published()
    with store.read() as reader:
        assert reader.get_meta("workspace") == "/ws"
        assert reader.get_meta("gone") is None
        assert reader.identity() == identity


def test_generation_bumps_are_committed_and_seen_by_readers(store: Store) -> None:
    with store.write() as writer, writer.transaction():
        assert writer.bump_generation() == 1
        assert writer.bump_generation() == 2
    with store.read() as reader:
        assert reader.generation() == 2
        assert reader.get_meta("last_sync") is not None
    with store.write() as writer, writer.transaction():
        assert writer.bump_vector_generation() == 1


def test_a_read_snapshot_sees_one_generation(store: Store) -> None:
    seed(store, {"MEMORY.md": "first\n"})

    def bump() -> None:
        with store.write() as writer, writer.transaction():
            writer.bump_generation()
            put_file(writer, "memory/b.md", "second\n")

    with store.read() as reader:
        before = reader.generation()
        thread = threading.Thread(target=bump)
        thread.start()
        thread.join()
        assert reader.generation() == before
        assert set(reader.file_records("memory")) == {"MEMORY.md"}
    with store.read() as reader:
        assert reader.generation() == before + 1


# -- keyword postings and stats ------------------------------------------------------------


def test_postings_and_keyword_stats_match_the_chunks_terms(store: Store) -> None:
    seed(store, NOTES)
    seed(store, {"sessions/a.jsonl": "the gateway session\n"}, source="sessions")
    with store.read() as reader:
        rows = reader.chunks(reader.chunk_rowids(SOURCES))
        expected: dict[int, dict[int, tuple[float, float]]] = {}
        for row in rows.values():
            for term, tf in term_frequencies(row.text).items():
                expected.setdefault(term_hash(term), {})[row.rowid] = (float(tf), float(row.n_terms))
        wanted = [term_hash(t) for t in ("gateway", "tea", "kubernetes", "absent")]
        got = reader.postings(wanted, SOURCES)
        assert set(got) == {h for h in wanted if h in expected}
        for h, post in got.items():
            # Lookups and the document frequency answer as the decoded arrays do (a store
            # may read them lazily).
            probe = np.arange(max(rows) + 2, dtype=np.int64)
            has, tf, dl = post.lookup(probe)
            assert len(post) == int(has.sum()) == len(expected[h])
            assert post.last >= max(expected[h])
            assert {
                int(r): (float(t), float(d))
                for r, t, d in zip(probe[has], tf[has], dl[has], strict=True)
            } == expected[h]
            assert post.rowids.dtype == np.int64
            assert list(post.rowids) == sorted(post.rowids)  # rowid ascending
            assert {
                int(r): (float(t), float(d)) for r, t, d in zip(post.rowids, post.tf, post.doc_len, strict=True)
            } == expected[h]
        n, total = reader.keyword_stats(SOURCES)
        assert n == len(rows)
        assert total == pytest.approx(sum(r.n_terms for r in rows.values()))
        # A source filter: the session chunk only counts with its source.
        assert len(reader.postings([term_hash("session")], SOURCES)) == 0
        assert len(reader.postings([term_hash("session")], BOTH)) == 1
        assert reader.keyword_stats(BOTH)[0] == n + 1


# -- vectors and the embedding cache -------------------------------------------------------


def _hash_of(reader: StoreReader, rowid: int) -> str:
    pending = {r: h for r, h, _t in reader.pending_chunks(0, 10_000)}
    return pending[rowid]


def _vectorise(store: Store, vectors: dict[int, Sequence[float]]) -> None:
    with store.write() as writer, writer.transaction():
        rows = [(rowid, _hash_of(writer, rowid), to_blob(vec)) for rowid, vec in vectors.items()]
        assert writer.write_vectors(rows) == len(rows)


def test_nearest_orders_by_cosine_and_filters_by_source(store: Store) -> None:
    ids = seed(store, NOTES)
    session = seed(store, {"sessions/a.jsonl": "user: hi\n"}, source="sessions")["sessions/a.jsonl"]
    a, b, c = ids["MEMORY.md"][0], ids["memory/2026-01-02.md"][0], ids["memory/2026-01-03.md"][0]
    _vectorise(store, {a: [1.0, 0.0, 0.0], b: [0.6, 0.8, 0.0], c: [0.0, 0.0, 1.0], session[0]: [1.0, 0.01, 0.0]})
    with store.read() as reader:
        hits = reader.nearest([1.0, 0.1, 0.0], 3, SOURCES)
        assert [r for r, _ in hits] == [a, b, c]
        sims = [s for _, s in hits]
        assert sims == sorted(sims, reverse=True)
        assert sims[0] == pytest.approx(1.0 / np.linalg.norm([1.0, 0.1]), abs=1e-5)
        assert [r for r, _ in reader.nearest([1.0, 0.1, 0.0], 1, SOURCES)] == [a]
        assert reader.nearest([1.0, 0.1, 0.0], 2, BOTH)[0][0] == session[0]
        assert dict(reader.vector_rows(SOURCES)).keys() == {a, b, c}


def test_vector_centroid_is_the_mean_of_the_sources_vectors(store: Store) -> None:
    ids = seed(store, NOTES)
    with store.read() as reader:
        assert reader.vector_centroid(SOURCES) is None  # no vector yet
    session = seed(store, {"sessions/a.jsonl": "user: hi\n"}, source="sessions")["sessions/a.jsonl"]
    a, b = ids["MEMORY.md"][0], ids["memory/2026-01-02.md"][0]
    _vectorise(store, {a: [1.0, 0.0, 0.0], b: [0.0, 1.0, 0.0], session[0]: [0.0, 0.0, 1.0]})
    with store.read() as reader:
        memory_only = reader.vector_centroid(SOURCES)
        both = reader.vector_centroid(BOTH)
    assert memory_only is not None and both is not None
    assert memory_only[0].tolist() == pytest.approx([0.5, 0.5, 0.0], abs=1e-6)
    assert memory_only[1] == 2
    assert both[0].tolist() == pytest.approx([1 / 3, 1 / 3, 1 / 3], abs=1e-6)
    assert both[1] == 3


def test_vector_index_is_none_without_vectors_then_answers_by_cosine(store: Store) -> None:
    """The one vector-search capability: the store picks its path (here the exact matrix,
    below ``HNSW_MIN_VECTORS``), and it ranks as ``nearest`` does, calibrated when asked."""
    from memmw.store.vectorsearch import MatrixIndex, VectorCache

    ids = seed(store, NOTES)
    cache = VectorCache()
    with store.read() as reader:
        assert reader.vector_index(SOURCES, None, cache, calibrate=False) is None
    a, b, c = ids["MEMORY.md"][0], ids["memory/2026-01-02.md"][0], ids["memory/2026-01-03.md"][0]
    _vectorise(store, {a: [1.0, 0.0, 0.0], b: [0.6, 0.8, 0.0], c: [0.0, 0.0, 1.0]})
    unit = np.asarray([1.0, 0.1, 0.0], dtype=np.float32)
    unit /= np.linalg.norm(unit)
    with store.read() as reader:
        raw = reader.vector_index(SOURCES, 3, cache, calibrate=False)
        scaled = reader.vector_index(SOURCES, 3, cache, calibrate=True)
        assert isinstance(raw, MatrixIndex) and isinstance(scaled, MatrixIndex)
        hits = raw.leg(unit)(3)
        near = reader.nearest(unit.tolist(), 3, SOURCES)
        assert [r for r, _ in hits] == [r for r, _ in near] == [a, b, c]
        assert [s for _, s in hits] == pytest.approx([s for _, s in near], abs=1e-5)
        calibrated = scaled.leg(unit)(3)
    assert [r for r, _ in calibrated] == [a, b, c]
    assert calibrated[-1][1] == 0.0 and 0.0 < calibrated[0][1] <= 1.0


def test_vectors_of_replaced_chunks_are_not_written(store: Store) -> None:
    rowid = seed(store, {"MEMORY.md": "old text\n"})["MEMORY.md"][0]
    with store.read() as reader:
        stale = _hash_of(reader, rowid)
    seed(store, {"MEMORY.md": "new text\n"})
    with store.write() as writer, writer.transaction():
        assert writer.write_vectors([(rowid, stale, to_blob([1.0, 0.0]))]) == 0
    with store.read() as reader:
        assert reader.vector_stats().vectors == 0


def test_pending_chunks_and_vector_stats(store: Store) -> None:
    ids = seed(store, NOTES)
    every = sorted(r for rs in ids.values() for r in rs)
    with store.read() as reader:
        assert reader.pending_count() == len(every)
        assert [r for r, _h, _t in reader.pending_chunks(0, 2)] == every[:2]
        assert [r for r, _h, _t in reader.pending_chunks(every[0], 100)] == every[1:]
    _vectorise(store, {every[0]: [0.0, 1.0]})
    with store.read() as reader:
        stats = reader.vector_stats()
        assert isinstance(stats, VectorStats)
        assert (stats.vectors, stats.pending) == (1, len(every) - 1)
        text_bytes, vector_bytes = stats.bytes_by_source["memory"]
        assert vector_bytes == 8 and text_bytes > 0


def test_embedding_cache_get_put_and_prune(store: Store) -> None:
    blob = to_blob([0.0, 1.0, 0.0])
    with store.write() as writer, writer.transaction():
        writer.put_embeddings("fake", "m1", "key", {"h1": blob, "h2": to_blob([1.0, 0.0, 0.0])})
    with store.read() as reader:
        assert reader.cached_embeddings("fake", "m1", "key", ["h1", "h3"]) == {"h1": blob}
        assert reader.cached_embeddings("fake", "m2", "key", ["h1"]) == {}
        assert reader.cached_embeddings("fake", "m1", "other-endpoint", ["h1"]) == {}
        assert reader.cache_count() == 2
    with store.write() as writer, writer.transaction():
        assert writer.prune_embedding_cache(1, 100) == 1
        assert writer.prune_embedding_cache(1, 100) == 0
    with store.read() as reader:
        assert reader.cache_count() == 1


# -- locks ---------------------------------------------------------------------------------


def test_a_second_writer_is_told_who_holds_the_lock(store_factory: StoreFactory) -> None:
    holder, other = store_factory("main"), store_factory("main")
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with holder.write(what="sync"):
            held.set()
            release.wait(10)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert held.wait(10)
        with pytest.raises(IndexBusyError, match=rf"pid {os.getpid()}.*sync"), other.write(timeout=0):
            pass
        who = other.lock_holder()
        assert isinstance(who, LockHolder)
        assert who.pid == os.getpid() and who.what == "sync"
    finally:
        release.set()
        thread.join()
    assert other.lock_holder() is None
    with other.write(timeout=0) as writer:  # free again
        writer.set_meta("after", "1")


def test_the_writer_lock_is_reentrant_in_one_thread(store: Store) -> None:
    with store.writer_lock(timeout=0, what="sync"), store.write(timeout=0) as writer, writer.transaction():
        writer.set_meta("k", "v")
    with store.read() as reader:
        assert reader.get_meta("k") == "v"


# -- rebuild, reset ------------------------------------------------------------------------


def test_a_rebuild_swaps_in_atomically_and_keeps_what_survives(store: Store) -> None:
    old = seed(store, NOTES)
    with store.write() as writer, writer.transaction():
        writer.put_embeddings("fake", "m", "k", {"h": to_blob([1.0, 0.0])})
        writer.bump_generation()
    old_max = max(r for rs in old.values() for r in rs)
    with store.write() as writer, store.rebuild(writer) as staged, staged.transaction():
        assert staged.file_records("memory") == {}  # starts empty
        new = put_file(staged, "memory/only.md", "The only note left.\n")
        staged.set_identity({"provider": "none"})
        staged.bump_generation()
    with store.read() as reader:
        assert set(reader.file_records("memory")) == {"memory/only.md"}
        assert min(new) > old_max  # chunk ids never reused, even across a rebuild
        assert reader.generation() >= 2
        assert reader.cached_embeddings("fake", "m", "k", ["h"]).keys() == {"h"}
        assert reader.identity() == {"provider": "none"}


def test_a_failed_rebuild_leaves_the_old_rows_searchable(store: Store) -> None:
    seed(store, NOTES)
    with store.read() as reader:
        before = (reader.file_records("memory"), reader.chunk_rowids(SOURCES), reader.generation())
    with pytest.raises(RuntimeError), store.write() as writer, store.rebuild(writer) as staged:
        with staged.transaction():
            put_file(staged, "memory/half.md", "half a rebuild\n")
            staged.bump_generation()
        # Committed in the staging area, then the orchestration gives up.
        raise RuntimeError("the rebuild failed after its transaction")
    with pytest.raises(RuntimeError), store.write() as writer, store.rebuild(writer) as staged:
        put_file(staged, "memory/half.md", "half a rebuild\n")
        raise RuntimeError("the rebuild failed while staging")
    with store.read() as reader:
        after = (reader.file_records("memory"), reader.chunk_rowids(SOURCES), reader.generation())
        assert len(reader.postings([term_hash("gateway")], SOURCES)[term_hash("gateway")].rowids) == 2
    assert after == before


def test_reset_deletes_the_index(store: Store) -> None:
    seed(store, NOTES)
    with store.write() as writer, writer.transaction():
        writer.set_identity({"provider": "none"})
    assert store.published()
    store.reset()
    assert not store.published()
    with store.read() as reader:
        assert reader.counts() == {} and reader.identity() is None


# -- namespaces ----------------------------------------------------------------------------


def test_two_agents_never_see_each_others_rows(store_factory: StoreFactory) -> None:
    alice, bob = store_factory("alice"), store_factory("bob")
    seed(alice, {"MEMORY.md": "Alice's secret garden.\n"})
    with alice.write() as writer, writer.transaction():
        writer.set_identity({"provider": "none"})
        writer.put_embeddings("fake", "m", "k", {"h": to_blob([1.0, 0.0])})
    seed(bob, {"memory/b.md": "Bob's notes.\n"})
    with bob.read() as reader:
        assert set(reader.file_records("memory")) == {"memory/b.md"}
        assert reader.postings([term_hash("garden")], SOURCES) == {}
        assert reader.identity() is None and reader.cache_count() == 0
    assert alice.published() and not bob.published()
    bob.reset()
    with alice.read() as reader:
        assert set(reader.file_records("memory")) == {"MEMORY.md"}


# -- knowledge graph -----------------------------------------------------------------------

GRAPH_NOTE = "## Alice Martin (Ali)\n- city: Berlin\n- employer: Acme\n"


def test_graph_rows_follow_their_file(store: Store) -> None:
    seed(store, {"MEMORY.md": GRAPH_NOTE})
    with store.write() as writer, writer.transaction():
        writer.replace_note_graph(
            path="MEMORY.md", source="memory", note=parse_note(GRAPH_NOTE, "MEMORY.md"), fresh=True
        )
        writer.refresh_graph()
    with store.read() as reader:
        rows = reader.graph_rows()
    assert isinstance(rows, GraphRows)
    assert ("alice martin", "Ali", "MEMORY.md") in rows.aliases  # with its file (privacy view)
    facts = {(f[1], f[3], f[5]) for f in rows.facts}
    assert {("alice martin", "city", "Berlin"), ("alice martin", "employer", "Acme")} <= facts
    assert all(f[15] for f in rows.facts)  # each the current value of its key
    seeded = {key for key, _act, _last in rows.activation}
    assert {f[16] for f in rows.facts} <= seeded
    with store.write() as writer, writer.transaction():
        writer.replace_note_graph(path="MEMORY.md", source="memory", note=None)
    with store.read() as reader:
        assert reader.graph_rows().facts == []


_PEOPLE = [("Alice Martin", "Ali"), ("Bob Stone", "Bobby"), ("Carol Diaz", "Caro"),
           ("Jean-Luc Picard", "JL"), ("Eve O'Hara", "Evie"), ("Dan Wu", "Danny")]
_DECLARE = st.builds(
    lambda person, form: form.format(full=person[0], nick=person[1]),
    st.sampled_from(_PEOPLE),
    st.sampled_from(["## {full} ({nick})\n- city: Berlin", "## {full}\n- job: pilot",
                     "## People\n- {full} ({nick}): friend", "## {full} (the {nick})\n- city: Rome"]),
)
# How notes name people: full names, nicknames, first names, emphasis, possessives,
# identifiers joined by "_", other cases.
_MENTION = st.builds(
    lambda person, form, case: case(form.format(full=person[0], nick=person[1],
                                                first=person[0].split()[0])),
    st.sampled_from(_PEOPLE),
    st.sampled_from(["{full}", "{nick}", "{first}", "_{nick}_", "**{first}**", "{first}'s",
                     "{nick}_notes", "x_{first}", "[[{full}]]", "`{nick}`", "{first}  {nick}"]),
    st.sampled_from([str, str, str.upper, str.lower]),
)
_PROSE = st.builds(lambda a, b: f"{a} met {b} at the cafe.", _MENTION, _MENTION)
_NOTE = st.one_of(
    st.none(),
    st.lists(st.one_of(_DECLARE, _PROSE, _PROSE), min_size=1, max_size=6).map("\n".join),
)
_PATHS = st.sampled_from(["MEMORY.md", "memory/2026-01-01.md", "memory/2026-01-02.md",
                          "memory/2026-01-03.md"])


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(steps=st.lists(st.tuples(_PATHS, _NOTE), min_size=1, max_size=8))
@example(steps=[("memory/2026-01-01.md", "Ali met Bob at the cafe."),
                ("MEMORY.md", "## Alice Martin (Ali)\n- city: Berlin\n## Bob Stone\n- job: pilot"),
                ("memory/2026-01-02.md", "x_Bob met _Ali_ at the cafe."),
                ("MEMORY.md", "## Bob Stone\n- job: pilot")])
def test_cooccurrences_after_each_write_are_those_of_a_scan_of_every_chunk(
    store_factory: StoreFactory, steps: list[tuple[str, str | None]]
) -> None:
    """Whatever names a write adds, removes or moves to another entity, the chunks the
    store scans again (those that may name a changed one) leave the co-occurrences of a
    scan of every chunk with every name: the in-memory store's, which scans them all."""
    from memmw.store.inmemory import InMemoryBackend, InMemoryStore

    store = store_factory(f"cooc{uuid.uuid4().hex[:8]}")
    oracle = InMemoryStore(InMemoryBackend(), agent_id="oracle")
    files: dict[str, str] = {}
    try:
        for path, text in steps:
            if text is None and path not in files:
                continue
            for target in (store, oracle):
                with target.write() as writer, writer.transaction():
                    if text is None:
                        writer.delete_file(path, "memory")
                    else:
                        put_file(writer, path, text + "\n")
                        writer.replace_note_graph(
                            path=path, source="memory", note=parse_note(text + "\n", path)
                        )
                    writer.refresh_graph()
            if text is None:
                files.pop(path)
            else:
                files[path] = text
            with store.read() as got, oracle.read() as expect:
                assert sorted(got.graph_rows().cooccurrences) == sorted(
                    expect.graph_rows().cooccurrences
                ), files
    finally:
        store.close()
        oracle.close()


def test_activation_bumps_survive_a_rebuild(store: Store) -> None:
    seed(store, {"MEMORY.md": GRAPH_NOTE})
    with store.write(exclusive=False) as writer, writer.transaction():
        writer.bump_activation(["f:abc", "f:def"], 0.5)
        writer.bump_activation(["f:abc"], 0.5)
    with store.write() as writer, store.rebuild(writer) as staged, staged.transaction():
        put_file(staged, "MEMORY.md", GRAPH_NOTE)
    with store.read() as reader:
        activation = {k: a for k, a, _last in reader.graph_rows().activation}
    assert activation["f:abc"] > activation["f:def"] > 0


# -- health --------------------------------------------------------------------------------


def test_health_reports_an_intact_index(store: Store) -> None:
    seed(store, NOTES)
    health = store.health()
    assert health.opened and health.ok
    with store.read() as reader:
        assert health.chunks == len(reader.chunk_rowids(SOURCES))
    assert health.location == store.location


def test_memory_backends_share_an_index_per_state_folder(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``store.backend = "memory"``: two Memory objects of one state folder see one index
    (as two processes see one SQLite file); another folder has its own."""
    from memmw import MemoryConfig, StoreConfig

    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "a.md").write_text("The gateway runs on port 8080.\n")
    config = MemoryConfig(provider="none", store=StoreConfig(backend="memory"))
    with make_memory(workspace=ws, state_dir=tmp_path / "state", config=config) as first:
        first.sync()
        assert first.store.location == "memory:main"
        with make_memory(workspace=ws, state_dir=tmp_path / "state", config=config) as second:
            assert [h.path for h in second.search("gateway")] == ["memory/a.md"]
        with make_memory(workspace=ws, state_dir=tmp_path / "other", config=config) as other:
            assert not other.store.published()
