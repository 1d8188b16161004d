"""The SQLite store's writes: replacing a file keeps the chunks it still has."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from memmw.store.sqlite import db
from memmw.store.sqlite.db import connect, transaction
from memmw.store.sqlite.schema import migrate
from memmw.store.sqlite.store import IndexStore
from memmw.store.terms import term_hash
from memmw.text.chunking import Chunk, chunk_text


def open_store(path: Path) -> IndexStore:
    conn = connect(path)
    migrate(conn, "unicode61")
    return IndexStore(conn, fts=True)


def write(store: IndexStore, path: str, chunks: list[Chunk]) -> list[int]:
    with store.transaction():
        return store.replace_file(
            path=path, source="memory", file_hash=str(hash(tuple(chunks))), mtime=0.0, size=1,
            decay_ts=None, chunks=chunks, model="fts-only",
        )


def rows(store: IndexStore) -> list[tuple[object, ...]]:
    """Every chunk as stored, by place (rowids and timestamps differ between histories)."""
    return sorted(
        store.conn.execute(
            "SELECT c.id, c.path, c.start_line, c.end_line, c.hash, c.text, c.line_map,"
            " c.importance, c.n_terms, t.hashes, f.hash FROM chunks c"
            " JOIN chunk_terms t ON t.chunk_rowid=c.rowid JOIN files f ON f.id=c.file_id"
        )
    )


NOTE = "".join(f"- line {i} about the zeppelin hangar and tea number {i}\n" for i in range(40))


def test_a_grown_note_keeps_the_rows_of_its_unchanged_chunks(tmp_path: Path) -> None:
    store = open_store(tmp_path / "live.sqlite")
    first = write(store, "memory/a.md", chunk_text(NOTE, tokens=40, overlap=8))
    grown = chunk_text(NOTE + "- one more line about basil\n", tokens=40, overlap=8)
    second = write(store, "memory/a.md", grown)
    # All but the last chunk are unchanged: same rowids; the last one is new.
    assert second[:-1] == first[:-1]
    assert second[-1] > max(first)
    assert store.chunk_rowids(["memory"]) == sorted(second)
    # The same rows, postings and statistics as writing the grown note from scratch.
    clean = open_store(tmp_path / "clean.sqlite")
    write(clean, "memory/a.md", grown)
    assert rows(store) == rows(clean)
    words = [term_hash(w) for w in ("zeppelin", "basil", "number", "39")]
    got, want = store.postings(words, ["memory"]), clean.postings(words, ["memory"])
    assert got.keys() == want.keys()
    for h in got:
        assert len(got[h]) == len(want[h])
        assert got[h].tf.tolist() == want[h].tf.tolist()
        assert got[h].doc_len.tolist() == want[h].doc_len.tolist()
    assert store.keyword_stats(["memory"]) == clean.keyword_stats(["memory"])
    # The old last chunk is gone from the full-text table too.
    assert store.conn.execute("SELECT COUNT(*) FROM chunks_fts").fetchone() == (len(second),)


def test_a_chunk_whose_importance_or_line_map_changed_is_rewritten(tmp_path: Path) -> None:
    store = open_store(tmp_path / "live.sqlite")
    plain = Chunk(start_line=1, end_line=1, text="- tea", hash="h")
    (first,) = write(store, "MEMORY.md", [plain])
    important = Chunk(start_line=1, end_line=1, text="- tea", hash="h", importance=9)
    (second,) = write(store, "MEMORY.md", [important])
    assert second != first
    assert store.chunks([second])[second].importance == 9
    mapped = Chunk(start_line=1, end_line=1, text="- tea", hash="h", importance=9, line_map=(1,))
    (third,) = write(store, "MEMORY.md", [mapped])
    assert third != second
    assert store.chunks([third])[third].line_map == (1,)
    assert store.chunk_rowids(["memory"]) == [third]


def test_kept_chunks_keep_their_vectors(tmp_path: Path) -> None:
    store = open_store(tmp_path / "live.sqlite")
    first = write(store, "memory/a.md", chunk_text(NOTE, tokens=40, overlap=8))
    blob = np.asarray([1.0, 0.0], dtype=np.float32).tobytes()
    with transaction(store.conn):
        hashes = dict(store.conn.execute("SELECT rowid, hash FROM chunks"))
        assert store.write_vectors([(r, hashes[r], blob) for r in first]) == len(first)
    second = write(store, "memory/a.md", chunk_text(NOTE + "- basil\n", tokens=40, overlap=8))
    assert [r for r, _ in store.vector_rows(["memory"])] == first[:-1]
    assert store.pending_count() == 1 and second[-1] not in first


def _page_size(path: Path) -> int:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return int(conn.execute("PRAGMA page_size").fetchone()[0])


@pytest.mark.parametrize("created_with", [4096, 8192, db.PAGE_SIZE])
def test_a_rebuild_keeps_the_page_size_the_index_was_created_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, created_with: int
) -> None:
    """A new index file gets ``PAGE_SIZE`` pages; a file created with other pages (an older
    memmw) keeps them, as a WAL file must, and a full rebuild, staged with that page
    size, still copies over it with the rebuilt rows."""
    from memmw.store.sqlite.backend import SqliteStore

    path = tmp_path / "memory" / "main.sqlite"
    monkeypatch.setattr(db, "PAGE_SIZE", created_with)
    store = SqliteStore(path, agent_id="main")
    with store.write() as writer:
        write(writer, "memory/old.md", chunk_text(NOTE, tokens=40, overlap=8))
    store.close()
    monkeypatch.undo()
    assert _page_size(path) == created_with
    store = SqliteStore(path, agent_id="main")
    try:
        with store.write() as writer, store.rebuild(writer) as staged:
            write(staged, "memory/new.md", chunk_text("- the basil moved to the attic\n",
                                                      tokens=40, overlap=8))
        with store.read() as reader:
            assert set(reader.file_records("memory")) == {"memory/new.md"}
            basil = term_hash("basil")
            assert len(reader.postings([basil], ["memory"])[basil].rowids) == 1
    finally:
        store.close()
    assert _page_size(path) == created_with


def test_a_new_index_file_gets_pages_of_page_size(tmp_path: Path) -> None:
    store = open_store(tmp_path / "new.sqlite")
    store.conn.close()
    assert _page_size(tmp_path / "new.sqlite") == db.PAGE_SIZE == 16384
