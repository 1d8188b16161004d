"""The PostgreSQL store against a real server: rows, BM25, vectors, namespaces, writer lock."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import numpy as np
import pytest

from memmw.errors import ConfigError, IndexBusyError, IndexStoreError
from memmw.search.keyword import KeywordMatrix
from memmw.store.terms import term_hash
from memmw.text.analysis import query_terms
from memmw.text.chunking import chunk_text

pytestmark = pytest.mark.postgres

NOTES = {
    "MEMORY.md": "# Setup\nThe gateway runs on the machine called atlas.\nBackups go to nas-2 nightly.\n",
    "memory/2026-01-02.md": "Met Alice about the gateway migration.\nAlice prefers tea.\n",
    "memory/2026-01-03.md": "Atlas rebooted twice; the gateway came back after ten minutes.\n",
}


@pytest.fixture(scope="module")
def pool(pg_database: str) -> Iterator[object]:
    from memmw.store.postgres.connection import open_pool

    pool = open_pool(pg_database, max_size=6)
    yield pool
    pool.close()


def _store(pool: object, name: str | None = None):  # type: ignore[no-untyped-def]
    from memmw.store.postgres.store import PostgresStore

    return PostgresStore(pool, name or f"agent-{uuid.uuid4().hex[:8]}")  # type: ignore[arg-type]


def _fill(store, notes: dict[str, str] = NOTES) -> dict[str, list[int]]:  # type: ignore[no-untyped-def]
    written: dict[str, list[int]] = {}
    with store.writer() as w:
        for path, text in notes.items():
            written[path] = w.replace_file(
                path=path,
                source="memory",
                file_hash=f"h-{len(text)}",
                mtime=1.0,
                size=len(text),
                decay_ts=None,
                chunks=chunk_text(text, tokens=20, overlap=0),
                model="fts-only",
            )
        w.bump_generation()
    return written


def test_migrations_are_idempotent_and_refuse_a_newer_schema(pg_database: str) -> None:
    import psycopg

    from memmw.store.postgres.schema import MIGRATIONS, migrate

    with psycopg.connect(pg_database, autocommit=True) as conn:
        assert migrate(conn) == len(MIGRATIONS)
        assert migrate(conn) == len(MIGRATIONS)
        conn.execute("INSERT INTO memmw.migrations (version) VALUES (%s)", (len(MIGRATIONS) + 1,))
        try:
            with pytest.raises(IndexStoreError, match="newer than this memmw"):
                migrate(conn)
        finally:
            conn.execute("DELETE FROM memmw.migrations WHERE version = %s", (len(MIGRATIONS) + 1,))


def test_files_chunks_and_counts_round_trip(pool: object) -> None:
    store = _store(pool)
    written = _fill(store)
    assert store.generation() == 1
    records = store.file_records("memory")
    assert set(records) == set(NOTES)
    counts = store.counts()
    assert counts["memory"]["files"] == 3
    assert counts["memory"]["chunks"] == sum(len(v) for v in written.values())
    rowids = store.chunk_rowids(["memory"])
    assert rowids == sorted(r for v in written.values() for r in v)
    rows = store.chunks(rowids)
    assert {row.path for row in rows.values()} == set(NOTES)
    assert all(row.n_terms > 0 and row.term_set() for row in rows.values())
    blobs = store.term_blobs(["memory"])
    assert [b[0] for b in blobs] == rowids
    assert store.term_blobs(["memory"], after=rowids[-1]) == []


def test_deleting_a_file_removes_its_postings_and_statistics(pool: object) -> None:
    store = _store(pool)
    _fill(store)
    docs_before, _ = store.term_stats(["memory"])
    alice = term_hash("alic")
    assert store.postings([alice], ["memory"])
    with store.writer() as w:
        w.delete_file("memory/2026-01-02.md", "memory")
    assert store.postings([alice], ["memory"]) == {}
    docs_after, avgdl = store.term_stats(["memory"])
    remaining = store.term_blobs(["memory"])
    assert docs_after == len(remaining) < docs_before
    assert avgdl == pytest.approx(sum(b[2] for b in remaining) / len(remaining))


@pytest.mark.parametrize(
    "query", ["gateway", "alice tea", "atlas gateway rebooted", "nothing matches this"]
)
def test_bm25_in_the_server_matches_the_in_process_matrix(pool: object, query: str) -> None:
    store = _store(pool)
    _fill(store)
    terms = query_terms(query)
    expected = KeywordMatrix(store.term_blobs(["memory"])).search(terms, 10)
    got = store.bm25_search([term_hash(t) for t in dict.fromkeys(terms)], 10, ["memory"])
    assert [r for r, _, _ in got] == [h.rowid for h in expected]
    for (_, score, matched), hit in zip(got, expected, strict=True):
        assert score == pytest.approx(hit.bm25, rel=1e-5)
        assert matched == hit.matched


def test_namespaces_do_not_see_each_other(pool: object) -> None:
    first, second = _store(pool), _store(pool)
    _fill(first)
    _fill(second, {"MEMORY.md": "Only the second agent knows about zebras.\n"})
    zebra = [term_hash("zebra")]
    assert first.bm25_search(zebra, 5, ["memory"]) == []
    assert len(second.bm25_search(zebra, 5, ["memory"])) == 1
    assert set(second.file_records("memory")) == {"MEMORY.md"}
    assert not first.chunks(second.chunk_rowids(["memory"]))


def test_a_rebuild_is_invisible_until_it_commits_and_a_failed_one_changes_nothing(
    pool: object,
) -> None:
    store, other = _store(pool), _store(pool)
    _fill(store)
    _fill(other)
    gateway = [term_hash("gateway")]
    before = store.bm25_search(gateway, 10, ["memory"])
    assert before
    with store.writer() as w:
        w.clear()
        assert w.bm25_search(gateway, 10, ["memory"]) == []
        # Readers (another connection) still see the old rows, and other namespaces too.
        assert store.bm25_search(gateway, 10, ["memory"]) == before
        assert other.bm25_search(gateway, 10, ["memory"])
    assert store.bm25_search(gateway, 10, ["memory"]) == []

    _fill(store)
    before = store.bm25_search(gateway, 10, ["memory"])
    generation = store.generation()
    with pytest.raises(RuntimeError, match="disk on fire"), store.writer() as w:
        w.clear()
        w.bump_generation()
        raise RuntimeError("disk on fire")
    assert store.bm25_search(gateway, 10, ["memory"]) == before
    assert store.generation() == generation


def test_a_second_writer_is_told_who_holds_the_namespace(pg_database: str) -> None:
    import os
    import socket

    from memmw.store.postgres.store import PostgresStore

    name = f"agent-{uuid.uuid4().hex[:8]}"
    with PostgresStore.open(pg_database, name) as host_a, PostgresStore.open(
        pg_database, name
    ) as host_b:
        with host_a.writer():
            holder = host_b.writer_holder()
            assert holder is not None
            assert holder["host"] == socket.gethostname() and holder["pid"] == os.getpid()
            with pytest.raises(IndexBusyError, match=f"pid {os.getpid()}"), host_b.writer():
                pass
            # Readers are not blocked by the writer.
            assert host_b.chunk_count(["memory"]) == 0
        assert host_b.writer_holder() is None
        with host_b.writer():
            pass


def test_vector_search_uses_the_namespace_hnsw_index_and_matches_brute_force(
    pool: object,
) -> None:
    store = _store(pool)
    notes = {f"memory/note-{i}.md": f"note number {i} about topic {i % 7}\n" for i in range(300)}
    _fill(store, notes)
    rowids = store.chunk_rowids(["memory"])
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((len(rowids), 32)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    store.ensure_vector_index(32)
    with store.writer() as w:
        assert w.put_vectors(list(zip(rowids, vectors, strict=True))) == len(rowids)
    assert store.vector_dims() == 32
    assert store.vector_count() == len(rowids)
    assert store.pending_vectors(10) == []
    query = vectors[17] + 0.1 * rng.standard_normal(32).astype(np.float32)
    hits = store.vector_search(query, 10, ["memory"], ef_search=200)
    sims = vectors @ (query / np.linalg.norm(query))
    expected = [rowids[i] for i in np.argsort(-sims)[:10]]
    assert hits[0][0] == rowids[17]
    assert len(set(r for r, _ in hits) & set(expected)) >= 9
    assert hits[0][1] == pytest.approx(float(sims[17]), abs=1e-5)
    assert store.vector_search(query, 10, ["sessions"]) == []
    import psycopg
    from pgvector import Vector

    with pool.connection() as conn:  # type: ignore[attr-defined]
        conn.execute("SET enable_seqscan = off")
        plan = " ".join(
            str(r[0])
            for r in conn.execute(
                f"EXPLAIN SELECT chunk_rowid FROM memmw.chunk_vectors WHERE namespace_id ="
                f" {store.namespace_id} AND dims = 32 ORDER BY (embedding::vector(32)) <=> %s"
                " LIMIT 10",
                (Vector(query),),
            )
        )
        conn.execute("RESET enable_seqscan")
    assert f"chunk_vectors_hnsw_{store.namespace_id}_32" in plan
    assert psycopg is not None


def test_vectors_of_other_namespaces_are_not_written_or_found(pool: object) -> None:
    mine, theirs = _store(pool), _store(pool)
    _fill(mine)
    _fill(theirs)
    their_rowids = theirs.chunk_rowids(["memory"])
    with mine.writer() as w:
        assert w.put_vectors([(their_rowids[0], np.ones(8, dtype=np.float32))]) == 0
    with theirs.writer() as w:
        w.put_vectors([(r, np.ones(8, dtype=np.float32)) for r in their_rowids])
    assert mine.vector_search(np.ones(8), 5, ["memory"]) == []
    assert len(theirs.vector_search(np.ones(8), 5, ["memory"])) == min(5, len(their_rowids))


def test_the_embedding_cache_is_shared_by_namespaces(pool: object) -> None:
    first, second = _store(pool), _store(pool)
    with first.writer() as w:
        w.put_cached_embeddings("fake", "m", "k", {"abc": [3.0, 4.0]})
    got = second.cached_embeddings("fake", "m", "k", ["abc", "missing"])
    assert list(got) == ["abc"]
    assert got["abc"] == pytest.approx([0.6, 0.8])
    assert second.cached_embeddings("fake", "other", "k", ["abc"]) == {}


def test_the_dsn_comes_from_config_then_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from memmw.store.postgres.connection import DSN_ENV, redact_dsn, resolve_dsn

    monkeypatch.setenv(DSN_ENV, "postgresql://env@h/db")
    assert resolve_dsn("postgresql://cfg@h/db") == "postgresql://cfg@h/db"
    assert resolve_dsn(None) == "postgresql://env@h/db"
    monkeypatch.delenv(DSN_ENV)
    with pytest.raises(ConfigError, match=DSN_ENV):
        resolve_dsn(None)
    assert redact_dsn("postgresql://bob:secret@db.example:6543/mem") == (
        "postgresql://bob@db.example:6543/mem"
    )


def test_an_unreachable_server_is_a_clear_store_error() -> None:
    from memmw.store.postgres.connection import open_pool

    with pytest.raises(IndexStoreError, match="cannot open the PostgreSQL store at"):
        open_pool("postgresql://nobody@127.0.0.1:1/none")
