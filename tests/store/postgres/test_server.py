"""The PostgreSQL + pgvector test server: reachable, pgvector loaded, HNSW cosine KNN works."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.postgres


def _unit_rows(count: int, dim: int, seed: int) -> np.ndarray:
    rows = np.random.default_rng(seed).standard_normal((count, dim)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_each_module_gets_its_own_empty_database(pg_dsn: str, pg_database: str) -> None:
    import psycopg

    with psycopg.connect(pg_database) as conn:
        name = conn.execute("SELECT current_database()").fetchone()
        tables = conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchone()
        extension = conn.execute(
            "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
        ).fetchone()
    with psycopg.connect(pg_dsn) as conn:
        admin_name = conn.execute("SELECT current_database()").fetchone()
    assert name is not None and admin_name is not None
    assert name[0].startswith("memmw_test_") and name[0] != admin_name[0]
    assert tables == (0,)
    assert extension is not None


def test_hnsw_cosine_knn_agrees_with_brute_force(pg_database: str) -> None:
    import psycopg
    from pgvector.psycopg import register_vector

    dim, count = 64, 3000
    rows = _unit_rows(count, dim, seed=7)
    queries = _unit_rows(20, dim, seed=8)
    with psycopg.connect(pg_database) as conn:
        register_vector(conn)
        conn.execute(f"CREATE TABLE items (id integer PRIMARY KEY, embedding vector({dim}))")
        with conn.cursor().copy(
            "COPY items (id, embedding) FROM STDIN WITH (FORMAT BINARY)"
        ) as copy:
            copy.set_types(["int4", "vector"])
            for index, row in enumerate(rows):
                copy.write_row((index, row))
        conn.execute("CREATE INDEX items_hnsw ON items USING hnsw (embedding vector_cosine_ops)")
        method = conn.execute(
            "SELECT am.amname FROM pg_class c JOIN pg_am am ON am.oid = c.relam"
            " WHERE c.relname = 'items_hnsw'"
        ).fetchone()
        conn.execute("ANALYZE items")
        # Force the index so the test proves the HNSW path, not a sequential scan.
        conn.execute("SET enable_seqscan = off")
        conn.execute("SET hnsw.ef_search = 100")
        plan = "\n".join(
            str(line[0])
            for line in conn.execute(
                "EXPLAIN SELECT id FROM items ORDER BY embedding <=> %s LIMIT 10", (queries[0],)
            )
        )
        found = [
            [
                int(hit[0])
                for hit in conn.execute(
                    "SELECT id FROM items ORDER BY embedding <=> %s LIMIT 10", (query,)
                )
            ]
            for query in queries
        ]
        # The row itself is its own nearest neighbour at cosine distance 0.
        self_hit = conn.execute(
            "SELECT id, embedding <=> %s FROM items ORDER BY embedding <=> %s LIMIT 1",
            (rows[123], rows[123]),
        ).fetchone()
    assert method == ("hnsw",)
    assert "Index Scan using items_hnsw" in plan
    exact = np.argsort(-(queries @ rows.T), axis=1, kind="stable")[:, :10]
    recall = np.mean([len(set(f) & set(e.tolist())) / 10 for f, e in zip(found, exact, strict=True)])
    assert recall >= 0.95
    assert self_hit is not None and self_hit[0] == 123 and self_hit[1] < 1e-5
