"""The PostgreSQL store against a real server: rows, BM25, vectors, namespaces, writer lock."""

from __future__ import annotations

import contextlib
import math
import os
import socket
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memmw.errors import ConfigError, IndexBusyError, IndexStoreError
from memmw.store.postgres.backend import PostgresStore
from memmw.store.protocol import Store, StoreReader, StoreWriter
from memmw.store.segments import decode
from memmw.store.terms import term_hash
from memmw.text.analysis import query_terms, terms
from memmw.text.chunking import chunk_text


@contextlib.contextmanager
def _statements_sent(cls: Any) -> Iterator[list[str]]:
    """The statements ``cls.execute`` sends while the block runs (``cls``: psycopg's
    ``Cursor`` or ``Connection``), in order."""
    sent: list[str] = []
    original = cls.execute

    def counted(self: object, query: object, *a: object, **k: object) -> object:
        sent.append(str(query))
        return original(self, query, *a, **k)

    cls.execute = counted
    try:
        yield sent
    finally:
        cls.execute = original

pytestmark = pytest.mark.postgres

NOTES = {
    "MEMORY.md": "# Setup\nThe gateway runs on the machine called atlas.\nBackups go to nas-2 nightly.\n",
    "memory/2026-01-02.md": "Met Alice about the gateway migration.\nAlice prefers tea.\n",
    "memory/2026-01-03.md": "Atlas rebooted twice; the gateway came back after ten minutes.\n",
}


@pytest.fixture(scope="module")
def shared_pool(pg_database: str) -> Iterator[object]:
    from memmw.store.postgres.connection import open_pool

    pool = open_pool(pg_database, max_size=8)
    yield pool
    pool.close()


def _store(pg_database: str, pool: object, name: str | None = None) -> PostgresStore:
    return PostgresStore(
        pg_database, agent_id=name or f"agent-{uuid.uuid4().hex[:8]}", pool=pool  # type: ignore[arg-type]
    )


def _replace_note(target: Any, path: str, text: str) -> list[int]:
    """``text`` written as the memory note ``path`` by ``target`` (a writer, or a rebuild's
    staging), in chunks of 20 tokens; the chunks' rowids."""
    rowids: list[int] = target.replace_file(
        path=path,
        source="memory",
        file_hash=f"h-{len(text)}",
        mtime=1.0,
        size=len(text),
        decay_ts=None,
        chunks=chunk_text(text, tokens=20, overlap=0),
        model="fts-only",
    )
    return rowids


def _fill(store: PostgresStore, notes: dict[str, str] = NOTES) -> dict[str, list[int]]:
    written: dict[str, list[int]] = {}
    with store.write() as w, w.transaction():
        for path, text in notes.items():
            written[path] = _replace_note(w, path, text)
        w.bump_generation()
    return written


@pytest.fixture
def store(pg_database: str, shared_pool: object) -> PostgresStore:
    return _store(pg_database, shared_pool)


def test_it_implements_the_store_protocol(store: PostgresStore) -> None:
    assert isinstance(store, Store)
    with store.read() as reader:
        assert isinstance(reader, StoreReader)
    with store.write() as writer:
        assert isinstance(writer, StoreWriter)


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


def test_migration_3_packs_each_sources_tombstones_next_to_its_statistics(pg_dsn: str) -> None:
    """An index of schema 2 keeps its tombstones as rows only; migration 3 packs each
    source's rowids into ``source_stats.dead`` (a row is added for a source without
    statistics), so reads after it leave the same chunks out."""
    import psycopg
    from psycopg import sql

    from memmw.store.postgres import schema

    name = f"memmw_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        dsn = psycopg.conninfo.make_conninfo(pg_dsn, dbname=name)
        with psycopg.connect(dsn, autocommit=True) as conn:
            with mock.patch.object(schema, "MIGRATIONS", schema.MIGRATIONS[:2]):
                assert schema.migrate(conn) == 2
            ns = conn.execute(
                "INSERT INTO memmw.namespaces (name) VALUES ('a') RETURNING id"
            ).fetchone()[0]
            conn.execute(
                "INSERT INTO memmw.source_stats VALUES (%s, 'memory', 5, 50)", (ns,)
            )
            for source, rowid in [("memory", 7), ("memory", 3), ("sessions", 11)]:
                conn.execute(
                    "INSERT INTO memmw.postings_dead VALUES (%s, %s, %s, '')", (ns, source, rowid)
                )
            assert schema.migrate(conn) == len(schema.MIGRATIONS)
            rows = conn.execute(
                "SELECT source, n_docs, dead FROM memmw.source_stats ORDER BY source"
            ).fetchall()
            held = {
                src: (int(n), sorted(np.frombuffer(bytes(d), dtype=">i8").tolist()))
                for src, n, d in rows
            }
            assert held == {"memory": (5, [3, 7]), "sessions": (0, [11])}
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def test_files_chunks_and_counts_round_trip(store: PostgresStore) -> None:
    assert not store.published()
    written = _fill(store)
    with store.write() as w:
        w.set_identity({"model": "fts-only"})
    assert store.published()
    with store.read() as r:
        assert r.generation() == 1
        assert r.identity() == {"model": "fts-only"}
        assert set(r.file_records("memory")) == set(NOTES)
        assert r.sources_present() == {"memory"}
        counts = r.counts()
        rowids = r.chunk_rowids(["memory"])
        rows = r.chunks(rowids)
    assert counts["memory"] == {"files": 3, "chunks": sum(len(v) for v in written.values())}
    assert rowids == sorted(r for v in written.values() for r in v)
    assert {row.path for row in rows.values()} == set(NOTES)
    assert all(row.n_terms > 0 and len(row.term_hashes()) for row in rows.values())


def test_deleting_a_file_removes_its_postings_and_statistics(store: PostgresStore) -> None:
    _fill(store)
    alice = term_hash(terms("alice")[0])
    with store.read() as r:
        docs_before, _ = r.keyword_stats(["memory"])
        assert alice in r.postings([alice], ["memory"])
    with store.write() as w:
        w.delete_file("memory/2026-01-02.md", "memory")
    with store.read() as r:
        assert r.postings([alice], ["memory"]) == {}
        docs_after, total = r.keyword_stats(["memory"])
        remaining = r.chunks(r.chunk_rowids(["memory"]))
    assert docs_after == len(remaining) < docs_before
    assert total == sum(row.n_terms for row in remaining.values())


def _chunk_terms(store: PostgresStore) -> dict[int, Counter[str]]:
    with store.read() as r:
        rows = r.chunks(r.chunk_rowids(["memory"]))
    return {rowid: Counter(terms(row.text)) for rowid, row in rows.items()}


def test_postings_match_the_chunks_terms(store: PostgresStore) -> None:
    _fill(store)
    counts = _chunk_terms(store)
    words = ("gateway", "atlas", "tea", "absent")
    with store.read() as r:
        postings = r.postings([term_hash(terms(w)[0]) for w in words], ["memory"])
        rows = r.chunks(list(counts))
    for word in words:
        (term,) = terms(word)
        expected = [
            (rowid, float(c[term]), float(sum(c.values())))
            for rowid, c in sorted(counts.items())
            if term in c
        ]
        if not expected:
            assert term_hash(term) not in postings
            continue
        got = postings[term_hash(term)]
        triples = zip(got.rowids.tolist(), got.tf.tolist(), got.doc_len.tolist(), strict=True)
        assert list(triples) == expected
    for rowid, row in rows.items():
        assert set(row.term_hashes().tolist()) == {term_hash(t) for t in counts[rowid]}


def _reference_bm25(counts: dict[int, Counter[str]], query: list[str]) -> list[tuple[int, float]]:
    """BM25 as memmw scores it (k1 1.2, b 0.75), straight from the chunks' terms."""
    n = len(counts)
    avgdl = sum(sum(c.values()) for c in counts.values()) / n
    scores: dict[int, float] = {}
    for term in dict.fromkeys(query):
        df = sum(1 for c in counts.values() if term in c)
        if not df:
            continue
        idf = math.log(1 + max(0.0, n - df + 0.5) / (df + 0.5))
        for rowid, c in counts.items():
            tf = c.get(term, 0)
            if tf:
                dl = sum(c.values())
                scores[rowid] = scores.get(rowid, 0.0) + idf * tf * 2.2 / (
                    tf + 1.2 * (1 - 0.75 + 0.75 * dl / avgdl)
                )
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))


@pytest.mark.parametrize(
    "query", ["gateway", "alice tea", "atlas gateway rebooted", "nothing matches this"]
)
def test_bm25_in_the_server_matches_the_formula(store: PostgresStore, query: str) -> None:
    _fill(store)
    q = query_terms(query)
    expected = _reference_bm25(_chunk_terms(store), q)[:10]
    with store.read() as r:
        got = r.bm25_search([term_hash(t) for t in q], 10, ["memory"])
    assert [row for row, _, _ in got] == [row for row, _ in expected]
    for (_, score, _), (_, want) in zip(got, expected, strict=True):
        assert score == pytest.approx(want, rel=1e-9)


def test_fts_search_answers_all_terms_and_single_terms(store: PostgresStore) -> None:
    _fill(store)
    with store.read() as r:
        both = r.fts_search(["gateway", terms("alice")[0]], 10, ["memory"], require_all=True)
        single = r.fts_search(["gateway"], 10, ["memory"], require_all=False)
        rows = r.chunks([row for row, _ in single])
    assert len(both) == 1 and all(rank < 0 for _, rank in both)
    assert len(single) == sum("gateway" in row.text for row in rows.values()) == 3
    assert both[0][0] in {row for row, _ in single}


def test_substring_counts_count_needles_per_chunk(store: PostgresStore) -> None:
    _fill(store)
    with store.read() as r:
        hits = r.substring_counts(["gate", "tea", "zzz"], 10, ["memory"])
        texts = r.chunks([row for row, _ in hits])
    assert hits[0][1] == 2 and "tea" in texts[hits[0][0]].text.lower()
    assert all(n >= 1 for _, n in hits)


def test_namespaces_do_not_see_each_other(pg_database: str, shared_pool: object) -> None:
    first, second = _store(pg_database, shared_pool), _store(pg_database, shared_pool)
    _fill(first)
    _fill(second, {"MEMORY.md": "Only the second agent knows about zebras.\n"})
    zebra = [term_hash("zebra")]
    with first.read() as r1, second.read() as r2:
        assert r1.bm25_search(zebra, 5, ["memory"]) == []
        assert len(r2.bm25_search(zebra, 5, ["memory"])) == 1
        assert set(r2.file_records("memory")) == {"MEMORY.md"}
        assert not r1.chunks(r2.chunk_rowids(["memory"]))


def test_a_rebuild_is_invisible_until_it_commits_and_a_failed_one_changes_nothing(
    pg_database: str, shared_pool: object
) -> None:
    import threading

    store, other = _store(pg_database, shared_pool), _store(pg_database, shared_pool)
    _fill(store)
    _fill(other)
    gateway = [term_hash("gateway")]

    def search(target: PostgresStore) -> list[tuple[int, float, int]]:
        # From another thread: another session, as another process would be.
        out: list[list[tuple[int, float, int]]] = []
        thread = threading.Thread(
            target=lambda: out.append(_search(target, gateway)), daemon=True
        )
        thread.start()
        thread.join(30)
        return out[0]

    before = search(store)
    assert before
    with store.write() as w, store.rebuild(w) as staged:
        assert staged.bm25_search(gateway, 10, ["memory"]) == []
        assert search(store) == before
        assert search(other)
    assert search(store) == []

    _fill(store)
    before = search(store)
    with store.read() as r:
        generation = r.generation()
    with (
        pytest.raises(RuntimeError, match="disk on fire"),
        store.write() as w,
        store.rebuild(w) as staged,
    ):
        staged.bump_generation()
        raise RuntimeError("disk on fire")
    assert search(store) == before
    with store.read() as r:
        assert r.generation() == generation


def _search(store: PostgresStore, hashes: list[int]) -> list[tuple[int, float, int]]:
    with store.read() as r:
        return r.bm25_search(hashes, 10, ["memory"])


def test_a_second_writer_is_told_who_holds_the_namespace(pg_database: str) -> None:
    name = f"agent-{uuid.uuid4().hex[:8]}"
    host_a = PostgresStore(pg_database, agent_id=name)
    host_b = PostgresStore(pg_database, agent_id=name)
    try:
        with host_a.write(what="sync"):
            holder = host_b.lock_holder()
            assert holder is not None
            assert (holder.host, holder.pid, holder.what) == (socket.gethostname(), os.getpid(), "sync")
            busy = f"pid {os.getpid()} on {socket.gethostname()}"
            with pytest.raises(IndexBusyError, match=busy), host_b.write(timeout=0.3):
                pass
            # Readers are not blocked by the writer.
            with host_b.read() as r:
                assert r.chunk_count(["memory"]) == 0
        assert host_b.lock_holder() is None
        with host_b.write(timeout=0):
            pass
    finally:
        host_a.close()
        host_b.close()


def test_named_locks_exclude_each_other_across_connections(pg_database: str) -> None:
    name = f"agent-{uuid.uuid4().hex[:8]}"
    one, two = PostgresStore(pg_database, agent_id=name), PostgresStore(pg_database, agent_id=name)
    try:
        with one.named_lock("embed"):
            with pytest.raises(IndexBusyError, match="embed"), two.named_lock("embed", timeout=0.2):
                pass
            with two.named_lock("other", timeout=0):
                pass
        with two.named_lock("embed", timeout=0):
            pass
    finally:
        one.close()
        two.close()


def _unit_rows(n: int, dims: int, seed: int) -> np.ndarray:
    rows = np.random.default_rng(seed).standard_normal((n, dims)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_nearest_uses_the_namespace_hnsw_index_and_matches_brute_force(
    store: PostgresStore, shared_pool: object
) -> None:
    from pgvector import Vector

    notes = {f"memory/note-{i}.md": f"note number {i} about topic {i % 7}\n" for i in range(300)}
    _fill(store, notes)
    with store.read() as r:
        pending = r.pending_chunks(0, 1000)
    vectors = _unit_rows(len(pending), 32, seed=3)
    with store.write() as w:
        written = w.write_vectors(
            [(row, digest, vec.astype("<f4").tobytes()) for (row, digest, _), vec in zip(pending, vectors, strict=True)]
        )
        w.bump_vector_generation()
    assert written == len(pending)
    rowids = [row for row, _, _ in pending]
    query = vectors[17] + 0.1 * np.random.default_rng(4).standard_normal(32).astype(np.float32)
    with store.read() as r:
        assert r.pending_count() == 0
        stats = r.vector_stats()
        hits = r.nearest(query.tolist(), 10, ["memory"])
        assert r.nearest(query.tolist(), 10, ["sessions"]) == []
        stored = dict(r.vector_rows(["memory"]))
    assert stats.vectors == len(pending) and stats.pending == 0
    assert np.frombuffer(stored[rowids[5]], dtype="<f4") == pytest.approx(vectors[5], abs=1e-6)
    sims = vectors @ (query / np.linalg.norm(query))
    expected = [rowids[i] for i in np.argsort(-sims)[:10]]
    assert hits[0][0] == rowids[17]
    assert hits[0][1] == pytest.approx(float(sims[17]), abs=1e-5)
    assert len({row for row, _ in hits} & set(expected)) >= 9
    with shared_pool.connection() as conn:  # type: ignore[attr-defined]
        conn.execute("SET enable_seqscan = off")
        plan = " ".join(
            str(row[0])
            for row in conn.execute(
                f"EXPLAIN SELECT chunk_rowid FROM memmw.chunk_vectors WHERE namespace_id ="
                f" {store.namespace_id} AND dims = 32 ORDER BY (embedding::vector(32)) <=> %s"
                " LIMIT 10",
                (Vector(query),),
            )
        )
        conn.execute("RESET enable_seqscan")
    assert f"chunk_vectors_hnsw_{store.namespace_id}_32" in plan


def test_vectors_are_written_only_for_the_chunk_they_were_computed_from(
    pg_database: str, shared_pool: object
) -> None:
    mine, theirs = _store(pg_database, shared_pool), _store(pg_database, shared_pool)
    _fill(mine)
    _fill(theirs)
    with theirs.read() as r:
        their_pending = r.pending_chunks(0, 100)
    with mine.read() as r:
        my_pending = r.pending_chunks(0, 100)
    blob = np.ones(8, dtype="<f4").tobytes()
    with mine.write() as w:
        # Another namespace's chunk, and one of mine with a stale hash: both ignored.
        assert w.write_vectors([(their_pending[0][0], their_pending[0][1], blob)]) == 0
        assert w.write_vectors([(my_pending[0][0], "stale-hash", blob)]) == 0
        assert w.write_vectors([(my_pending[0][0], my_pending[0][1], blob)]) == 1
    with theirs.read() as r:
        assert r.nearest(np.ones(8).tolist(), 5, ["memory"]) == []


def test_the_embedding_cache_is_per_agent_and_pruned_oldest_first(
    pg_database: str, shared_pool: object
) -> None:
    first, second = _store(pg_database, shared_pool), _store(pg_database, shared_pool)
    blob = np.asarray([0.6, 0.8], dtype="<f4").tobytes()
    with first.write() as w:
        w.put_embeddings("fake", "m", "k", {"abc": blob})
        w.put_embeddings("fake", "m", "k", {"def": blob})
    with first.read() as r:
        assert r.cached_embeddings("fake", "m", "k", ["abc", "missing"]) == {"abc": blob}
        assert r.cached_embeddings("fake", "other", "k", ["abc"]) == {}
        assert r.cache_count() == 2
    with second.read() as r:
        assert r.cached_embeddings("fake", "m", "k", ["abc"]) == {} and r.cache_count() == 0
    with first.write() as w:
        assert w.prune_embedding_cache(1, 10) == 1
    with first.read() as r:
        assert set(r.cached_embeddings("fake", "m", "k", ["abc", "def"])) == {"def"}


def test_reset_empties_only_this_namespace(pg_database: str, shared_pool: object) -> None:
    mine, theirs = _store(pg_database, shared_pool), _store(pg_database, shared_pool)
    _fill(mine)
    _fill(theirs)
    mine.reset()
    with mine.read() as r, theirs.read() as t:
        assert r.counts() == {} and r.generation() == 0
        assert t.counts()["memory"]["files"] == 3
    listed = {n["namespace"]: n for n in mine.namespaces()}
    assert listed[mine.agent_id]["chunks"] == 0
    assert listed[theirs.agent_id]["files"] == 3 and listed[theirs.agent_id]["textBytes"] > 0


def test_the_pg_store_fixture_gives_an_empty_store(pg_store: PostgresStore) -> None:
    assert not pg_store.published()
    with pg_store.read() as r:
        assert r.counts() == {} and r.generation() == 0


def test_health_and_location_never_show_the_password(pg_database: str) -> None:
    store = PostgresStore(pg_database, agent_id="health")
    try:
        health = store.health()
    finally:
        store.close()
    assert health.ok and health.opened and "pgvector" in health.detail
    assert "namespace health" in health.location
    broken = PostgresStore("postgresql://bob:hunter2@127.0.0.1:1/none", agent_id="x")
    result = broken.health()
    assert not result.ok and not result.opened
    assert "hunter2" not in result.location


def test_the_dsn_comes_from_config_then_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from memmw.store.postgres.connection import DSN_ENV, redact_dsn, resolve_dsn

    monkeypatch.setenv(DSN_ENV, "postgresql://env@h/db")
    assert resolve_dsn("postgresql://cfg@h/db") == "postgresql://cfg@h/db"
    assert resolve_dsn(None) == "postgresql://env@h/db"
    monkeypatch.delenv(DSN_ENV)
    with pytest.raises(ConfigError, match=DSN_ENV):
        resolve_dsn(None)
    assert redact_dsn("postgresql://bob:secret@db.example:6543/mem") == (
        "postgresql://bob:[REDACTED]@db.example:6543/mem"
    )


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://bob:hunter2@ss@127.0.0.1:1/none",  # raw "@": libpq misreads the host
        "postgresql://bob:hun/ter2pw@127.0.0.1:1/none",  # raw "/"
        "postgresql://bob:hunter2%zz@127.0.0.1:1/none",  # a bad %-escape is echoed
        "postgresql://bob:hunter2%40ss@127.0.0.1:1/none",
        "postgresql://bob:hünter2pw@127.0.0.1:1/none",
        "postgresql://bob:@127.0.0.1:1/none",
        "host=127.0.0.1 port=1 user=bob password='hunter2 pw@:/' dbname=none",
        "host=127.0.0.1 port=1 user=bob password=hunter2@ss dbname=none",
        "host=127.0.0.1 port=1 user=bob password='unterminated hunter2",
    ],
)
def test_connection_errors_never_show_the_password(dsn: str) -> None:
    # Issue 20: a password holding "@" (or ":", "/", "%") was partly printed in every
    # connection error. The real driver, a closed port: nothing of the password shows.
    from memmw.store.postgres.connection import open_pool

    with pytest.raises(IndexStoreError) as info:
        open_pool(dsn)
    text = str(info.value)
    for piece in ("hunter2", "hünter2", "ter2pw", "ss@127", "%zz"):
        assert piece not in text, text
    assert "PostgreSQL" in text


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://bob:hunter2@pw@db.example:5432/mem",
        "postgresql://bob:hun:ter2/pw@db.example/mem",
        "host=db.example user=bob password='hunter2 pw' dbname=mem",
    ],
)
def test_status_location_never_shows_the_password(dsn: str) -> None:
    # `memmw status` and every store message show ``location``: the DSN masked as written
    # (libpq's own parse of a raw "@" put half the password in the host name).
    from memmw.store.postgres.backend import PostgresStore

    location = PostgresStore(dsn).location
    assert "hunter2" not in location and "ter2" not in location and "pw@" not in location
    assert "db.example" in location and "bob" in location


def test_an_unreachable_server_is_a_clear_store_error() -> None:
    from memmw.store.postgres.connection import open_pool

    with pytest.raises(IndexStoreError, match="cannot open the PostgreSQL store at"):
        open_pool("postgresql://nobody@127.0.0.1:1/none")


GRAPH_NOTE = """# Memory

## Alice Martin (Ali)
- city: Berlin
- city: Lisbon (since 2026-05-01)
- works_at [[Acme Corp]]
- ~~phone: 555-1234~~ (retracted 2026-06-01: wrong number)

## Acme Corp
- city: Paris

## Decisions
- Use SQLite for the index <!-- trigger: which database, storage choice -->
"""


def test_graph_rows_follow_the_sqlite_rules_and_activation_survives_a_rebuild(
    store: PostgresStore,
) -> None:
    from memmw.notes.syntax import parse_note

    _fill(store, {"MEMORY.md": GRAPH_NOTE, "memory/2026-02-01.md": "Ali met Acme Corp today.\n"})
    with store.write() as w, w.transaction():
        w.replace_note_graph(
            path="MEMORY.md", source="memory", note=parse_note(GRAPH_NOTE, "MEMORY.md")
        )
        w.refresh_graph()
    with store.read() as r:
        rows = r.graph_rows()
    facts = {(f[3], f[5]): f for f in rows.facts}
    # The dated value supersedes the undated one; a retracted value is never current.
    assert facts[("city", "Lisbon")][15] == 1 and facts[("city", "Berlin")][15] == 0
    assert facts[("phone", "555-1234")][9] == 1 and facts[("phone", "555-1234")][15] == 0
    assert any(rel[3] == "works_at" and rel[5] == "Acme Corp" for rel in rows.relations)
    assert rows.triggers and "which database" in rows.triggers[0][2]
    assert ("alice martin", "Ali") in {(a[0], a[1]) for a in rows.aliases}
    # Alice (by her alias) and Acme are named together in the daily note's chunk.
    assert ("acme corp", "alice martin", 1) in rows.cooccurrences
    activation = {key: value for key, value, _ in rows.activation}
    assert activation and set(activation.values()) == {1.0}
    lisbon_key = facts[("city", "Lisbon")][16]
    with store.write(exclusive=False) as w:
        w.bump_activation([lisbon_key], 2.0)
    with store.write() as w, store.rebuild(w) as staged:
        assert staged.graph_rows().facts == []
    with store.read() as r:
        kept = {key: value for key, value, _ in r.graph_rows().activation}
    assert kept[lisbon_key] == pytest.approx(3.0)


def test_store_backend_and_dsn_are_configurable(monkeypatch: pytest.MonkeyPatch) -> None:
    from memmw.config import MemoryConfig, StoreConfig
    from memmw.store.postgres.backend import create_postgres_store
    from memmw.store.postgres.connection import DSN_ENV

    with pytest.raises(ConfigError, match=r"store\.backend"):
        StoreConfig(backend="mysql")  # type: ignore[arg-type]
    config = MemoryConfig(store=StoreConfig(backend="postgres"))
    monkeypatch.delenv(DSN_ENV, raising=False)
    with pytest.raises(ConfigError, match=DSN_ENV):
        create_postgres_store(config, agent_id="a")
    monkeypatch.setenv(DSN_ENV, "postgresql://u:pw@127.0.0.1:1/db")
    store = create_postgres_store(config, agent_id="ops")
    assert store.location == "postgresql://u:[REDACTED]@127.0.0.1:1/db namespace ops"
    assert store.agent_id == "ops"


def _table_rows(store: PostgresStore) -> tuple[list[tuple[int, int, int, int]], tuple[int, int]]:
    """Every live posting ``(term hash, rowid, tf, doc_len)`` and the BM25 statistics, as
    stored (segments decoded, tombstoned chunks left out)."""
    with store.read() as r:
        dead = {
            int(d) for (d,) in r.conn.execute(
                "SELECT chunk_rowid FROM memmw.postings_dead WHERE namespace_id = %s",
                (r.namespace_id,),
            ).fetchall()
        }
        postings = []
        for term, seg, data in r.conn.execute(
            "SELECT term_hash, seg, data FROM memmw.postings_segments WHERE namespace_id = %s",
            (r.namespace_id,),
        ).fetchall():
            rows, tf, dl = decode(int(seg), bytes(data))
            postings += [
                (int(term), int(x), int(t), int(d))
                for x, t, d in zip(rows.tolist(), tf.tolist(), dl.tolist(), strict=True)
                if x not in dead
            ]
        docs, length = r.keyword_stats(["memory"])
    return sorted(postings), (docs, int(length))


def _put(writer: StoreWriter, path: str, text: str) -> list[int]:
    return writer.replace_file(
        path=path, source="memory", file_hash=f"h-{text}", mtime=1.0, size=len(text),
        decay_ts=None, chunks=chunk_text(text, tokens=20, overlap=0), model="fts-only",
    )


def test_a_staged_rebuild_writes_the_same_rows_as_file_by_file_writes(
    pg_database: str, shared_pool: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rebuild's buffered, sorted postings equal direct writes; reads inside it see them;
    a file written twice and a savepoint rolled back inside it leave nothing behind."""
    from memmw.store import segments

    monkeypatch.setattr(segments, "SEGMENT_MAX", 3)  # several segments per term
    direct, staged_store = _store(pg_database, shared_pool), _store(pg_database, shared_pool)
    _fill(direct)
    _fill(staged_store, {"memory/old.md": "An old note about zebras.\n"})
    with staged_store.write() as w, staged_store.rebuild(w) as staged:
        with staged.transaction():
            _put(staged, "memory/2026-01-03.md", "A first version, replaced below.\n")
        with pytest.raises(RuntimeError), staged.transaction():
            _put(staged, "memory/rolled-back.md", "Written then rolled back: walrus.\n")
            # A read flushes the buffer inside the savepoint; the rollback undoes that too.
            assert staged.bm25_search([term_hash("walrus")], 5, ["memory"])
            raise RuntimeError("roll back this savepoint")
        for path, text in NOTES.items():
            _put(staged, path, text)
        assert len(staged.bm25_search([term_hash("gateway")], 10, ["memory"])) == 3
        staged.bump_generation()
    want, got = _table_rows(direct), _table_rows(staged_store)
    rowids = sorted({rowid for _, rowid, _, _ in got[0]})
    with staged_store.read() as r:
        assert sorted(r.chunk_rowids(["memory"])) == rowids
        assert set(r.file_records("memory")) == set(NOTES)
    # Same postings apart from the rowids (a different agent's chunks), same statistics.
    assert got[1] == want[1]
    assert sorted((h, tf, dl) for h, _, tf, dl in got[0]) == sorted(
        (h, tf, dl) for h, _, tf, dl in want[0]
    )
    assert term_hash("walrus") not in {h for h, _, _, _ in got[0]}
    assert term_hash("zebra") not in {h for h, _, _, _ in got[0]}


WORDS = "alpha beta gamma delta tea coffee gateway port zeppelin hangar basil".split()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    notes=st.dictionaries(
        st.sampled_from([f"memory/2026-01-{d:02d}.md" for d in range(1, 9)]),
        st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=8).map(" ".join),
                 min_size=1, max_size=6).map("\n".join),
        min_size=1,
    ),
    flush_at=st.sampled_from([1, 8, 30]),
    segment_max=st.sampled_from([3, 5]),
    tail_max=st.sampled_from([0, 1]),
    twice=st.booleans(),
    rolled_back=st.sampled_from([None, 0, 2]),
    carry_max=st.sampled_from([0, 3, 1000]),
)
def test_a_staged_rebuild_leaves_every_term_in_full_segments_but_its_last(
    pg_database: str, shared_pool: object, notes: dict[str, str], flush_at: int,
    segment_max: int, tail_max: int, twice: bool, rolled_back: int | None, carry_max: int,
) -> None:
    """Flushes past ``FLUSH_AT`` inside a rebuild each leave short segments; at the end
    every term's segments are full but its last, holding the same postings as direct
    writes (issue 25), also when a savepoint inside it rolled back one of its flushes."""
    from memmw.store import segments
    from memmw.store.postgres import store as pg_store_mod

    # As SEGMENT_MAX=4096 and TAIL_MAX=256: a flush appends a term's postings in a new
    # segment after its short last one rather than rewriting it.
    with mock.patch.multiple(
        segments, SEGMENT_MAX=segment_max, TAIL_MAX=tail_max, CARRY_MAX=carry_max
    ), mock.patch.object(pg_store_mod, "FLUSH_AT", flush_at):
        direct, staged_store = _store(pg_database, shared_pool), _store(pg_database, shared_pool)
        _fill(direct, notes)
        with staged_store.write() as w, staged_store.rebuild(w) as staged:
            if twice:  # a file written twice: its first chunks are deleted in the rebuild
                first = next(iter(notes))
                _put(staged, first, "A first version, replaced below: walrus tea.\n")
            for i, (path, text) in enumerate(notes.items()):
                if i == rolled_back:
                    with pytest.raises(RuntimeError), staged.transaction():
                        _put(staged, "memory/rolled-back.md", "Rolled back: walrus tea.\n")
                        raise RuntimeError("roll back this savepoint")
                _put(staged, path, text)
        want, got = _table_rows(direct), _table_rows(staged_store)
        assert got[1] == want[1]
        assert sorted((h, tf, dl) for h, _, tf, dl in got[0]) == sorted(
            (h, tf, dl) for h, _, tf, dl in want[0]
        )
        with staged_store.read() as r:
            sizes: dict[int, list[int]] = {}
            for term, n in r.conn.execute(
                "SELECT term_hash, n FROM memmw.postings_segments WHERE namespace_id = %s"
                " ORDER BY term_hash, seg",
                (r.namespace_id,),
            ).fetchall():
                sizes.setdefault(int(term), []).append(int(n))
        for term, ns in sizes.items():
            assert all(n == segment_max for n in ns[:-1]), (term, ns)
        direct.close()
        staged_store.close()


def test_a_staged_rebuild_may_write_an_empty_file_twice(store: PostgresStore) -> None:
    with store.write() as w, store.rebuild(w) as staged:
        assert _put(staged, "memory/empty.md", "") == []
        assert _put(staged, "memory/empty.md", "") == []
        assert _put(staged, "memory/empty.md", "Now it has a quokka.\n")
    with store.read() as r:
        assert set(r.file_records("memory")) == {"memory/empty.md"}
        assert len(r.bm25_search([term_hash("quokka")], 5, ["memory"])) == 1


def test_a_failed_staged_rebuild_drops_its_buffered_postings(store: PostgresStore) -> None:
    _fill(store)
    before = _table_rows(store)
    with pytest.raises(RuntimeError), store.write() as w, store.rebuild(w) as staged:
        _put(staged, "memory/new.md", "Never committed.\n")
        raise RuntimeError("fail the rebuild")
    assert _table_rows(store) == before
    with store.write() as w, w.transaction():  # the writer writes directly again
        _put(w, "memory/after.md", "After the failed rebuild: okapi.\n")
    with store.read() as r:
        assert len(r.bm25_search([term_hash("okapi")], 5, ["memory"])) == 1


def test_write_vectors_keeps_the_last_vector_of_a_chunk_and_builds_the_index_after_a_load(
    store: PostgresStore,
) -> None:
    """Vectors written inside a rebuild get their HNSW index when the writer lock is released."""
    from memmw.store.postgres.store import vector_index_name

    with store.write() as w, store.rebuild(w) as staged:
        rowids = _put(staged, "MEMORY.md", NOTES["MEMORY.md"])
        rows = staged.conn.execute(
            "SELECT rowid, hash FROM memmw.chunks WHERE rowid = ANY(%s)", (rowids,)
        ).fetchall()
        first = np.eye(8, dtype="<f4")[0].tobytes()
        last = np.eye(8, dtype="<f4")[1].tobytes()
        written = staged.write_vectors(
            [(r, h, first) for r, h in rows] + [(r, h, last) for r, h in rows]
        )
        assert written == len(rows)
        assert not staged.ensure_vector_index(8)  # a transaction is open: later
    with store.read() as r:
        name = r.conn.execute(
            "SELECT to_regclass(%s)", (f"memmw.{vector_index_name(r.namespace_id, 8)}",)
        ).fetchone()
        assert name is not None and name[0] is not None
        assert {blob for _, blob in r.vector_rows(["memory"])} == {last}


def test_a_snapshot_reads_what_a_search_needs_in_few_round_trips(store: PostgresStore) -> None:
    """A read snapshot starts with one round trip (its BEGIN with every meta row, each
    source's keyword statistics and tombstones and the newest decay date; it also finds a
    dead pooled connection: no liveness check before it); the postings take one statement,
    and none once the process holds the terms' segments at the snapshot's postings
    version; nothing more is asked for the statistics, and everything is what separate
    statements read; a write after the snapshot is seen by the next one."""
    import psycopg

    assert not store.published()
    _fill(store)
    with store.write() as w:
        w.set_identity({"provider": "none"})
        w.set_meta("generation", "7")
    assert store.published()
    hashes = [term_hash(t) for t in query_terms("gateway Alice atlas tea")]
    with store.write() as w:  # not a snapshot: statement by statement
        want_found = {h: p.rowids.tolist() for h, p in w.postings(hashes, ["memory"]).items()}
        want_stats = (w.keyword_stats(["memory"]), w.newest_decay_ts())
        want_meta = {k: w.get_meta(k) for k in ("generation", "epoch", "identity", "nope")}
    with _statements_sent(psycopg.Cursor) as sent, store.read() as r:
        got_meta = {k: r.get_meta(k) for k in ("generation", "epoch", "identity", "nope")}
        metas = len(sent)
        found = r.postings(hashes, ["memory"])
        postings = len(sent)
        got_stats = (r.keyword_stats(["memory"]), r.newest_decay_ts())
        after = len(sent)
    assert got_meta == want_meta and got_meta["generation"] == "7"
    assert got_stats == want_stats and got_stats[0][0] > 0
    assert {h: p.rowids.tolist() for h, p in found.items()} == want_found
    assert len(want_found) == 4
    assert metas == 1 and "BEGIN" in sent[0] and "memmw.meta" in sent[0]
    assert "memmw.source_stats" in sent[0] and "decay_ts" in sent[0]
    assert postings - metas == 1 and after == postings
    with _statements_sent(psycopg.Cursor) as sent, store.read() as r:
        held = r.postings(hashes, ["memory"])
        held_stats = (r.keyword_stats(["memory"]), r.newest_decay_ts())
        asked = len(sent)
    assert asked == 1  # the BEGIN: the segments were held at this postings version
    assert {h: p.rowids.tolist() for h, p in held.items()} == want_found
    assert held_stats == want_stats
    with store.write() as w:
        w.set_meta("generation", "8")
    with store.read() as r:
        assert r.get_meta("generation") == "8"


def test_a_large_rebuild_samples_the_planner_statistics(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rebuild of at least ``ANALYZE_MIN_CHUNKS`` chunks runs VACUUM (ANALYZE) on the
    tables it filled once it committed (searches right after a big load otherwise get
    plans made for the smaller tables autovacuum last sampled); a smaller one leaves them
    alone."""
    from memmw.store.postgres import backend

    def analyzed() -> object:
        with store.write() as w:
            w.conn.execute("SELECT pg_stat_clear_snapshot()")
            row = w.conn.execute(
                "SELECT (last_analyze, last_vacuum) FROM pg_stat_user_tables"
                " WHERE schemaname = 'memmw' AND relname = 'chunks'"
            ).fetchone()
        return row[0] if row else None

    def rebuild() -> None:
        with store.write() as w, store.rebuild(w) as staged:
            for path, text in NOTES.items():
                _replace_note(staged, path, text)

    monkeypatch.setattr(backend, "ANALYZE_MIN_CHUNKS", 10**9)
    before = analyzed()
    rebuild()
    assert analyzed() == before
    monkeypatch.setattr(backend, "ANALYZE_MIN_CHUNKS", 1)
    rebuild()
    after = analyzed()
    assert after is not None and after != before and None not in after  # type: ignore[operator]


def test_a_namespace_seen_once_is_not_asked_for_again(
    pg_database: str, shared_pool: object
) -> None:
    """``exists`` asks the server until the namespace is there, then never again (every
    search asks; nothing deletes a namespace row: a reset empties it)."""
    import psycopg

    store = _store(pg_database, shared_pool)
    assert not store.exists()
    _fill(store)
    assert store.exists()
    with _statements_sent(psycopg.Connection) as sent:
        assert store.exists()
    assert sent == []
    store.reset()
    assert store.exists()


def test_a_pooled_connection_the_server_dropped_is_replaced_without_a_check_per_read(
    pg_database: str,
) -> None:
    """Searches take pooled connections without the pool's liveness round trip: the first
    round trip of a read (its BEGIN) or of ``published`` finds a connection the server
    dropped, and the next one is used, up to a pool of dead ones (the server restarted)."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    name = f"probe-{uuid.uuid4().hex[:8]}"
    store = PostgresStore(make_conninfo(pg_database, application_name=name), pool_size=3,
                          agent_id=f"agent-{uuid.uuid4().hex[:8]}")
    try:
        _fill(store)
        with store.write() as w:
            w.set_identity({"provider": "none"})
        pool = store._ensure_pool()
        # Every connection of the pool opened and back in it.
        with pool.connection(), pool.connection(), pool.connection():
            pass
        for ask in ("read", "published"):
            with psycopg.connect(pg_database, autocommit=True) as admin:
                killed = admin.execute(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                    " WHERE application_name = %s", (name,),
                ).fetchone()
            assert killed is not None and killed[0] == 3
            with _statements_sent(psycopg.Cursor) as sent:
                if ask == "read":
                    with store.read() as r:
                        assert r.get_meta("identity") is not None
                        assert r.chunk_count(["memory"]) > 0
                else:
                    assert store.published()
            # No empty liveness query: the failed first round trips were the checks.
            assert "" not in sent
            with pool.connection(), pool.connection(), pool.connection():
                pass
    finally:
        store.close()


def test_published_is_asked_once_and_a_reset_elsewhere_is_seen_by_the_next_snapshot(
    pg_database: str,
) -> None:
    """Every search asks ``published`` first: once an identity was seen it answers without
    a round trip (the SQLite backend does the same), and a snapshot that finds the identity
    gone (another process reset the index) makes the next call ask the server again."""
    import psycopg

    agent = f"agent-{uuid.uuid4().hex[:8]}"
    store = PostgresStore(pg_database, agent_id=agent)
    elsewhere = PostgresStore(pg_database, agent_id=agent)
    try:
        _fill(store)
        assert not store.published()
        with store.write() as w:
            w.set_identity({"provider": "none"})
        assert store.published()
        with _statements_sent(psycopg.Cursor) as sent:
            assert store.published()
        assert sent == []
        elsewhere.reset()
        with store.read() as r:
            assert r.get_meta("identity") is None
        with _statements_sent(psycopg.Cursor) as sent:
            assert not store.published()
        assert len(sent) == 1
        # This process's own reset forgets it at once.
        with store.write() as w:
            w.set_identity({"provider": "none"})
        assert store.published()
        store.reset()
        assert not store.published()
    finally:
        store.close()
        elsewhere.close()


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    notes=st.lists(
        st.lists(st.sampled_from("zebra tea gateway atlas port lisbon".split()), min_size=1,
                 max_size=30),
        min_size=1, max_size=6,
    ),
    rounds=st.lists(st.sets(st.integers(0, 5)), max_size=4),
    dead_max=st.sampled_from([0, 3, 2048]),
)
def test_a_search_reads_each_terms_live_postings_whatever_the_tombstones(
    pg_database: str,
    shared_pool: object,
    notes: list[list[str]],
    rounds: list[set[int]],
    dead_max: int,
) -> None:
    """The postings a search reads (segments, tombstones and statistics in one statement)
    are the stored postings of live chunks: notes deleted or rewritten, one transaction
    after another, leave tombstones (purged past ``DEAD_MAX``) that every read leaves out;
    the tombstoned rowids a read gets (``source_stats.dead``) are the tombstone rows'."""
    from unittest import mock

    from memmw.store import segments

    store = _store(pg_database, shared_pool)
    with mock.patch.object(segments, "DEAD_MAX", dead_max):
        with store.write() as w, w.transaction():
            for i, words in enumerate(notes):
                _replace_note(w, f"memory/{i}.md", " ".join(words) + "\n")
        for n, gone in enumerate(rounds):
            with store.write() as w, w.transaction():
                for i in sorted(gone):
                    if i < len(notes):
                        if (i + n) % 2:
                            w.delete_file(f"memory/{i}.md", "memory")
                        else:  # (re)written: its old chunks become tombstones too
                            _replace_note(w, f"memory/{i}.md", f"zebra{n} " + " ".join(notes[i]) + "\n")
    with store.read() as r:
        rows = r.conn.execute(
            "SELECT chunk_rowid FROM memmw.postings_dead WHERE namespace_id = %s",
            (r.namespace_id,),
        ).fetchall()
        packed = r.conn.execute(
            "SELECT dead FROM memmw.source_stats WHERE namespace_id = %s AND source = 'memory'",
            (r.namespace_id,),
        ).fetchone()
        held = np.frombuffer(bytes(packed[0]) if packed else b"", dtype=">i8").tolist()
        assert sorted(held) == sorted(int(x) for (x,) in rows)
    want, stats = _table_rows(store)
    with store.read() as r:
        # Every term stored, those of tombstoned chunks only included.
        vocab = [int(h) for (h,) in r.conn.execute(
            "SELECT DISTINCT term_hash FROM memmw.postings_segments WHERE namespace_id = %s",
            (r.namespace_id,),
        ).fetchall()]
        got = r.postings(vocab, ["memory"])
        read = sorted(
            (int(h), int(x), int(t), int(d))
            for h, p in got.items()
            for x, t, d in zip(p.rowids.tolist(), p.tf.tolist(), p.doc_len.tolist(), strict=True)
        )
        assert r.keyword_stats(["memory"]) == (stats[0], float(stats[1]))
    assert read == want
