"""Full rebuilds of a SQLite index: in place into a new index, staged over a built one."""

from __future__ import annotations

import glob
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from memmw.errors import IndexStoreError
from memmw.notes.syntax import parse_note
from memmw.store.sqlite.backend import SqliteStore
from memmw.store.sqlite.db import connect
from memmw.store.sqlite.schema import migrate
from memmw.store.sqlite.store import IndexStore
from memmw.store.sqlite.sync import holds_no_index
from memmw.store.terms import term_hash
from memmw.store.vectors import to_blob
from memmw.text.chunking import chunk_text


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    s = SqliteStore(tmp_path / "memory" / "main.sqlite", agent_id="main")
    yield s
    s.close()


def put(writer: IndexStore, path: str, text: str) -> None:
    writer.replace_file(
        path=path, source="memory", file_hash=f"h-{text}", mtime=0.0, size=len(text),
        decay_ts=None, chunks=chunk_text(text, tokens=40, overlap=0), model="fts-only",
    )


def files(store: SqliteStore) -> set[str]:
    with store.read() as reader:
        return set(reader.file_records("memory"))


def staged_files(store: SqliteStore) -> list[str]:
    return glob.glob(glob.escape(str(store.db_path)) + ".tmp-*")


def meta_keys(store: SqliteStore) -> set[str]:
    with store.read() as reader:
        return {k for (k,) in reader.conn.execute("SELECT key FROM meta")}


def test_a_first_build_is_written_in_place_and_seen_only_once_it_commits(
    store: SqliteStore, tmp_path: Path
) -> None:
    with store.write() as writer, writer.transaction():  # kept across rebuilds
        writer.put_embeddings("fake", "m", "k", {"h": to_blob([1.0, 0.0])})
        writer.bump_activation(["f:abc"], 0.5)
        writer.set_meta("scan_issues", "[]")  # not kept
    with store.write() as writer, store.rebuild(writer) as built:
        with built.transaction():
            put(built, "MEMORY.md", "The gateway runs on port 8080.\n")
            built.bump_generation()
        assert staged_files(store) == []  # no temporary copy
        assert files(store) == set()  # readers see the old, empty index
    assert files(store) == {"MEMORY.md"}
    with store.read() as reader:
        assert reader.cached_embeddings("fake", "m", "k", ["h"]).keys() == {"h"}
        assert [k for k, _a, _l in reader.graph_rows().activation] == ["f:abc"]
        gateway = reader.postings([term_hash("gateway")], ["memory"])[term_hash("gateway")]
        assert list(gateway.rowids) == reader.chunk_rowids(["memory"])
        in_place = meta_keys(store)
    # A staged rebuild over the built index starts from the same meta.
    with store.write() as writer, store.rebuild(writer) as staged, staged.transaction():
        put(staged, "MEMORY.md", "The gateway moved.\n")
        staged.bump_generation()
    assert meta_keys(store) == in_place


def test_a_failed_first_build_leaves_the_index_empty_and_the_next_one_works(
    store: SqliteStore,
) -> None:
    with pytest.raises(RuntimeError), store.write() as writer, store.rebuild(writer) as built:
        with built.transaction():
            put(built, "MEMORY.md", "half a build\n")
            built.bump_generation()
        raise RuntimeError("the build failed after its transaction")
    assert files(store) == set()
    with store.read() as reader:
        assert reader.generation() == 0 and reader.keyword_stats(["memory"]) == (0, 0.0)
    with store.write() as writer, store.rebuild(writer) as built, built.transaction():
        put(built, "MEMORY.md", "The gateway runs on port 8080.\n")
    assert files(store) == {"MEMORY.md"}
    with store.read() as reader:
        assert reader.keyword_stats(["memory"])[0] == 1
        assert reader.postings([term_hash("half")], ["memory"]) == {}


def test_a_rolled_back_write_inside_a_first_build_commits_nothing(store: SqliteStore) -> None:
    """A bulk buffer cannot be cut back to a savepoint: the build refuses to commit."""
    with store.write() as writer:
        with pytest.raises(IndexStoreError, match="rolled back"), store.rebuild(writer) as built:
            with built.transaction():
                put(built, "MEMORY.md", "kept until the failure below\n")
            with pytest.raises(RuntimeError), built.transaction():
                put(built, "memory/bad.md", "never written\n")
                raise RuntimeError("one file failed and the caller went on")
        # The writer goes back to its own buffer and writes normally.
        with writer.transaction():
            put(writer, "memory/after.md", "the gateway after\n")
    assert files(store) == {"memory/after.md"}
    with store.read() as reader:
        assert reader.postings([term_hash("kept")], ["memory"]) == {}
        assert reader.keyword_stats(["memory"])[0] == 1


def test_holds_no_index_counts_only_what_a_rebuild_replaces(tmp_path: Path) -> None:
    conn = connect(tmp_path / "x.sqlite")
    migrate(conn, "unicode61")
    writer = IndexStore(conn)
    writer.put_embeddings("fake", "m", "k", {"h": to_blob([1.0, 0.0])})
    writer.bump_activation(["f:abc"], 0.5)
    writer.bump_generation()
    assert holds_no_index(conn)
    # A table this module cannot read (sqlite-vec's, without the extension) may hold rows.
    conn.execute("PRAGMA writable_schema=ON")
    conn.execute(
        "INSERT INTO sqlite_master VALUES "
        "('table', 'chunks_vec', 'chunks_vec', 0, 'CREATE VIRTUAL TABLE chunks_vec USING vec0(v)')"
    )
    conn.close()
    conn = connect(tmp_path / "x.sqlite")
    assert not holds_no_index(conn)
    conn.close()


GRAPH_NOTE = "## Alice\n- city: Berlin\n- knows: [[Bob]]\n"


def _built(path: Path) -> sqlite3.Connection:
    conn = connect(path)
    migrate(conn, "unicode61")
    writer = IndexStore(conn, fts=True)
    with writer.transaction():
        put(writer, "MEMORY.md", GRAPH_NOTE)
        writer.replace_note_graph(
            path="MEMORY.md", source="memory", note=parse_note(GRAPH_NOTE, "MEMORY.md"), fresh=True
        )
    return conn


def _rebuilt_tables(conn: sqlite3.Connection) -> list[str]:
    return [n for (n,) in conn.execute(
        "SELECT name FROM sqlite_master WHERE type='table' AND name NOT GLOB 'sqlite_*'"
        " AND name NOT GLOB 'chunks_fts_*' AND name NOT IN ('meta', 'embedding_cache',"
        " 'graph_activation')"
    )]


def _with_rows(conn: sqlite3.Connection) -> list[str]:
    return [n for n in _rebuilt_tables(conn) if conn.execute(f'SELECT 1 FROM "{n}"').fetchone()]


def test_rows_in_any_rebuilt_table_make_a_built_index(tmp_path: Path) -> None:
    """Each table a build fills, left alone with rows, makes ``holds_no_index`` false."""
    tables = _with_rows(_built(tmp_path / "probe.sqlite"))
    assert {"files", "chunks", "postings", "keyword_stats", "chunk_terms", "chunks_fts",
            "graph_entities", "graph_facts"} <= set(tables)
    for i, table in enumerate(tables):
        conn = _built(tmp_path / f"{i}.sqlite")
        conn.execute("PRAGMA foreign_keys=OFF")
        for name in _rebuilt_tables(conn) * 2:  # twice: deleting chunks marks vector blocks
            if name != table:
                conn.execute(f'DELETE FROM "{name}"')
        assert _with_rows(conn) == [table]
        assert not holds_no_index(conn), table
        for name in _rebuilt_tables(conn) * 2:
            conn.execute(f'DELETE FROM "{name}"')
        assert holds_no_index(conn), table
        conn.close()


_CRASH = """
import os, sys
from pathlib import Path
from memmw.store.sqlite.backend import SqliteStore
from memmw.text.chunking import chunk_text

store = SqliteStore(Path(sys.argv[1]), agent_id="main")
with store.write() as writer, store.rebuild(writer) as built, built.transaction():
    built.conn.execute("PRAGMA cache_size=8")  # spill uncommitted pages into the WAL
    for i in range(300):
        text = f"note {i} about the gateway and zeppelin number {i}\\n" * 20
        built.replace_file(path=f"memory/{i}.md", source="memory", file_hash=str(i), mtime=0.0,
                           size=len(text), decay_ts=None, model="fts-only",
                           chunks=chunk_text(text, tokens=40, overlap=0))
    built.flush_postings()
    assert os.path.getsize(sys.argv[1] + "-wal") > 200_000
    os._exit(9)  # killed before the build commits
"""


def test_a_first_build_killed_before_it_commits_leaves_the_empty_index(
    store: SqliteStore, tmp_path: Path
) -> None:
    with store.write() as writer, writer.transaction():
        writer.put_embeddings("fake", "m", "k", {"h": to_blob([1.0, 0.0])})
    store.close()
    script = tmp_path / "crash.py"
    script.write_text(_CRASH, encoding="utf-8")
    done = subprocess.run([sys.executable, str(script), str(store.db_path)], check=False,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 9, done.stderr
    reopened = SqliteStore(store.db_path, agent_id="main")
    try:
        assert reopened.health().ok
        assert files(reopened) == set()
        with reopened.read() as reader:
            assert reader.cached_embeddings("fake", "m", "k", ["h"]).keys() == {"h"}
            assert holds_no_index(reader.conn)
        with reopened.write() as writer, reopened.rebuild(writer) as built, built.transaction():
            put(built, "MEMORY.md", "The gateway runs on port 8080.\n")
        assert files(reopened) == {"MEMORY.md"}
    finally:
        reopened.close()
