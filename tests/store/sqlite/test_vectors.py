"""Vector blocks: what a fresh process reads equals the per-chunk vectors, whatever the history."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memmw.store.sqlite import vectors as vsql
from memmw.store.sqlite.db import connect, transaction
from memmw.store.sqlite.schema import migrate, statements
from memmw.store.sqlite.store import IndexStore
from memmw.store.vectors import VectorMatrix
from memmw.text.chunking import chunk_text

from .conftest import schema_at

DIMS = 4


def open_store(path: Path) -> IndexStore:
    conn = connect(path)
    migrate(conn, "unicode61")
    return IndexStore(conn, fts=False)


def write(store: IndexStore, path: str, lines: int, source: str) -> list[int]:
    text = "\n".join(f"line {i} of {path}" for i in range(lines))
    return store.replace_file(
        path=path, source=source, file_hash=str(hash(text)), mtime=0.0, size=len(text),
        decay_ts=None, chunks=chunk_text(text, tokens=12, overlap=0), model="fts-only",
    )  # fmt: skip


def unit(seed: int, dims: int = DIMS) -> bytes:
    v = np.random.default_rng(seed).normal(size=dims)
    return (v / np.linalg.norm(v)).astype("<f4").tobytes()


def vectorise(store: IndexStore, rowids: list[int], seed: int, dims: int = DIMS) -> None:
    hashes = dict(store.conn.execute("SELECT rowid, hash FROM chunks").fetchall())
    store.write_vectors([(r, hashes[r], unit(seed + r, dims)) for r in rowids if r in hashes])


def assert_blocks_equal_rows(store: IndexStore) -> None:
    for sources in (["memory"], ["sessions"], ["memory", "sessions"]):
        want = VectorMatrix(store.vector_rows(sources), DIMS)
        got = store.vector_matrix(sources, DIMS)
        assert got.rowids.tolist() == want.rowids.tolist()
        assert got.matrix.tobytes() == want.matrix.tobytes()


op = st.one_of(
    st.tuples(st.just("write"), st.integers(0, 5), st.integers(1, 40), st.booleans()),
    st.tuples(st.just("delete"), st.integers(0, 5)),
    st.tuples(st.just("vectors"), st.integers(0, 5), st.integers(0, 3)),
    st.tuples(st.just("odd dims"), st.integers(0, 5)),
    st.tuples(st.just("raw"), st.integers(0, 5)),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op, min_size=1, max_size=25), st.sampled_from([1, 3, 9]))
def test_blocks_equal_the_stored_vectors_after_any_history(ops: list[tuple], bits: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(Path(tmp) / "x.sqlite")
        try:
            # Small blocks so a few notes span many of them (the triggers use 9 bits:
            # other sizes only change how often a block is shared, not what is read).
            for name in ("chunk_vectors_added", "chunk_vectors_changed", "chunk_vectors_removed",
                         "chunks_removed", "chunks_moved"):  # fmt: skip
                sql = store.conn.execute(
                    "SELECT sql FROM sqlite_master WHERE name = ?", (name,)
                ).fetchone()[0]
                store.conn.execute(f"DROP TRIGGER {name}")
                store.conn.execute(sql.replace(">> 9", f">> {bits}"))
            vsql.BLOCK_BITS, saved = bits, vsql.BLOCK_BITS
            try:
                for i, step in enumerate(ops):
                    path = f"memory/{step[1]}.md"
                    with store.transaction():
                        if step[0] == "write":
                            source = "sessions" if step[3] else "memory"
                            store.delete_file(path, "memory")
                            store.delete_file(path, "sessions")
                            rowids = write(store, path, step[2], source)
                            vectorise(store, rowids[::2], seed=i)
                        elif step[0] == "delete":
                            store.delete_file(path, "memory")
                            store.delete_file(path, "sessions")
                        elif step[0] == "vectors":
                            ids = [r for (r,) in store.conn.execute(
                                "SELECT rowid FROM chunks WHERE path = ?", (path,))]  # fmt: skip
                            vectorise(store, ids[step[2] :], seed=100 * i)
                        elif step[0] == "odd dims":  # another model's vectors: not read
                            ids = [r for (r,) in store.conn.execute(
                                "SELECT rowid FROM chunks WHERE path = ?", (path,))]  # fmt: skip
                            vectorise(store, ids[:1], seed=i, dims=DIMS + 2)
                    if step[0] == "raw":
                        # A write outside the store's transactions (no block rebuild):
                        # the marked blocks are read from chunk_vectors meanwhile.
                        store.conn.execute(
                            "DELETE FROM chunk_vectors WHERE chunk_rowid IN"
                            " (SELECT rowid FROM chunks WHERE path = ?)",
                            (path,),
                        )
                    assert_blocks_equal_rows(store)
                with store.transaction():
                    pass
                assert_blocks_equal_rows(store)
            finally:
                vsql.BLOCK_BITS = saved
        finally:
            store.conn.close()


def test_a_transaction_leaves_only_the_newest_block_marked(tmp_path: Path) -> None:
    store = open_store(tmp_path / "x.sqlite")
    try:
        with store.transaction():
            rowids = write(store, "memory/a.md", 4000, "memory")
            vectorise(store, rowids, seed=1)
        assert len(rowids) > 1 << vsql.BLOCK_BITS
        dirty = [b for (b,) in store.conn.execute("SELECT block FROM vector_dirty")]
        assert dirty == [max(rowids) >> vsql.BLOCK_BITS]
        (blocks,) = store.conn.execute("SELECT COUNT(*) FROM vector_blocks").fetchone()
        assert blocks == len({r >> vsql.BLOCK_BITS for r in rowids}) - 1
        assert_blocks_equal_rows(store)
    finally:
        store.conn.close()


def test_an_index_of_schema_5_reads_its_vectors_until_the_blocks_are_built(
    tmp_path: Path,
) -> None:
    conn = connect(tmp_path / "x.sqlite")
    schema_at(conn, 5)
    old = IndexStore(conn, fts=False)
    with transaction(conn):  # as the code of schema 5 wrote: no blocks
        rowids = write(old, "memory/a.md", 3000, "memory")
        vectorise(old, rowids, seed=7)
        old.flush_postings()
    conn.close()
    store = open_store(tmp_path / "x.sqlite")  # migration 6 marks every block
    try:
        assert store.conn.execute("SELECT COUNT(*) FROM vector_blocks").fetchone() == (0,)
        assert_blocks_equal_rows(store)
        with store.transaction():
            pass
        assert store.conn.execute("SELECT COUNT(*) FROM vector_blocks").fetchone()[0] > 0
        assert_blocks_equal_rows(store)
    finally:
        store.conn.close()


def test_statements_keep_trigger_bodies_whole() -> None:
    script = (
        "CREATE TABLE a (x); CREATE TRIGGER t AFTER INSERT ON a BEGIN\n"
        "  INSERT INTO a VALUES (1); INSERT INTO a VALUES (2);\nEND;\nSELECT 1\n"
    )
    assert [s.split()[0:2] for s in statements(script)] == [
        ["CREATE", "TABLE"], ["CREATE", "TRIGGER"], ["SELECT", "1"],
    ]  # fmt: skip


def test_a_backfill_in_small_batches_writes_each_block_once(tmp_path: Path) -> None:
    store = open_store(tmp_path / "x.sqlite")
    try:
        with store.transaction():
            rowids = write(store, "memory/a.md", 4000, "memory")
        store.conn.execute("CREATE TEMP TABLE written (block INTEGER)")
        store.conn.execute(
            "CREATE TEMP TRIGGER count_writes AFTER INSERT ON vector_blocks"
            " BEGIN INSERT INTO written VALUES (NEW.block); END"
        )
        for start in range(0, len(rowids), 32):  # as the backfill writes: 32 per batch
            with store.transaction():
                vectorise(store, rowids[start : start + 32], seed=3)
        blocks = sorted({r >> vsql.BLOCK_BITS for r in rowids})
        written = [b for (b,) in store.conn.execute("SELECT block FROM written ORDER BY block")]
        assert written == blocks[:-1]  # each once; the last waits for a later write
        assert_blocks_equal_rows(store)
    finally:
        store.conn.close()
