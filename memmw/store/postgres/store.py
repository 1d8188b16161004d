"""Rows of one namespace (an agent's index, or a shared one) in a PostgreSQL database."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from memmw.errors import IndexBusyError
from memmw.store.postgres.schema import WRITER_LOCK_CLASS
from memmw.store.sqlite.store import ChunkRow, chunk_id
from memmw.store.terms import pack_terms, unpack_terms

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

    from memmw.text.chunking import Chunk

log = logging.getLogger(__name__)

K1 = 1.2
B = 0.75

_CHUNK_COLUMNS = (
    "c.rowid, c.id, c.path, c.source, c.start_line, c.end_line, c.text, c.line_map, "
    "c.importance, c.n_terms, f.decay_ts, c.terms"
)

# BM25 over the postings of the query's terms, with the document frequency of each term
# counted from the same postings and the collection length from ``source_stats``: the
# formula of ``memmw.search.keyword.KeywordMatrix``.
_BM25_SQL = """
WITH q AS (SELECT DISTINCT unnest(%(hashes)s::bigint[]) AS h),
p AS (
    SELECT p.term_hash, p.chunk_rowid, p.tf, p.doc_len
    FROM q JOIN memmw.postings p ON p.namespace_id = %(ns)s AND p.term_hash = q.h
    WHERE p.source = ANY(%(sources)s)
),
df AS (SELECT term_hash, count(*)::float8 AS df FROM p GROUP BY term_hash),
st AS (
    SELECT coalesce(sum(n_docs), 0)::float8 AS n,
           CASE WHEN coalesce(sum(n_docs), 0) > 0
                THEN sum(total_len)::float8 / sum(n_docs) ELSE 1.0 END AS avgdl
    FROM memmw.source_stats WHERE namespace_id = %(ns)s AND source = ANY(%(sources)s)
)
SELECT p.chunk_rowid,
       sum(ln(1.0 + greatest(0.0, st.n - df.df + 0.5) / (df.df + 0.5))
           * p.tf * (%(k1)s + 1.0)
           / (p.tf + %(k1)s * (1.0 - %(b)s + %(b)s * p.doc_len / greatest(st.avgdl, 1e-9))))
           AS score,
       count(*) AS matched
FROM p JOIN df USING (term_hash) CROSS JOIN st
GROUP BY p.chunk_rowid
ORDER BY score DESC, p.chunk_rowid
LIMIT %(limit)s
"""


def _chunk_row(row: Sequence[Any]) -> ChunkRow:
    return ChunkRow(
        rowid=int(row[0]),
        id=row[1],
        path=row[2],
        source=row[3],
        start_line=row[4],
        end_line=row[5],
        text=row[6],
        line_map=tuple(json.loads(row[7])) if row[7] else None,
        importance=row[8],
        n_terms=row[9],
        decay_ts=row[10],
        terms_blob=bytes(row[11]),
    )


def _unit(vector: Sequence[float] | np.ndarray) -> np.ndarray:
    arr = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(arr))
    return arr / norm if norm > 0 else arr


def _as_array(value: Any) -> np.ndarray:
    """A pgvector value as float32 (its loader gives ``Vector`` or an array by version)."""
    if hasattr(value, "to_numpy"):
        value = value.to_numpy()
    return np.asarray(value, dtype=np.float32)


def vector_index_name(namespace_id: int, dims: int) -> str:
    """Name of the partial HNSW index of one namespace's vectors of one dimension."""
    return f"chunk_vectors_hnsw_{namespace_id}_{dims}"


class _Reads:
    """Queries shared by the reader (pooled connections) and the writer (its own one)."""

    namespace: str
    namespace_id: int

    @contextlib.contextmanager
    def _conn(self) -> Iterator[psycopg.Connection[Any]]:
        raise NotImplementedError
        yield

    # -- meta ------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        """A meta value of this namespace, or None."""
        with self._conn() as conn:
            row = conn.execute(
                "SELECT value FROM memmw.meta WHERE namespace_id = %s AND key = %s",
                (self.namespace_id, key),
            ).fetchone()
        return None if row is None else str(row[0])

    def generation(self) -> int:
        """Counter bumped by every sync that changed this namespace."""
        value = self.get_meta("generation")
        return int(value) if value else 0

    def identity(self) -> dict[str, Any] | None:
        """The stored index identity (settings the rows were built with), or None."""
        raw = self.get_meta("identity")
        return None if raw is None else dict(json.loads(raw))

    # -- files and chunks ------------------------------------------------------------
    def file_records(self, source: str) -> dict[str, tuple[str, float, int]]:
        """``{path: (hash, mtime, size)}`` of the indexed files of ``source``."""
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT path, hash, mtime, size FROM memmw.files"
                " WHERE namespace_id = %s AND source = %s",
                (self.namespace_id, source),
            ).fetchall()
        return {path: (h, float(mtime), int(size)) for path, h, mtime, size in rows}

    def chunks(self, rowids: Sequence[int]) -> dict[int, ChunkRow]:
        """Chunks of this namespace by rowid (missing ids are absent from the result)."""
        if not rowids:
            return {}
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {_CHUNK_COLUMNS} FROM memmw.chunks c JOIN memmw.files f"
                " ON f.id = c.file_id WHERE c.rowid = ANY(%s) AND c.namespace_id = %s",
                (list(rowids), self.namespace_id),
            ).fetchall()
        return {int(row[0]): _chunk_row(row) for row in rows}

    def term_blobs(self, sources: Sequence[str], *, after: int = 0) -> list[tuple[int, bytes, int]]:
        """``(rowid, terms blob, n_terms)`` of the chunks of ``sources`` with rowid > ``after``."""
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT rowid, terms, n_terms FROM memmw.chunks WHERE namespace_id = %s"
                " AND source = ANY(%s) AND rowid > %s ORDER BY rowid",
                (self.namespace_id, list(sources), after),
            ).fetchall()
        return [(int(r), bytes(t), int(n)) for r, t, n in rows]

    def chunk_rowids(self, sources: Sequence[str]) -> list[int]:
        """Rowids of every chunk of ``sources``, ascending."""
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT rowid FROM memmw.chunks WHERE namespace_id = %s AND source = ANY(%s)"
                " ORDER BY rowid",
                (self.namespace_id, list(sources)),
            ).fetchall()
        return [int(r[0]) for r in rows]

    def chunk_count(self, sources: Sequence[str]) -> int:
        """Chunks of ``sources``."""
        with self._conn() as conn:
            row = conn.execute(
                "SELECT count(*) FROM memmw.chunks WHERE namespace_id = %s AND source = ANY(%s)",
                (self.namespace_id, list(sources)),
            ).fetchone()
        return int(row[0]) if row else 0

    def newest_decay_ts(self) -> float | None:
        """The newest dated memory (epoch seconds), the reference age for decay."""
        with self._conn() as conn:
            row = conn.execute(
                "SELECT max(decay_ts) FROM memmw.files WHERE namespace_id = %s",
                (self.namespace_id,),
            ).fetchone()
        return None if row is None or row[0] is None else float(row[0])

    def counts(self) -> dict[str, dict[str, int]]:
        """``{source: {"files": n, "chunks": n}}``."""
        out: dict[str, dict[str, int]] = {}
        with self._conn() as conn:
            for source, n in conn.execute(
                "SELECT source, count(*) FROM memmw.files WHERE namespace_id = %s GROUP BY source",
                (self.namespace_id,),
            ):
                out.setdefault(source, {"files": 0, "chunks": 0})["files"] = int(n)
            for source, n in conn.execute(
                "SELECT source, count(*) FROM memmw.chunks WHERE namespace_id = %s GROUP BY source",
                (self.namespace_id,),
            ):
                out.setdefault(source, {"files": 0, "chunks": 0})["chunks"] = int(n)
        return out

    # -- keyword leg -----------------------------------------------------------------
    def term_stats(self, sources: Sequence[str]) -> tuple[int, float]:
        """``(chunks, average chunk length in terms)`` of ``sources`` (BM25's statistics)."""
        with self._conn() as conn:
            row = conn.execute(
                "SELECT coalesce(sum(n_docs), 0), coalesce(sum(total_len), 0)"
                " FROM memmw.source_stats WHERE namespace_id = %s AND source = ANY(%s)",
                (self.namespace_id, list(sources)),
            ).fetchone()
        n_docs, total = (int(row[0]), int(row[1])) if row else (0, 0)
        return n_docs, (total / n_docs if n_docs else 1.0)

    def postings(self, term_hashes: Sequence[int], sources: Sequence[str]) -> dict[int, list[tuple[int, int, int]]]:
        """``{term hash: [(rowid, tf, chunk length)]}`` for the chunks of ``sources``."""
        out: dict[int, list[tuple[int, int, int]]] = {}
        with self._conn() as conn:
            for h, rowid, tf, dl in conn.execute(
                "SELECT term_hash, chunk_rowid, tf, doc_len FROM memmw.postings"
                " WHERE namespace_id = %s AND term_hash = ANY(%s) AND source = ANY(%s)"
                " ORDER BY term_hash, chunk_rowid",
                (self.namespace_id, list(term_hashes), list(sources)),
            ):
                out.setdefault(int(h), []).append((int(rowid), int(tf), int(dl)))
        return out

    def bm25_search(
        self, term_hashes: Sequence[int], limit: int, sources: Sequence[str]
    ) -> list[tuple[int, float, int]]:
        """``(rowid, BM25, query terms matched)``, best first (ties by rowid), in the server."""
        if not term_hashes or limit <= 0:
            return []
        params = {
            "hashes": list(term_hashes),
            "ns": self.namespace_id,
            "sources": list(sources),
            "k1": K1,
            "b": B,
            "limit": limit,
        }
        with self._conn() as conn:
            rows = conn.execute(_BM25_SQL, params).fetchall()
        return [(int(r), float(s), int(m)) for r, s, m in rows]

    # -- vectors ---------------------------------------------------------------------
    def vector_dims(self) -> int | None:
        """Dimension of this namespace's vectors (None before the first one)."""
        with self._conn() as conn:
            row = conn.execute(
                "SELECT dims FROM memmw.chunk_vectors WHERE namespace_id = %s LIMIT 1",
                (self.namespace_id,),
            ).fetchone()
        return None if row is None else int(row[0])

    def vector_count(self) -> int:
        """Chunks of this namespace that have a vector."""
        with self._conn() as conn:
            row = conn.execute(
                "SELECT count(*) FROM memmw.chunk_vectors WHERE namespace_id = %s",
                (self.namespace_id,),
            ).fetchone()
        return int(row[0]) if row else 0

    def pending_vectors(self, limit: int) -> list[tuple[int, str, str]]:
        """``(rowid, chunk hash, text)`` of chunks still without a vector, oldest first."""
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT c.rowid, c.hash, c.text FROM memmw.chunks c"
                " LEFT JOIN memmw.chunk_vectors v ON v.chunk_rowid = c.rowid"
                " WHERE c.namespace_id = %s AND v.chunk_rowid IS NULL ORDER BY c.rowid LIMIT %s",
                (self.namespace_id, limit),
            ).fetchall()
        return [(int(r), str(h), str(t)) for r, h, t in rows]

    def vector_search(
        self,
        query: Sequence[float] | np.ndarray,
        limit: int,
        sources: Sequence[str],
        *,
        ef_search: int | None = None,
    ) -> list[tuple[int, float]]:
        """``(rowid, cosine similarity)``, best first, through the namespace's HNSW index.

        The namespace id and the dimension are SQL literals (integers we hold), so the
        planner can match the partial index of this namespace and dimension.
        """
        from pgvector import Vector
        from psycopg import sql

        if limit <= 0:
            return []
        vec = _unit(query)
        dims = int(vec.shape[0])
        ef = max(40, limit * 2) if ef_search is None else ef_search
        stmt = sql.SQL(
            "SELECT chunk_rowid, (embedding::vector({dims})) <=> %s AS distance"
            " FROM memmw.chunk_vectors WHERE namespace_id = {ns} AND dims = {dims}"
            " AND source = ANY(%s) ORDER BY (embedding::vector({dims})) <=> %s LIMIT %s"
        ).format(dims=sql.Literal(dims), ns=sql.Literal(self.namespace_id))
        with self._conn() as conn, conn.transaction():
            conn.execute(sql.SQL("SET LOCAL hnsw.ef_search = {}").format(sql.Literal(ef)))
            # A source filter (memory without sessions) must not starve the result.
            conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            rows = conn.execute(
                stmt, (Vector(vec), list(sources), Vector(vec), limit)
            ).fetchall()
        hits = [(int(r), 1.0 - float(d)) for r, d in rows]
        # relaxed_order may return slightly out of order: the final order is exact.
        hits.sort(key=lambda hit: (-hit[1], hit[0]))
        return hits

    # -- embedding cache -------------------------------------------------------------
    def cached_embeddings(
        self, provider: str, model: str, provider_key: str, hashes: Sequence[str]
    ) -> dict[str, np.ndarray]:
        """Cached vectors by chunk hash (shared by every namespace: content-addressed)."""
        if not hashes:
            return {}
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT hash, embedding FROM memmw.embedding_cache WHERE provider = %s"
                " AND model = %s AND provider_key = %s AND hash = ANY(%s)",
                (provider, model, provider_key, list(hashes)),
            ).fetchall()
        return {str(h): _as_array(e) for h, e in rows}


class PostgresStore(_Reads):
    """One namespace of the PostgreSQL store: reads from a pool, writes through ``writer()``.

    Readers are never blocked (MVCC): a writer's changes, a full rebuild included, become
    visible at once when its transaction commits, and a failed or interrupted one leaves
    the previous rows in place. One writer per namespace at a time, across hosts.
    """

    def __init__(self, pool: ConnectionPool[Any], namespace: str, *, owns_pool: bool = False) -> None:
        """Bind to ``namespace`` (created when missing) in the database behind ``pool``."""
        self._pool = pool
        self._owns_pool = owns_pool
        self.namespace = namespace
        with pool.connection() as conn:
            conn.execute(
                "INSERT INTO memmw.namespaces (name) VALUES (%s) ON CONFLICT (name) DO NOTHING",
                (namespace,),
            )
            row = conn.execute(
                "SELECT id FROM memmw.namespaces WHERE name = %s", (namespace,)
            ).fetchone()
        assert row is not None
        self.namespace_id = int(row[0])

    @classmethod
    def open(cls, dsn: str, namespace: str, *, pool_size: int = 4) -> PostgresStore:
        """Migrate the database behind ``dsn`` and open ``namespace`` with its own pool."""
        from memmw.store.postgres.connection import open_pool

        return cls(open_pool(dsn, max_size=pool_size), namespace, owns_pool=True)

    def close(self) -> None:
        """Close the pool if this store opened it."""
        if self._owns_pool:
            self._pool.close()

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def _conn(self) -> Iterator[psycopg.Connection[Any]]:
        with self._pool.connection() as conn:
            yield conn

    def writer_holder(self) -> dict[str, Any] | None:
        """Who holds this namespace's writer lock (host, pid, since), or None."""
        with self._conn() as conn:
            row = conn.execute(
                "SELECT w.host, w.pid, w.since FROM memmw.writers w"
                " JOIN pg_locks l ON l.locktype = 'advisory' AND l.granted"
                " AND l.classid = %s AND l.objid = %s AND l.pid = w.backend_pid"
                " WHERE w.namespace_id = %s",
                (WRITER_LOCK_CLASS, self.namespace_id, self.namespace_id),
            ).fetchone()
        if row is None:
            return None
        return {"host": row[0], "pid": int(row[1]), "since": row[2].isoformat()}

    @contextlib.contextmanager
    def writer(self, *, wait: bool = False, timeout: float = 120.0) -> Iterator[PostgresWriter]:
        """The namespace's single writer, in one transaction committed on a clean exit.

        Args:
            wait: Wait up to ``timeout`` seconds for another writer; False fails at once.
            timeout: Longest wait when ``wait`` is true.

        Raises:
            IndexBusyError: another process (on any host) is writing this namespace; the
                message names its host and pid.
        """
        with self._pool.connection() as conn:
            deadline = time.monotonic() + (timeout if wait else 0.0)
            while True:
                row = conn.execute(
                    "SELECT pg_try_advisory_lock(%s, %s)", (WRITER_LOCK_CLASS, self.namespace_id)
                ).fetchone()
                if row is not None and row[0]:
                    break
                if time.monotonic() >= deadline:
                    holder = self.writer_holder()
                    who = (
                        f"host {holder['host']} pid {holder['pid']} since {holder['since']}"
                        if holder
                        else "another process"
                    )
                    raise IndexBusyError(
                        f"namespace {self.namespace!r} is being written by {who}; try again "
                        "when it is done"
                    )
                time.sleep(0.2)
            try:
                conn.execute(
                    "INSERT INTO memmw.writers (namespace_id, host, pid, backend_pid)"
                    " VALUES (%s, %s, %s, pg_backend_pid()) ON CONFLICT (namespace_id) DO UPDATE"
                    " SET host = excluded.host, pid = excluded.pid,"
                    " backend_pid = excluded.backend_pid, since = now()",
                    (self.namespace_id, socket.gethostname(), os.getpid()),
                )
                with conn.transaction():
                    yield PostgresWriter(conn, self.namespace, self.namespace_id)
            finally:
                if not conn.closed and not conn.broken:
                    with contextlib.suppress(Exception):
                        conn.execute(
                            "DELETE FROM memmw.writers WHERE namespace_id = %s"
                            " AND backend_pid = pg_backend_pid()",
                            (self.namespace_id,),
                        )
                        conn.execute(
                            "SELECT pg_advisory_unlock(%s, %s)",
                            (WRITER_LOCK_CLASS, self.namespace_id),
                        )

    def ensure_vector_index(self, dims: int) -> None:
        """Create the HNSW index of this namespace's ``dims``-dimension vectors if missing.

        Call it before opening the writer: building an index takes a lock that waits for
        other namespaces' open write transactions, so it runs in its own short one (and on
        a namespace without vectors of that size yet, it is instant).
        """
        from psycopg import sql

        name = vector_index_name(self.namespace_id, dims)
        with self._conn() as conn:
            row = conn.execute("SELECT to_regclass(%s)", (f"memmw.{name}",)).fetchone()
            if row is not None and row[0] is not None:
                return
            conn.execute(
                sql.SQL(
                    "CREATE INDEX IF NOT EXISTS {name} ON memmw.chunk_vectors USING hnsw"
                    " ((embedding::vector({dims})) vector_cosine_ops)"
                    " WHERE namespace_id = {ns} AND dims = {dims}"
                ).format(
                    name=sql.Identifier(name),
                    dims=sql.Literal(dims),
                    ns=sql.Literal(self.namespace_id),
                )
            )


class PostgresWriter(_Reads):
    """Writes of one namespace inside the writer's transaction (reads see its own writes)."""

    def __init__(self, conn: psycopg.Connection[Any], namespace: str, namespace_id: int) -> None:
        self._connection = conn
        self.namespace = namespace
        self.namespace_id = namespace_id

    @contextlib.contextmanager
    def _conn(self) -> Iterator[psycopg.Connection[Any]]:
        yield self._connection

    # -- meta ------------------------------------------------------------------------
    def set_meta(self, key: str, value: str) -> None:
        """Insert or replace a meta value."""
        self._connection.execute(
            "INSERT INTO memmw.meta (namespace_id, key, value) VALUES (%s, %s, %s)"
            " ON CONFLICT (namespace_id, key) DO UPDATE SET value = excluded.value",
            (self.namespace_id, key, value),
        )

    def set_identity(self, identity: dict[str, Any]) -> None:
        """Record the settings the rows are built with."""
        self.set_meta("identity", json.dumps(identity, sort_keys=True))

    def bump_generation(self) -> int:
        """Increment and return the generation."""
        gen = self.generation() + 1
        self.set_meta("generation", str(gen))
        self.set_meta("last_sync", repr(time.time()))
        return gen

    # -- files and chunks ------------------------------------------------------------
    def update_file_stat(self, path: str, source: str, *, mtime: float, size: int) -> None:
        """Record a file's new mtime and size when its indexed content did not change."""
        self._connection.execute(
            "UPDATE memmw.files SET mtime = %s, size = %s"
            " WHERE namespace_id = %s AND path = %s AND source = %s",
            (mtime, size, self.namespace_id, path, source),
        )

    def _adjust_stats(self, source: str, docs: int, length: int) -> None:
        if not docs:
            return
        self._connection.execute(
            "INSERT INTO memmw.source_stats (namespace_id, source, n_docs, total_len)"
            " VALUES (%s, %s, %s, %s) ON CONFLICT (namespace_id, source) DO UPDATE"
            " SET n_docs = memmw.source_stats.n_docs + excluded.n_docs,"
            " total_len = memmw.source_stats.total_len + excluded.total_len",
            (self.namespace_id, source, docs, length),
        )

    def delete_file(self, path: str, source: str) -> None:
        """Remove a file and everything derived from it (chunks, postings, vectors)."""
        conn = self._connection
        rows = conn.execute(
            "SELECT c.rowid, c.terms, c.n_terms FROM memmw.chunks c JOIN memmw.files f"
            " ON f.id = c.file_id WHERE f.namespace_id = %s AND f.path = %s AND f.source = %s",
            (self.namespace_id, path, source),
        ).fetchall()
        if rows:
            hashes: list[int] = []
            owners: list[int] = []
            for rowid, blob, _n in rows:
                entries = unpack_terms(bytes(blob))
                hashes.extend(int(h) for h in entries["h"])
                owners.extend([int(rowid)] * len(entries))
            conn.execute(
                "DELETE FROM memmw.postings p USING unnest(%s::bigint[], %s::bigint[]) AS d(h, r)"
                " WHERE p.namespace_id = %s AND p.term_hash = d.h AND p.chunk_rowid = d.r",
                (hashes, owners, self.namespace_id),
            )
            self._adjust_stats(source, -len(rows), -sum(int(r[2]) for r in rows))
        conn.execute(
            "DELETE FROM memmw.files WHERE namespace_id = %s AND path = %s AND source = %s",
            (self.namespace_id, path, source),
        )

    def replace_file(
        self,
        *,
        path: str,
        source: str,
        file_hash: str,
        mtime: float,
        size: int,
        decay_ts: float | None,
        chunks: Sequence[Chunk],
        model: str,
    ) -> list[int]:
        """Write a file's record and chunks, replacing what it had. Returns the chunk rowids."""
        conn = self._connection
        self.delete_file(path, source)
        row = conn.execute(
            "INSERT INTO memmw.files (namespace_id, path, source, hash, mtime, size, decay_ts)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING id",
            (self.namespace_id, path, source, file_hash, mtime, size, decay_ts),
        ).fetchone()
        assert row is not None
        file_id = int(row[0])
        unique: list[tuple[str, Chunk]] = []
        seen: set[str] = set()
        for chunk in chunks:
            cid = chunk_id(source, path, chunk, model)
            if cid not in seen:
                # Pieces of one long line with the same text share an id (see SQLite store).
                seen.add(cid)
                unique.append((cid, chunk))
        if not unique:
            return []
        # Rowids come from the sequence in one round trip, then COPY writes the rows.
        rowids = [
            int(r[0])
            for r in conn.execute(
                "SELECT nextval('memmw.chunks_rowid_seq') FROM generate_series(1, %s)",
                (len(unique),),
            ).fetchall()
        ]
        now = time.time()
        total_len = 0
        with conn.cursor() as cur:
            with cur.copy(
                "COPY memmw.chunks (rowid, namespace_id, id, file_id, path, source, start_line,"
                " end_line, hash, model, text, line_map, importance, terms, n_terms, updated_at)"
                " FROM STDIN"
            ) as copy:
                packed: list[tuple[int, bytes, int]] = []
                for rowid, (cid, chunk) in zip(rowids, unique, strict=True):
                    blob, n_terms = pack_terms(chunk.text)
                    packed.append((rowid, blob, n_terms))
                    total_len += n_terms
                    copy.write_row(
                        (
                            rowid,
                            self.namespace_id,
                            cid,
                            file_id,
                            path,
                            source,
                            chunk.start_line,
                            chunk.end_line,
                            chunk.hash,
                            model,
                            chunk.text,
                            json.dumps(chunk.line_map) if chunk.line_map else None,
                            chunk.importance,
                            blob,
                            n_terms,
                            now,
                        )
                    )
            with cur.copy(
                "COPY memmw.postings (namespace_id, term_hash, chunk_rowid, source, tf, doc_len)"
                " FROM STDIN"
            ) as copy:
                for rowid, blob, n_terms in packed:
                    for h, tf in unpack_terms(blob).tolist():
                        copy.write_row((self.namespace_id, h, rowid, source, tf, n_terms))
        self._adjust_stats(source, len(unique), total_len)
        return rowids

    def clear(self) -> None:
        """Delete every file, chunk, posting, vector and statistic of the namespace.

        Meant for a full rebuild inside the writer's transaction: other sessions keep
        seeing the old rows until it commits, and nothing if it fails.
        """
        conn = self._connection
        conn.execute("DELETE FROM memmw.postings WHERE namespace_id = %s", (self.namespace_id,))
        conn.execute(
            "DELETE FROM memmw.chunk_vectors WHERE namespace_id = %s", (self.namespace_id,)
        )
        conn.execute("DELETE FROM memmw.chunks WHERE namespace_id = %s", (self.namespace_id,))
        conn.execute("DELETE FROM memmw.files WHERE namespace_id = %s", (self.namespace_id,))
        conn.execute(
            "DELETE FROM memmw.source_stats WHERE namespace_id = %s", (self.namespace_id,)
        )

    # -- vectors and the embedding cache ---------------------------------------------
    def put_vectors(self, rows: Sequence[tuple[int, Sequence[float] | np.ndarray]]) -> int:
        """Store ``(chunk rowid, vector)`` pairs (normalised); returns how many were written.

        Rowids of other namespaces or of deleted chunks are ignored.
        """
        from pgvector import Vector

        if not rows:
            return 0
        conn = self._connection
        owned = {
            int(r[0]): str(r[1])
            for r in conn.execute(
                "SELECT rowid, source FROM memmw.chunks WHERE namespace_id = %s AND rowid = ANY(%s)",
                (self.namespace_id, [int(r) for r, _ in rows]),
            ).fetchall()
        }
        written = 0
        with conn.cursor() as cur:
            for rowid, vector in rows:
                source = owned.get(int(rowid))
                if source is None:
                    continue
                vec = _unit(vector)
                cur.execute(
                    "INSERT INTO memmw.chunk_vectors (chunk_rowid, namespace_id, source, dims,"
                    " embedding) VALUES (%s, %s, %s, %s, %s) ON CONFLICT (chunk_rowid) DO UPDATE"
                    " SET embedding = excluded.embedding, dims = excluded.dims",
                    (int(rowid), self.namespace_id, source, int(vec.shape[0]), Vector(vec)),
                )
                written += 1
        return written

    def put_cached_embeddings(
        self,
        provider: str,
        model: str,
        provider_key: str,
        vectors: dict[str, Sequence[float] | np.ndarray],
    ) -> None:
        """Add vectors to the shared embedding cache, keyed by chunk hash."""
        from pgvector import Vector

        now = time.time()
        with self._connection.cursor() as cur:
            cur.executemany(
                "INSERT INTO memmw.embedding_cache (provider, model, provider_key, hash, dims,"
                " embedding, updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s)"
                " ON CONFLICT (provider, model, provider_key, hash) DO UPDATE"
                " SET embedding = excluded.embedding, dims = excluded.dims,"
                " updated_at = excluded.updated_at",
                [
                    (provider, model, provider_key, h, len(v), Vector(_unit(v)), now)
                    for h, v in vectors.items()
                ],
            )


def namespaces_summary(pool: ConnectionPool[Any]) -> list[dict[str, Any]]:
    """Every namespace with its files, chunks, vectors and text size (for ``status``)."""
    with pool.connection() as conn:
        rows = conn.execute(
            "SELECT n.name,"
            " (SELECT count(*) FROM memmw.files f WHERE f.namespace_id = n.id),"
            " (SELECT count(*) FROM memmw.chunks c WHERE c.namespace_id = n.id),"
            " (SELECT count(*) FROM memmw.chunk_vectors v WHERE v.namespace_id = n.id),"
            " (SELECT coalesce(sum(octet_length(c.text)), 0) FROM memmw.chunks c"
            "  WHERE c.namespace_id = n.id)"
            " FROM memmw.namespaces n ORDER BY n.name"
        ).fetchall()
    return [
        {"namespace": r[0], "files": int(r[1]), "chunks": int(r[2]), "vectors": int(r[3]),
         "textBytes": int(r[4])}
        for r in rows
    ]


