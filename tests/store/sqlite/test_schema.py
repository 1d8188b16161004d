"""Schema: migrations, version guard, FTS tokenizers, connection pragmas."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from memmw.errors import IndexStoreError
from memmw.store.sqlite.db import BUSY_TIMEOUT_MS, connect, fts5_available, snapshot, transaction
from memmw.store.sqlite.schema import DERIVED_TABLES, MIGRATIONS, fts_ddl, migrate, schema_version

from .conftest import schema_at

TABLES = {
    "meta", "files", "chunks", "embedding_cache", "chunk_vectors", "chunks_fts", "postings",
    "keyword_stats", "chunk_terms",
}


def tables(conn: sqlite3.Connection) -> set[str]:
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
    return {name for (name,) in rows}


def test_connect_sets_wal_busy_timeout_and_foreign_keys(tmp_path: Path) -> None:
    conn = connect(tmp_path / "x.sqlite")
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert conn.execute("PRAGMA busy_timeout").fetchone() == (BUSY_TIMEOUT_MS,)
        assert BUSY_TIMEOUT_MS == 5000
        assert conn.execute("PRAGMA foreign_keys").fetchone() == (1,)
        assert fts5_available(conn)
    finally:
        conn.close()


def test_migrate_fresh_database(tmp_path: Path) -> None:
    conn = connect(tmp_path / "x.sqlite")
    try:
        assert schema_version(conn) == 0
        assert migrate(conn, "unicode61") == len(MIGRATIONS) == 7
        assert schema_version(conn) == 7
        assert tables(conn) >= TABLES
        assert set(DERIVED_TABLES) <= tables(conn)
        sql = conn.execute("SELECT sql FROM sqlite_master WHERE name='chunks_fts'").fetchone()[0]
        assert "unicode61" in sql
        # Idempotent: a second call changes nothing.
        assert migrate(conn, "unicode61") == len(MIGRATIONS)
        assert conn.execute("SELECT COUNT(*) FROM meta WHERE key='schema_version'").fetchone() == (1,)
    finally:
        conn.close()


def test_version_2_index_forgets_its_identity(tmp_path: Path) -> None:
    # An index of the previous schema: per-chunk term blobs, no postings. Its rows cannot
    # serve search, so the migration forgets the identity and the next sync rebuilds.
    conn = connect(tmp_path / "x.sqlite")
    try:
        schema_at(conn, 2, identity="{}", workspace="/ws")
        assert migrate(conn, "unicode61") == len(MIGRATIONS)
        assert {"postings", "postings_dead", "keyword_stats"} <= tables(conn)
        keys = {k for (k,) in conn.execute("SELECT key FROM meta")}
        assert "identity" not in keys and "workspace" in keys
    finally:
        conn.close()


def test_version_3_index_keeps_its_identity(tmp_path: Path) -> None:
    # Migration 4 only adds the postings tombstones: version 3 postings still serve search.
    conn = connect(tmp_path / "x.sqlite")
    try:
        schema_at(conn, 3, identity="{}")
        assert migrate(conn, "unicode61") == len(MIGRATIONS)
        assert "postings_dead" in tables(conn)
        assert conn.execute("SELECT value FROM meta WHERE key='identity'").fetchone() == ("{}",)
    finally:
        conn.close()


def test_trigram_tokenizer(tmp_path: Path) -> None:
    assert "tokenize='trigram'" in fts_ddl("trigram")
    assert "unicode61 remove_diacritics 2" in fts_ddl("unicode61")
    conn = connect(tmp_path / "x.sqlite")
    try:
        migrate(conn, "trigram")
        sql = conn.execute("SELECT sql FROM sqlite_master WHERE name='chunks_fts'").fetchone()[0]
        assert "trigram" in sql
    finally:
        conn.close()


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    conn = connect(tmp_path / "x.sqlite")
    try:
        migrate(conn, "unicode61")
        conn.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
        with pytest.raises(IndexStoreError, match="newer than this memmw supports"):
            migrate(conn, "unicode61")
    finally:
        conn.close()


def test_cascade_deletes_chunks_and_vectors(tmp_path: Path) -> None:
    conn = connect(tmp_path / "x.sqlite")
    try:
        migrate(conn, "unicode61")
        conn.execute(
            "INSERT INTO files(id, path, source, hash, mtime, size) VALUES (1, 'a.md', 'memory', 'h', 0, 1)"
        )
        conn.execute(
            "INSERT INTO chunks(rowid, id, file_id, path, source, start_line, end_line, hash, model,"
            " text, terms, n_terms, updated_at) VALUES (7, 'c', 1, 'a.md', 'memory', 1, 1, 'h',"
            " 'fts-only', 't', x'', 0, 0)"
        )
        conn.execute("INSERT INTO chunk_vectors(chunk_rowid, embedding) VALUES (7, x'00')")
        conn.execute("DELETE FROM files WHERE id=1")
        assert conn.execute("SELECT COUNT(*) FROM chunks").fetchone() == (0,)
        assert conn.execute("SELECT COUNT(*) FROM chunk_vectors").fetchone() == (0,)
    finally:
        conn.close()


def test_files_are_unique_per_path_and_source(tmp_path: Path) -> None:
    conn = connect(tmp_path / "x.sqlite")
    try:
        migrate(conn, "unicode61")
        insert = "INSERT INTO files(path, source, hash, mtime, size) VALUES (?, ?, 'h', 0, 1)"
        conn.execute(insert, ("a.md", "memory"))
        conn.execute(insert, ("a.md", "sessions"))
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute(insert, ("a.md", "memory"))
    finally:
        conn.close()


def test_transaction_rolls_back_on_error(tmp_path: Path) -> None:
    conn = connect(tmp_path / "x.sqlite")
    try:
        migrate(conn, "unicode61")
        with pytest.raises(RuntimeError), transaction(conn):
            conn.execute("INSERT INTO meta(key, value) VALUES ('k', 'v')")
            raise RuntimeError("boom")
        assert conn.execute("SELECT COUNT(*) FROM meta WHERE key='k'").fetchone() == (0,)
        with transaction(conn):
            conn.execute("INSERT INTO meta(key, value) VALUES ('k', 'v')")
        with snapshot(conn):
            assert conn.execute("SELECT value FROM meta WHERE key='k'").fetchone() == ("v",)
    finally:
        conn.close()


def test_readonly_connection(tmp_path: Path) -> None:
    path = tmp_path / "x.sqlite"
    conn = connect(path)
    migrate(conn, "unicode61")
    conn.close()
    ro = connect(path, readonly=True)
    try:
        assert schema_version(ro) == len(MIGRATIONS)
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            ro.execute("INSERT INTO meta(key, value) VALUES ('k', 'v')")
    finally:
        ro.close()


def test_the_newest_dated_memory_is_found_through_an_index(tmp_path: Path) -> None:
    """Every search asks for MAX(decay_ts): the plan must not scan the files table."""
    conn = connect(tmp_path / "x.sqlite")
    try:
        migrate(conn, "unicode61")
        plan = " ".join(
            str(row[-1]) for row in conn.execute("EXPLAIN QUERY PLAN SELECT MAX(decay_ts) FROM files")
        )
        assert "files_decay_ts" in plan and "SCAN" not in plan
    finally:
        conn.close()
