"""Bulk writes of the PostgreSQL store: vectors by COPY."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import psycopg

#: Temporary (session-local, never logged) table the vectors of one write are copied into.
VECTOR_STAGE = "memmw_vector_stage"


def copy_vectors(
    conn: psycopg.Connection[Any], namespace_id: int, rows: Sequence[tuple[int, str, bytes]]
) -> int:
    """Store ``(rowid, chunk hash, blob)`` where the chunk still has that hash; returns how many.

    One binary COPY into a temporary table and one statement that keeps the rows whose
    chunk still has the hash (a sync may have replaced it meanwhile), instead of one
    statement per vector. Call inside a transaction.
    """
    from pgvector import Vector

    # The last vector of a chunk wins (one statement may not update a row twice).
    latest = {int(rowid): (digest, blob) for rowid, digest, blob in rows}
    conn.execute(
        f"CREATE TEMPORARY TABLE IF NOT EXISTS {VECTOR_STAGE}"
        " (chunk_rowid bigint NOT NULL, hash text NOT NULL, dims integer NOT NULL,"
        " embedding vector NOT NULL)"
    )
    # TRUNCATE, not ON COMMIT: several writes may share one outer transaction.
    conn.execute(f"TRUNCATE {VECTOR_STAGE}")
    with conn.cursor() as cur, cur.copy(
        f"COPY {VECTOR_STAGE} (chunk_rowid, hash, dims, embedding) FROM STDIN (FORMAT BINARY)"
    ) as copy:
        copy.set_types(["int8", "text", "int4", "vector"])
        for rowid, (digest, blob) in latest.items():
            copy.write_row(
                (rowid, digest, len(blob) // 4, Vector(np.frombuffer(blob, dtype="<f4")))
            )
    cur2 = conn.execute(
        "INSERT INTO memmw.chunk_vectors (chunk_rowid, namespace_id, source, dims, embedding)"
        f" SELECT c.rowid, c.namespace_id, c.source, s.dims, s.embedding FROM {VECTOR_STAGE} s"
        " JOIN memmw.chunks c ON c.rowid = s.chunk_rowid AND c.hash = s.hash"
        " WHERE c.namespace_id = %s"
        " ON CONFLICT (chunk_rowid) DO UPDATE SET embedding = excluded.embedding,"
        " dims = excluded.dims",
        (namespace_id,),
    )
    return max(cur2.rowcount, 0)
