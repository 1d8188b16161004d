"""Vectors in SQLite: stored vectors, pending chunks and the embedding cache (SQL only)."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Mapping, Sequence

import numpy as np

from memmw.store.vectors import (
    VectorMatrix,
)

#: Cache rows looked up per query (the reference's 400).
CACHE_LOOKUP_BATCH = 400


def vector_rows(conn: sqlite3.Connection, sources: Sequence[str]) -> list[tuple[int, bytes]]:
    """``(rowid, blob)`` of every stored vector of ``sources``, by rowid."""
    marks = ",".join("?" * len(sources))
    rows: list[tuple[int, bytes]] = conn.execute(
        "SELECT v.chunk_rowid, v.embedding FROM chunk_vectors v JOIN chunks c"
        f" ON c.rowid = v.chunk_rowid WHERE c.source IN ({marks}) ORDER BY v.chunk_rowid",
        tuple(sources),
    ).fetchall()
    return rows


#: Rowids per vector block (``rowid >> BLOCK_BITS``; the triggers of migration 6 use 9).
BLOCK_BITS = 9


def load_matrix(conn: sqlite3.Connection, sources: Sequence[str], dims: int) -> VectorMatrix:
    """Every stored ``dims``-long vector of ``sources``, from the blocks.

    A block still marked in ``vector_dirty`` (written since the last rebuild of the
    blocks) is read from ``chunk_vectors`` instead, so the result always equals
    :func:`vector_rows` filtered to ``dims``.
    """
    marks = ",".join("?" * len(sources))
    dirty = {b for (b,) in conn.execute("SELECT block FROM vector_dirty")}
    found: list[tuple[int, np.ndarray, np.ndarray]] = []  # (block, rowids, vectors)
    for block, rowids, data in conn.execute(
        f"SELECT block, rowids, data FROM vector_blocks WHERE source IN ({marks}) AND dims = ?",
        (*sources, dims),
    ):
        if block not in dirty:
            found.append(
                (block, np.frombuffer(rowids, dtype="<i8"),
                 np.frombuffer(data, dtype="<f4").reshape(-1, dims))
            )  # fmt: skip
    for block in dirty:
        groups = _block_vectors(conn, block)
        rows = sorted(row for s in sources for row in groups.get((s, dims), []))
        if rows:
            ids = np.fromiter((r for r, _ in rows), dtype=np.int64, count=len(rows))
            joined = b"".join(blob for _, blob in rows)
            found.append((block, ids, np.frombuffer(joined, dtype="<f4").reshape(-1, dims)))
    if not found:
        return VectorMatrix.from_arrays(np.zeros(0, np.int64), np.zeros((0, dims), np.float32))
    found.sort(key=lambda part: part[0])  # blocks are rowid ranges: in order, rowids ascend
    rowids = np.concatenate([ids for _, ids, _ in found]).astype(np.int64)
    matrix = np.concatenate([vectors for _, _, vectors in found])
    if len(sources) > 1:  # blocks of several sources share block numbers
        order = np.argsort(rowids, kind="stable")
        rowids, matrix = rowids[order], matrix[order]
    return VectorMatrix.from_arrays(rowids, matrix)


def _block_vectors(
    conn: sqlite3.Connection, block: int
) -> dict[tuple[str, int], list[tuple[int, bytes]]]:
    """``{(source, dims): [(rowid, blob), ...]}`` of one block, by rowid, from chunk_vectors."""
    groups: dict[tuple[str, int], list[tuple[int, bytes]]] = {}
    for source, rowid, blob in conn.execute(
        # CROSS JOIN: walk the block's rowid range, never the chunks of a whole source.
        "SELECT c.source, v.chunk_rowid, v.embedding FROM chunk_vectors v CROSS JOIN chunks c"
        " ON c.rowid = v.chunk_rowid WHERE v.chunk_rowid >= ? AND v.chunk_rowid < ?"
        " ORDER BY v.chunk_rowid",
        (block << BLOCK_BITS, (block + 1) << BLOCK_BITS),
    ):
        groups.setdefault((source, len(blob) // 4), []).append((rowid, blob))
    return groups


def flush_blocks(conn: sqlite3.Connection, *, keep_tail: bool = True) -> None:
    """Rebuild the vector blocks marked dirty (inside the caller's write transaction).

    ``keep_tail`` leaves the highest marked block as it is: a backfill fills blocks in
    rowid order a batch at a time, and rewriting the block it is filling after every
    batch would write it over and over. It is rebuilt once writes move past it (readers
    read that one block from ``chunk_vectors`` meanwhile).
    """
    dirty = [b for (b,) in conn.execute("SELECT block FROM vector_dirty ORDER BY block")]
    if keep_tail:
        dirty = dirty[:-1]
    for block in dirty:
        conn.execute("DELETE FROM vector_blocks WHERE block = ?", (block,))
        groups = _block_vectors(conn, block)
        conn.executemany(
            "INSERT INTO vector_blocks(source, block, dims, rowids, data) VALUES (?,?,?,?,?)",
            [
                (
                    source,
                    block,
                    dims,
                    np.asarray([r for r, _ in rows], dtype="<i8").tobytes(),
                    b"".join(blob for _, blob in rows),
                )
                for (source, dims), rows in groups.items()
            ],
        )
        conn.execute("DELETE FROM vector_dirty WHERE block = ?", (block,))


def pending_count(conn: sqlite3.Connection) -> int:
    """Chunks that have no vector yet."""
    row = conn.execute(
        "SELECT COUNT(*) FROM chunks c LEFT JOIN chunk_vectors v ON v.chunk_rowid = c.rowid"
        " WHERE v.chunk_rowid IS NULL"
    ).fetchone()
    return int(row[0])


def pending_chunks(conn: sqlite3.Connection, after: int, limit: int) -> list[tuple[int, str, str]]:
    """``(rowid, hash, text)`` of chunks without a vector past ``after``, by rowid."""
    rows: list[tuple[int, str, str]] = conn.execute(
        "SELECT c.rowid, c.hash, c.text FROM chunks c LEFT JOIN chunk_vectors v"
        " ON v.chunk_rowid = c.rowid WHERE v.chunk_rowid IS NULL AND c.rowid > ?"
        " ORDER BY c.rowid LIMIT ?",
        (after, limit),
    ).fetchall()
    return rows


def cached_embeddings(
    conn: sqlite3.Connection, provider: str, model: str, key: str, hashes: Sequence[str]
) -> dict[str, bytes]:
    """``{hash: blob}`` of the cache rows of this provider, model and endpoint."""
    found: dict[str, bytes] = {}
    hashes = list(dict.fromkeys(hashes))
    for start in range(0, len(hashes), CACHE_LOOKUP_BATCH):
        part = hashes[start : start + CACHE_LOOKUP_BATCH]
        marks = ",".join("?" * len(part))
        for h, blob in conn.execute(
            "SELECT hash, embedding FROM embedding_cache WHERE provider=? AND model=?"
            f" AND provider_key=? AND hash IN ({marks})",
            (provider, model, key, *part),
        ):
            found[h] = blob
    return found


def put_embeddings(
    conn: sqlite3.Connection, provider: str, model: str, key: str, vectors: Mapping[str, bytes]
) -> None:
    """Insert or replace cache rows (inside the caller's transaction)."""
    now = time.time()
    conn.executemany(
        "INSERT OR REPLACE INTO embedding_cache VALUES (?,?,?,?,?,?,?)",
        [(provider, model, key, h, len(b) // 4, b, now) for h, b in vectors.items()],
    )


def write_vectors(conn: sqlite3.Connection, rows: Sequence[tuple[int, str, bytes]]) -> int:
    """Store vectors of chunks that still exist with the same hash; returns how many."""
    written = 0
    for rowid, digest, blob in rows:
        # The chunk may have been replaced by a sync meanwhile: write only if it still
        # exists with the same text.
        cur = conn.execute(
            "INSERT OR REPLACE INTO chunk_vectors(chunk_rowid, embedding)"
            " SELECT rowid, ? FROM chunks WHERE rowid=? AND hash=?",
            (blob, rowid, digest),
        )
        written += max(cur.rowcount, 0)
    return written


def bump_vector_generation(conn: sqlite3.Connection) -> int:
    """Increment the ``vector_generation`` meta counter; returns the new value."""
    gen = conn.execute("SELECT value FROM meta WHERE key='vector_generation'").fetchone()
    value = int(gen[0]) + 1 if gen else 1
    conn.execute(
        "INSERT OR REPLACE INTO meta(key, value) VALUES ('vector_generation', ?)", (str(value),)
    )
    return value


def cache_count(conn: sqlite3.Connection) -> int:
    """Rows in the embedding cache."""
    return int(conn.execute("SELECT COUNT(*) FROM embedding_cache").fetchone()[0])


def prune_cache(conn: sqlite3.Connection, max_entries: int, batch: int) -> int:
    """Delete up to ``batch`` oldest rows above ``max_entries``; returns how many."""
    excess = cache_count(conn) - max_entries
    if excess <= 0:
        return 0
    cur = conn.execute(
        "DELETE FROM embedding_cache WHERE rowid IN (SELECT rowid FROM"
        " embedding_cache ORDER BY updated_at LIMIT ?)",
        (min(excess, batch),),
    )
    return max(cur.rowcount, 0)


def vector_bytes_by_source(conn: sqlite3.Connection) -> dict[str, tuple[int, int]]:
    """``{source: (bytes of chunk text, bytes of vectors)}``."""
    rows = conn.execute(
        "SELECT c.source, SUM(LENGTH(c.text)), SUM(LENGTH(v.embedding))"
        " FROM chunks c LEFT JOIN chunk_vectors v ON v.chunk_rowid = c.rowid"
        " GROUP BY c.source"
    ).fetchall()
    return {src: (int(tb or 0), int(eb or 0)) for src, tb, eb in rows}


def vector_count(conn: sqlite3.Connection) -> int:
    """Stored vectors."""
    return int(conn.execute("SELECT COUNT(*) FROM chunk_vectors").fetchone()[0])


def identity_json(identity: Mapping[str, object]) -> str:
    """The identity as stored (sorted keys)."""
    return json.dumps(dict(identity), sort_keys=True)
