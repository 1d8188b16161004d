"""Rows of one namespace (an agent's index) in PostgreSQL: the store protocol's reads and writes."""

from __future__ import annotations

import contextlib
import json
import logging
import math
import time
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from memmw.store.arena import FRESH, Arena
from memmw.store.cache import VERSION_KEY
from memmw.store.postgres import graph as pg_graph
from memmw.store.postgres.bulk import copy_vectors
from memmw.store.postgres.cache import CHUNKS
from memmw.store.postgres.postings import PgPostingsLog, PgSegments, SourceStats
from memmw.store.protocol import (
    ChunkRow,
    FileRecords,
    GraphRows,
    TermPostings,
    VectorStats,
    chunk_id,
)
from memmw.store.segments import FLUSH_AT, read_postings
from memmw.store.terms import term_counts, term_hash
from memmw.store.vectors import VectorMatrix
from memmw.store.vectorsearch import VectorCache, VectorIndex, choose_vector_index

if TYPE_CHECKING:
    import psycopg
    from psycopg.types.numeric import Int8

    from memmw.notes.syntax import ParsedNote
    from memmw.text.chunking import Chunk

log = logging.getLogger(__name__)

K1 = 1.2
B = 0.75
#: Bytes an HNSW node takes beside its vector (neighbour lists at pgvector's default m = 16).
HNSW_BYTES_PER_NODE = 400
#: Most memory an HNSW build is given (``maintenance_work_mem`` of the writer's session).
HNSW_BUILD_MEMORY_CAP_KB = 1024 * 1024

_CHUNK_COLUMNS = (
    "c.rowid, c.id, c.path, c.source, c.start_line, c.end_line, c.text, c.line_map, "
    "c.importance, c.n_terms, f.decay_ts, c.terms"
)

# ``chunks`` of a snapshot: every row's rowid and version (``xmin``), and the columns of
# those not held in the process's cache (``memmw.store.postgres.cache``), the first
# parameter: their text and term hashes are most of what the server reads and sends.
_CACHED_CHUNKS_SQL = (
    "SELECT c.rowid, c.xmin::text::bigint, "
    + ", ".join(
        f"CASE WHEN h.held THEN NULL ELSE {col} END"
        for col in [
            "c.rowid", "c.id", "c.path", "c.source", "c.start_line", "c.end_line", "c.text",
            "c.line_map", "c.importance", "c.n_terms",
            # A lookup of the file's row by its key for each chunk (a join hashes them all).
            "(SELECT f.decay_ts FROM memmw.files f WHERE f.id = c.file_id)", "c.terms",
        ]
    )
    + " FROM memmw.chunks c, LATERAL (SELECT c.rowid = ANY(%s::bigint[]) AS held) h"
    " WHERE c.rowid = ANY(%s) AND c.namespace_id = %s"
)


def _bigints(values: Iterable[int]) -> list[Int8]:
    """Rowids as a bigint[] parameter whatever their size: psycopg would send a list of
    small ints as smallint[] and larger ones as integer[], so the server cast the array
    (measured: 0.52 against 0.30 ms for the chunk rows of a search) and a statement
    prepared for one type was prepared again for the other."""
    from psycopg.types.numeric import Int8

    return [Int8(v) for v in values]


# One file's row and its chunks (parallel arrays, in chunk order) in one round trip.
_REPLACE_FILE_SQL = """
WITH f AS (
    INSERT INTO memmw.files (namespace_id, path, source, hash, mtime, size, decay_ts)
    VALUES (%(ns)s, %(path)s, %(source)s, %(file_hash)s, %(mtime)s, %(size)s, %(decay_ts)s)
    RETURNING id
), c AS (
    INSERT INTO memmw.chunks (rowid, namespace_id, id, file_id, path, source, start_line,
        end_line, hash, model, text, line_map, importance, terms, n_terms, updated_at)
    SELECT nextval('memmw.chunks_rowid_seq'), %(ns)s, u.id, f.id, %(path)s, %(source)s,
        u.start_line, u.end_line, u.hash, %(model)s, u.text, u.line_map, u.importance,
        u.terms, u.n_terms, %(now)s
    FROM f, unnest(%(ids)s::text[], %(starts)s::integer[], %(ends)s::integer[],
        %(hashes)s::text[], %(texts)s::text[], %(line_maps)s::text[], %(importance)s::integer[],
        %(terms)s::bytea[], %(n_terms)s::integer[])
        WITH ORDINALITY AS u(id, start_line, end_line, hash, text, line_map, importance, terms,
            n_terms, ord)
    ORDER BY u.ord
    RETURNING rowid
)
SELECT ARRAY(SELECT rowid FROM c) FROM f
"""



def hashes_blob(hashes: np.ndarray) -> bytes:
    """A chunk's distinct term hashes as stored: sorted little-endian int64."""
    return np.sort(hashes).astype("<i8").tobytes()


def _setting_kb(conn: psycopg.Connection[Any], name: str) -> int:
    """A memory setting of the session in kB."""
    row = conn.execute(
        "SELECT setting::bigint * CASE unit WHEN '8kB' THEN 8 WHEN 'MB' THEN 1024 ELSE 1 END"
        " FROM pg_settings WHERE name = %s",
        (name,),
    ).fetchone()
    return int(row[0]) if row else 0


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


def _chunk_bytes(chunk: ChunkRow) -> int:
    """About the memory a cached chunk row holds (its strings, hashes and line map)."""
    return (len(chunk.text) + len(chunk.terms_blob) + len(chunk.path) + len(chunk.id)
            + 40 * len(chunk.line_map or ()) + 400)


def as_array(value: Any) -> np.ndarray:
    """A pgvector value as float32 (its loader gives ``Vector`` or an array by version)."""
    if hasattr(value, "to_numpy"):
        value = value.to_numpy()
    return np.asarray(value, dtype=np.float32)


def as_blob(value: Any) -> bytes:
    """A pgvector value as the protocol's little-endian float32 blob."""
    return as_array(value).astype("<f4").tobytes()


def vector_index_name(namespace_id: int, dims: int) -> str:
    """Name of the partial HNSW index of one namespace's vectors of one dimension."""
    return f"chunk_vectors_hnsw_{namespace_id}_{dims}"


class PostgresReader:
    """Reads of one namespace through one connection (inside the caller's snapshot)."""

    def __init__(
        self,
        conn: psycopg.Connection[Any],
        namespace_id: int,
        *,
        fts_tokenizer: str = "unicode61",
        vector_backend: str = "auto",
    ) -> None:
        self.conn = conn
        self.namespace_id = namespace_id
        self.fts_tokenizer = fts_tokenizer
        #: ``sqlite-vec`` asks for the store's own KNN below ``HNSW_MIN_VECTORS`` too.
        self.vector_backend = vector_backend
        #: A snapshot's reads never change (``PostgresStore.read`` is REPEATABLE READ,
        #: READ ONLY): the meta rows, keyword statistics and newest decay date it read
        #: are kept for the snapshot's later asks (round trips a search does not repeat).
        #: ``_meta`` is set for a snapshot only (:meth:`as_snapshot`).
        self._meta: dict[str, str] | None = None
        self._sources: SourceStats | None = None
        #: The key of this server, database and namespace in the process's caches of rows
        #: (``memmw.store.postgres.cache``); set for snapshots only (committed rows).
        self.cache_scope: Hashable | None = None

    def _one(self, query: str, params: Sequence[Any] | Mapping[str, Any]) -> Any:
        row = self.conn.execute(query, params).fetchone()
        return None if row is None else row[0]

    # -- meta and identity -----------------------------------------------------------
    def as_snapshot(
        self, meta: dict[str, str], sources: SourceStats, cache_scope: Hashable
    ) -> None:
        """Make this reader a read snapshot's (``PostgresStore.read``): ``meta``, every
        meta row read with its BEGIN, answers :meth:`get_meta`, and ``sources``, read with
        it too, the keyword statistics, tombstones and newest decay date; segments and
        chunk rows go through the process's caches under ``cache_scope``."""
        self._meta = dict(meta)
        self._sources = sources
        self.cache_scope = cache_scope

    def get_meta(self, key: str) -> str | None:
        """A meta value of this namespace, or None (a snapshot's from the meta rows read
        with its BEGIN: no round trip)."""
        if self._meta is not None:
            return self._meta.get(key)
        value = self._one(
            "SELECT value FROM memmw.meta WHERE namespace_id = %s AND key = %s",
            (self.namespace_id, key),
        )
        return None if value is None else str(value)

    def generation(self) -> int:
        """Counter bumped by every sync that changed this namespace."""
        value = self.get_meta("generation")
        return int(value) if value else 0

    def identity(self) -> dict[str, Any] | None:
        """The stored index identity (settings the rows were built with), or None."""
        raw = self.get_meta("identity")
        return None if raw is None else dict(json.loads(raw))

    # -- files -----------------------------------------------------------------------
    def file_records(self, source: str) -> FileRecords:
        """``{path: (hash, mtime, size)}`` of the indexed files of ``source``."""
        rows = self.conn.execute(
            "SELECT path, hash, mtime, size FROM memmw.files"
            " WHERE namespace_id = %s AND source = %s",
            (self.namespace_id, source),
        ).fetchall()
        return {path: (h, float(mtime), int(size)) for path, h, mtime, size in rows}

    def sources_present(self) -> set[str]:
        """Sources that have at least one indexed file."""
        rows = self.conn.execute(
            "SELECT DISTINCT source FROM memmw.files WHERE namespace_id = %s",
            (self.namespace_id,),
        ).fetchall()
        return {str(r[0]) for r in rows}

    # -- chunks ----------------------------------------------------------------------
    def chunks(self, ids: Sequence[int]) -> dict[int, ChunkRow]:
        """Chunks of this namespace by rowid (missing ids are absent from the result)."""
        if not ids:
            return {}
        if self.cache_scope is not None:
            return self._cached_chunks(ids, self.cache_scope)
        rows = self.conn.execute(
            f"SELECT {_CHUNK_COLUMNS} FROM memmw.chunks c JOIN memmw.files f"
            " ON f.id = c.file_id WHERE c.rowid = ANY(%s) AND c.namespace_id = %s",
            (_bigints(ids), self.namespace_id),
        ).fetchall()
        return {int(row[0]): _chunk_row(row) for row in rows}

    def _cached_chunks(self, ids: Sequence[int], scope: Hashable) -> dict[int, ChunkRow]:
        """``chunks`` through the process's cache of chunk rows (``cache.CHUNKS``): a row
        held at the version the server has now is not sent again."""
        wanted = [int(i) for i in ids]
        held: dict[int, tuple[int, ChunkRow]] = {}
        for rowid in wanted:
            entry = CHUNKS.get((scope, rowid))
            if entry is not None:
                held[rowid] = entry
        out: dict[int, ChunkRow] = {}
        again: list[int] = []
        rows = self.conn.execute(
            _CACHED_CHUNKS_SQL, (_bigints(held), _bigints(wanted), self.namespace_id)
        )
        for row in rows.fetchall():
            rowid, xmin = int(row[0]), int(row[1])
            if row[2] is not None:
                chunk = _chunk_row(row[2:])
                CHUNKS.put((scope, rowid), (xmin, chunk), _chunk_bytes(chunk))
                out[rowid] = chunk
            elif held[rowid][0] == xmin:  # the row version held: the same columns
                out[rowid] = held[rowid][1]
            else:  # another version of the row than the one held (not seen in practice)
                again.append(rowid)
        if again:
            for row in self.conn.execute(
                _CACHED_CHUNKS_SQL, (_bigints([]), _bigints(again), self.namespace_id)
            ):
                chunk = _chunk_row(row[2:])
                CHUNKS.put((scope, chunk.rowid), (int(row[1]), chunk), _chunk_bytes(chunk))
                out[chunk.rowid] = chunk
        return out

    def chunk_rowids(self, sources: Sequence[str]) -> list[int]:
        """Rowids of every chunk of ``sources``, ascending."""
        rows = self.conn.execute(
            "SELECT rowid FROM memmw.chunks WHERE namespace_id = %s AND source = ANY(%s)"
            " ORDER BY rowid",
            (self.namespace_id, list(sources)),
        ).fetchall()
        return [int(r[0]) for r in rows]

    def chunk_count(self, sources: Sequence[str]) -> int:
        """Chunks of ``sources``."""
        return int(
            self._one(
                "SELECT count(*) FROM memmw.chunks WHERE namespace_id = %s AND source = ANY(%s)",
                (self.namespace_id, list(sources)),
            )
        )

    def newest_decay_ts(self) -> float | None:
        """The newest dated memory (epoch seconds), the reference age for decay."""
        if self._sources is not None:
            return self._sources.newest
        value = self._one(
            "SELECT max(decay_ts) FROM memmw.files WHERE namespace_id = %s", (self.namespace_id,)
        )
        return None if value is None else float(value)

    def counts(self) -> dict[str, dict[str, int]]:
        """``{source: {"files": n, "chunks": n}}``."""
        out: dict[str, dict[str, int]] = {}
        for source, n in self.conn.execute(
            "SELECT source, count(*) FROM memmw.files WHERE namespace_id = %s GROUP BY source",
            (self.namespace_id,),
        ).fetchall():
            out.setdefault(source, {"files": 0, "chunks": 0})["files"] = int(n)
        for source, n in self.conn.execute(
            "SELECT source, count(*) FROM memmw.chunks WHERE namespace_id = %s GROUP BY source",
            (self.namespace_id,),
        ).fetchall():
            out.setdefault(source, {"files": 0, "chunks": 0})["chunks"] = int(n)
        return out

    # -- keyword leg -----------------------------------------------------------------
    def keyword_stats(self, sources: Sequence[str]) -> tuple[int, float]:
        """``(live chunks, total terms)`` of ``sources``, kept by every write (no scan)."""
        if self._sources is not None:
            return self._sources.keyword_stats(sources)
        row = self.conn.execute(
            "SELECT coalesce(sum(n_docs), 0), coalesce(sum(total_len), 0)"
            " FROM memmw.source_stats WHERE namespace_id = %s AND source = ANY(%s)",
            (self.namespace_id, list(sources)),
        ).fetchone()
        return (int(row[0]), float(row[1])) if row else (0, 0.0)

    def postings(
        self, term_hashes: Sequence[int], sources: Sequence[str], arena: Arena = FRESH
    ) -> dict[int, TermPostings]:
        """Live postings of each term hash present in ``sources``: its segments, read in
        one round trip and decoded on demand (``memmw.store.segments``). A snapshot reads
        only the terms the process's cache does not hold at its postings version (none:
        no round trip), and takes the tombstones from what its BEGIN read."""
        table = PgSegments(self.conn, self.namespace_id)
        table.known = self._sources
        # Committed rows (a snapshot's) go through the process's cache of segments.
        version = self._meta.get(VERSION_KEY) if self._meta is not None else None
        return read_postings(table, term_hashes, sources, arena, version)

    def bm25_search(
        self,
        term_hashes: Sequence[int],
        limit: int,
        sources: Sequence[str],
        *,
        require_all: bool = False,
    ) -> list[tuple[int, float, int]]:
        """``(rowid, BM25, query terms matched)``, best first (ties by rowid), in float64.

        The FTS5-style answers of ``fts_search`` (``keyword_backend = "fts5"`` on this
        store) and a check of the stored postings; the keyword leg of a search scores with
        ``memmw.search.keyword`` (this layer may not import it). ``require_all``: only
        chunks holding every term.
        """
        hashes = sorted({int(h) for h in term_hashes})
        if not hashes or limit <= 0:
            return []
        n_docs, total = self.keyword_stats(sources)
        if not n_docs:
            return []
        avgdl = max(total / n_docs, 1e-9)
        found = self.postings(hashes, sources)
        if not found or (require_all and len(found) < len(hashes)):
            return []
        rows, parts = [], []
        for p in found.values():
            df = len(p)
            weight = math.log(1.0 + max(0.0, n_docs - df + 0.5) / (df + 0.5))
            tf = p.tf.astype(np.float64)
            norm = K1 * (1.0 - B + B * p.doc_len.astype(np.float64) / avgdl)
            rows.append(p.rowids)
            parts.append(weight * tf * (K1 + 1.0) / (tf + norm))
        ids, inverse = np.unique(np.concatenate(rows), return_inverse=True)
        scores = np.bincount(inverse, weights=np.concatenate(parts), minlength=len(ids))
        matched = np.bincount(inverse, minlength=len(ids))
        keep = matched >= (len(hashes) if require_all else 1)
        ids, scores, matched = ids[keep], scores[keep], matched[keep]
        order = np.lexsort((ids, -scores))[:limit]
        return [
            (int(r), float(v), int(m))
            for r, v, m in zip(ids[order].tolist(), scores[order].tolist(),
                               matched[order].tolist(), strict=True)
        ]

    def fts_search(
        self, terms: Sequence[str], limit: int, sources: Sequence[str], *, require_all: bool
    ) -> list[tuple[int, float]]:
        """``(rowid, -BM25)`` of the chunks holding all (or any) of ``terms``, best first.

        Answered from the postings; the rank is negative BM25 like FTS5's.
        """
        if not terms:
            return []
        hits = self.bm25_search([term_hash(t) for t in terms], limit, sources, require_all=require_all)
        return [(rowid, -score) for rowid, score, _ in hits]

    def substring_counts(
        self, needles: Sequence[str], limit: int, sources: Sequence[str]
    ) -> list[tuple[int, int]]:
        """``(rowid, how many needles occur in the text)``, most first, then rowid (a scan)."""
        if not needles or limit <= 0:
            return []
        rows = self.conn.execute(
            "SELECT rowid, n FROM (SELECT c.rowid, (SELECT count(*) FROM unnest(%s::text[]) AS"
            " needle WHERE strpos(lower(c.text), lower(needle)) > 0) AS n FROM memmw.chunks c"
            " WHERE c.namespace_id = %s AND c.source = ANY(%s)) AS counted WHERE n > 0"
            " ORDER BY n DESC, rowid LIMIT %s",
            (list(needles), self.namespace_id, list(sources), limit),
        ).fetchall()
        return [(int(r), int(n)) for r, n in rows]

    # -- vectors ---------------------------------------------------------------------
    def nearest(
        self, vector: Sequence[float], k: int, sources: Sequence[str]
    ) -> list[tuple[int, float]]:
        """The ``k`` nearest stored vectors by cosine, best first (ties by rowid), via HNSW.

        The namespace id and the dimension are SQL literals (integers we hold), so the
        planner matches the partial HNSW index of this namespace and dimension.
        """
        from pgvector import Vector
        from psycopg import sql

        query = np.asarray(vector, dtype=np.float32)
        norm = float(np.linalg.norm(query)) if query.size else 0.0
        if k < 1 or norm == 0.0 or not np.isfinite(norm):
            return []
        query = query / norm
        dims = int(query.shape[0])
        stmt = sql.SQL(
            "SELECT chunk_rowid, (embedding::vector({dims})) <=> %s AS distance"
            " FROM memmw.chunk_vectors WHERE namespace_id = {ns} AND dims = {dims}"
            " AND source = ANY(%s) ORDER BY (embedding::vector({dims})) <=> %s LIMIT %s"
        ).format(dims=sql.Literal(dims), ns=sql.Literal(self.namespace_id))
        with self.conn.transaction():
            # SET LOCAL lasts until the end of this (sub)transaction.
            self.conn.execute(
                sql.SQL("SET LOCAL hnsw.ef_search = {}").format(sql.Literal(max(40, 2 * k)))
            )
            # A source filter (memory without sessions) must not starve the result.
            self.conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            rows = self.conn.execute(
                stmt, (Vector(query), list(sources), Vector(query), k)
            ).fetchall()
        hits = [(int(r), 1.0 - float(d)) for r, d in rows]
        # relaxed_order may come back slightly out of order: the final order is exact.
        hits.sort(key=lambda hit: (-hit[1], hit[0]))
        return hits

    def vector_index(
        self, sources: Sequence[str], dims: int | None, cache: VectorCache, *, calibrate: bool
    ) -> VectorIndex | None:
        """HNSW in the server from ``HNSW_MIN_VECTORS`` vectors, else the matrix."""
        return choose_vector_index(
            self,
            sources,
            dims,
            cache,
            calibrate=calibrate,
            knn=self.vector_backend == "sqlite-vec",
            hnsw=True,
        )

    def warm_vectors(self, sources: Sequence[str], dims: int | None, cache: VectorCache) -> None:
        """Nothing: a large namespace is searched in the server, a small one on first use."""

    def vector_matrix(self, sources: Sequence[str], dims: int | None) -> VectorMatrix:
        """Every stored vector of ``sources`` as one matrix (``dims`` long when given)."""
        return VectorMatrix(self.vector_rows(sources), dims)

    def vector_rows(self, sources: Sequence[str]) -> list[tuple[int, bytes]]:
        """``(rowid, unit float32 little-endian vector)`` of every stored vector, by rowid."""
        rows = self.conn.execute(
            "SELECT chunk_rowid, embedding FROM memmw.chunk_vectors WHERE namespace_id = %s"
            " AND source = ANY(%s) ORDER BY chunk_rowid",
            (self.namespace_id, list(sources)),
        ).fetchall()
        return [(int(r), as_blob(e)) for r, e in rows]

    def vector_centroid(self, sources: Sequence[str]) -> tuple[np.ndarray, int] | None:
        """``(mean, count)`` of the stored unit vectors of ``sources``, computed in the server."""
        from psycopg import sql

        dims = self.vector_dims()
        if dims is None:
            return None
        row = self.conn.execute(
            sql.SQL(
                "SELECT avg(embedding::vector({dims})), count(*) FROM memmw.chunk_vectors"
                " WHERE namespace_id = %s AND dims = {dims} AND source = ANY(%s)"
            ).format(dims=sql.Literal(dims)),
            (self.namespace_id, list(sources)),
        ).fetchone()
        return None if row is None or row[0] is None else (as_array(row[0]), int(row[1]))

    def vector_dims(self) -> int | None:
        """Dimension of this namespace's vectors (None before the first one)."""
        value = self._one(
            "SELECT dims FROM memmw.chunk_vectors WHERE namespace_id = %s LIMIT 1",
            (self.namespace_id,),
        )
        return None if value is None else int(value)

    def pending_count(self) -> int:
        """Chunks that have no vector yet."""
        return int(
            self._one(
                "SELECT count(*) FROM memmw.chunks c WHERE c.namespace_id = %s AND NOT EXISTS"
                " (SELECT 1 FROM memmw.chunk_vectors v WHERE v.chunk_rowid = c.rowid)",
                (self.namespace_id,),
            )
        )

    def pending_chunks(self, after: int, limit: int) -> list[tuple[int, str, str]]:
        """``(rowid, chunk hash, text)`` of chunks without a vector past ``after``, by rowid."""
        rows = self.conn.execute(
            "SELECT c.rowid, c.hash, c.text FROM memmw.chunks c WHERE c.namespace_id = %s"
            " AND c.rowid > %s AND NOT EXISTS"
            " (SELECT 1 FROM memmw.chunk_vectors v WHERE v.chunk_rowid = c.rowid)"
            " ORDER BY c.rowid LIMIT %s",
            (self.namespace_id, after, limit),
        ).fetchall()
        return [(int(r), str(h), str(t)) for r, h, t in rows]

    def vector_stats(self) -> VectorStats:
        """Vector, pending and cache figures for ``status``."""
        vectors = int(
            self._one(
                "SELECT count(*) FROM memmw.chunk_vectors WHERE namespace_id = %s",
                (self.namespace_id,),
            )
        )
        by_source = {
            str(src): (int(tb or 0), int(eb or 0))
            for src, tb, eb in self.conn.execute(
                "SELECT c.source, sum(octet_length(c.text)), sum(v.dims * 4)"
                " FROM memmw.chunks c LEFT JOIN memmw.chunk_vectors v ON v.chunk_rowid = c.rowid"
                " WHERE c.namespace_id = %s GROUP BY c.source",
                (self.namespace_id,),
            ).fetchall()
        }
        return VectorStats(
            vectors=vectors,
            pending=self.pending_count(),
            cache_entries=self.cache_count(),
            bytes_by_source=by_source,
        )

    # -- embedding cache (per namespace; kept across rebuilds) -----------------------
    def cached_embeddings(
        self, provider: str, model: str, provider_key: str, hashes: Sequence[str]
    ) -> dict[str, bytes]:
        """``{chunk hash: vector blob}`` found in the embedding cache."""
        wanted = list(dict.fromkeys(hashes))
        if not wanted:
            return {}
        rows = self.conn.execute(
            "SELECT hash, embedding FROM memmw.embedding_cache WHERE namespace_id = %s"
            " AND provider = %s AND model = %s AND provider_key = %s AND hash = ANY(%s)",
            (self.namespace_id, provider, model, provider_key, wanted),
        ).fetchall()
        return {str(h): as_blob(e) for h, e in rows}

    def cache_count(self) -> int:
        """Rows in the embedding cache."""
        return int(
            self._one(
                "SELECT count(*) FROM memmw.embedding_cache WHERE namespace_id = %s",
                (self.namespace_id,),
            )
        )

    # -- knowledge graph -------------------------------------------------------------
    def graph_rows(self) -> GraphRows:
        """Every graph row of this namespace."""
        return pg_graph.read_rows(self.conn, self.namespace_id)


class PostgresWriter(PostgresReader):
    """Writes of one namespace on the writer's connection (reads see its own writes).

    Statements outside :meth:`transaction` commit one by one (like the SQLite writer).
    """

    def __init__(
        self, conn: psycopg.Connection[Any], namespace_id: int, *, fts_tokenizer: str = "unicode61"
    ) -> None:
        super().__init__(conn, namespace_id, fts_tokenizer=fts_tokenizer)
        #: HNSW indexes to create once no transaction is open (see ``write_vectors``).
        self.missing_vector_indexes: set[int] = set()
        #: Files written during a staged rebuild (``begin_bulk``); None outside one.
        self.staged: set[tuple[str, str]] | None = None
        #: Postings changes not yet written, and what a rollback must re-queue.
        self.postings_log = PgPostingsLog()
        self._bulk_mark: tuple[int, int] | None = None
        self._depth = 0

    @contextlib.contextmanager
    def transaction(self) -> Iterator[PostgresWriter]:
        """One atomic write transaction (a savepoint when one is already open)."""
        mark = self.postings_log.mark()
        self._depth += 1
        try:
            with self.conn.transaction():
                yield self
                if self._depth == 1 and self.staged is None:
                    self.flush_postings()  # committed with the rows they index
        except BaseException:
            self.postings_log.rollback(mark)
            raise
        finally:
            self._depth -= 1
        if not self._depth and self.staged is None:
            self.postings_log.settle()

    # -- staged rebuild ----------------------------------------------------------------
    def begin_bulk(self) -> None:
        """A staged rebuild into an emptied namespace: postings flushed at its end (or
        past ``FLUSH_AT``) rather than after each file."""
        self.staged = set()
        self._bulk_mark = self.postings_log.mark()
        self.postings_log.begin_bulk()

    def end_bulk(self, *, commit: bool) -> None:
        """Write the logged postings (``commit``) or drop them; back to direct writes.

        Every term then holds full segments but its last one (see ``PostingsBuffer``)."""
        self.staged, mark, self._bulk_mark = None, self._bulk_mark, None
        if commit:
            self.flush_postings()
            self.postings_log.end_bulk()
            self.postings_log.settle()
            return
        self.postings_log.end_bulk()
        if mark is not None:
            self.postings_log.rollback(mark)

    def flush_postings(self) -> None:
        """Write logged postings now (before anything reads postings)."""
        if self.postings_log.pending:
            self.postings_log.flush(PgSegments(self.conn, self.namespace_id))

    def keyword_stats(self, sources: Sequence[str]) -> tuple[int, float]:
        """``(live chunks, total terms)`` of ``sources``, buffered rows included."""
        self.flush_postings()
        return super().keyword_stats(sources)

    def postings(
        self, term_hashes: Sequence[int], sources: Sequence[str], arena: Arena = FRESH
    ) -> dict[int, TermPostings]:
        """Live postings of each term hash present in ``sources``, buffered rows included."""
        self.flush_postings()
        return super().postings(term_hashes, sources, arena)

    def bm25_search(
        self,
        term_hashes: Sequence[int],
        limit: int,
        sources: Sequence[str],
        *,
        require_all: bool = False,
    ) -> list[tuple[int, float, int]]:
        """BM25 in the server over the written and buffered postings."""
        self.flush_postings()
        return super().bm25_search(term_hashes, limit, sources, require_all=require_all)

    # -- meta and identity -----------------------------------------------------------
    def set_meta(self, key: str, value: str) -> None:
        """Insert or replace a meta value."""
        self.conn.execute(
            "INSERT INTO memmw.meta (namespace_id, key, value) VALUES (%s, %s, %s)"
            " ON CONFLICT (namespace_id, key) DO UPDATE SET value = excluded.value",
            (self.namespace_id, key, value),
        )

    def delete_meta(self, key: str) -> None:
        """Remove a meta value (no error when absent)."""
        self.conn.execute(
            "DELETE FROM memmw.meta WHERE namespace_id = %s AND key = %s",
            (self.namespace_id, key),
        )

    def set_identity(self, identity: Mapping[str, Any]) -> None:
        """Record the settings the rows are built with."""
        self.set_meta("identity", json.dumps(dict(identity), sort_keys=True))

    def _bump(self, key: str) -> int:
        value = self._one(
            "INSERT INTO memmw.meta (namespace_id, key, value) VALUES (%s, %s, '1')"
            " ON CONFLICT (namespace_id, key) DO UPDATE"
            " SET value = (memmw.meta.value::bigint + 1)::text RETURNING value",
            (self.namespace_id, key),
        )
        return int(value)

    def bump_generation(self) -> int:
        """Increment and return the generation; records ``last_sync``."""
        gen = self._bump("generation")
        self.set_meta("last_sync", repr(time.time()))
        return gen

    def bump_vector_generation(self) -> int:
        """Increment and return the vector generation (vectors were written)."""
        return self._bump("vector_generation")

    # -- files and chunks ------------------------------------------------------------
    def update_file_stat(self, path: str, source: str, *, mtime: float, size: int) -> None:
        """Record a file's new mtime and size when its indexed content did not change."""
        self.conn.execute(
            "UPDATE memmw.files SET mtime = %s, size = %s"
            " WHERE namespace_id = %s AND path = %s AND source = %s",
            (mtime, size, self.namespace_id, path, source),
        )

    def delete_file(self, path: str, source: str) -> None:
        """Remove a file and everything derived from it (chunks, postings, vectors, graph)."""
        with self.transaction():
            self._delete_file(path, source)

    def _delete_file(self, path: str, source: str) -> None:
        if self.staged is not None and (path, source) not in self.staged:
            return  # the rebuild emptied the namespace and has not written this file
        rows = self.conn.execute(
            "SELECT c.rowid, c.terms, c.n_terms FROM memmw.chunks c JOIN memmw.files f"
            " ON f.id = c.file_id WHERE f.namespace_id = %s AND f.path = %s AND f.source = %s",
            (self.namespace_id, path, source),
        ).fetchall()
        for rowid, blob, n_terms in rows:
            # The chunk's distinct terms name the segments it is in (a tombstone until
            # they are many: ``memmw.store.segments``).
            chunk_hashes = np.frombuffer(bytes(blob), dtype="<i8").astype(np.int64)
            self.postings_log.remove(source, int(rowid), chunk_hashes, int(n_terms))
        self.conn.execute(
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
        """Write a file's record and chunks, replacing what it had; returns the chunk rowids."""
        with self.transaction():
            conn = self.conn
            self._delete_file(path, source)
            unique: list[tuple[str, Chunk]] = []
            seen: set[str] = set()
            for chunk in chunks:
                cid = chunk_id(source, path, chunk, model)
                if cid not in seen:
                    # Pieces of one long line with the same text share an id (as in SQLite).
                    seen.add(cid)
                    unique.append((cid, chunk))
            terms = [term_counts(chunk.text) for _, chunk in unique]
            # The file row and its chunks in one statement: rowids ascending in chunk order
            # (nextval runs after the ORDER BY), never reused, from the one sequence of every
            # namespace.
            row = conn.execute(
                _REPLACE_FILE_SQL,
                {
                    "ns": self.namespace_id,
                    "path": path,
                    "source": source,
                    "file_hash": file_hash,
                    "mtime": mtime,
                    "size": size,
                    "decay_ts": decay_ts,
                    "model": model,
                    "now": time.time(),
                    "ids": [cid for cid, _ in unique],
                    "starts": [c.start_line for _, c in unique],
                    "ends": [c.end_line for _, c in unique],
                    "hashes": [c.hash for _, c in unique],
                    "texts": [c.text for _, c in unique],
                    "line_maps": [
                        json.dumps(c.line_map) if c.line_map else None for _, c in unique
                    ],
                    "importance": [c.importance for _, c in unique],
                    "terms": [hashes_blob(h) for h, _, _ in terms],
                    "n_terms": [n for _, _, n in terms],
                },
            ).fetchone()
            assert row is not None
            rowids = sorted(int(r) for r in (row[0] or ()))
            if self.staged is not None:
                # Written during the rebuild: a second write of it must delete this one.
                self.staged.add((path, source))
            if not unique:
                return []
            for rowid, (hashes, tf, n_terms) in zip(rowids, terms, strict=True):
                self.postings_log.add(source, rowid, hashes, tf, n_terms)
            if self.staged is not None and self.postings_log.size >= FLUSH_AT:
                # Bounds a rebuild's memory; each term's short last piece is held back.
                self.postings_log.flush(PgSegments(self.conn, self.namespace_id), carry=True)
            return rowids

    def clear_rows(self) -> None:
        """Delete every file, chunk, posting, vector, graph row and meta value of the namespace.

        Kept: the generation counter, graph activation (use, not content) and the
        embedding cache; rowids keep coming from the one sequence. For a full rebuild
        inside the writer's transaction: other sessions see the old rows until it commits.
        """
        ns = (self.namespace_id,)
        self.flush_postings()
        PgSegments(self.conn, self.namespace_id).clear()  # postings, tombstones, statistics
        self.conn.execute("DELETE FROM memmw.chunk_vectors WHERE namespace_id = %s", ns)
        pg_graph.clear(self.conn, self.namespace_id)
        self.conn.execute("DELETE FROM memmw.chunks WHERE namespace_id = %s", ns)
        self.conn.execute("DELETE FROM memmw.files WHERE namespace_id = %s", ns)
        self.conn.execute(
            "DELETE FROM memmw.meta WHERE namespace_id = %s AND key <> 'generation'", ns
        )

    # -- vectors and the embedding cache ---------------------------------------------
    def _vector_index_exists(self, dims: int) -> bool:
        name = vector_index_name(self.namespace_id, dims)
        return self._one("SELECT to_regclass(%s)", (f"memmw.{name}",)) is not None

    def ensure_vector_index(self, dims: int) -> bool:
        """Create this namespace's HNSW index for ``dims`` if missing; False when it must wait.

        Creating an index takes a lock that waits for open write transactions on the
        vector table, so it is only done outside a transaction; inside one it is left for
        later (:meth:`PostgresStore.write` creates it on its way out). So a first load
        writes its vectors without an index and the HNSW graph is built once, in bulk.
        """
        from psycopg import pq, sql

        if self._vector_index_exists(dims):
            return True
        if self.conn.info.transaction_status != pq.TransactionStatus.IDLE:
            self.missing_vector_indexes.add(dims)
            return False
        # Built in memory when the graph fits in maintenance_work_mem (many times faster
        # than spilling); raised for this session only, as far as the vectors need.
        count = int(
            self._one(
                "SELECT count(*) FROM memmw.chunk_vectors WHERE namespace_id = %s AND dims = %s",
                (self.namespace_id, dims),
            )
        )
        needed_kb = count * (dims * 4 + HNSW_BYTES_PER_NODE) * 3 // 2 // 1024
        raise_memory = needed_kb > _setting_kb(self.conn, "maintenance_work_mem")
        if raise_memory:
            self.conn.execute(
                sql.SQL("SET maintenance_work_mem = {}").format(
                    sql.Literal(f"{min(needed_kb, HNSW_BUILD_MEMORY_CAP_KB)}kB")
                )
            )
        try:
            self._create_vector_index(dims)
        finally:
            if raise_memory and not self.conn.broken:
                self.conn.execute("RESET maintenance_work_mem")
        self.missing_vector_indexes.discard(dims)
        return True

    def _create_vector_index(self, dims: int) -> None:
        from psycopg import sql

        self.conn.execute(
            sql.SQL(
                "CREATE INDEX IF NOT EXISTS {name} ON memmw.chunk_vectors USING hnsw"
                " ((embedding::vector({dims})) vector_cosine_ops)"
                " WHERE namespace_id = {ns} AND dims = {dims}"
            ).format(
                name=sql.Identifier(vector_index_name(self.namespace_id, dims)),
                dims=sql.Literal(dims),
                ns=sql.Literal(self.namespace_id),
            )
        )

    def write_vectors(self, rows: Sequence[tuple[int, str, bytes]]) -> int:
        """Store ``(rowid, chunk hash, blob)`` where the chunk still has that hash."""
        if not rows:
            return 0
        dims = {len(blob) // 4 for _, _, blob in rows}
        for d in dims:
            self.ensure_vector_index(d)
        with self.conn.transaction():
            return copy_vectors(self.conn, self.namespace_id, rows)

    def put_embeddings(
        self, provider: str, model: str, provider_key: str, vectors: Mapping[str, bytes]
    ) -> None:
        """Cache ``{chunk hash: vector blob}`` for this provider, model and endpoint."""
        from pgvector import Vector

        if not vectors:
            return
        now = time.time()
        with self.conn.transaction(), self.conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO memmw.embedding_cache (namespace_id, provider, model, provider_key,"
                " hash, dims, embedding, updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
                " ON CONFLICT (namespace_id, provider, model, provider_key, hash) DO UPDATE"
                " SET embedding = excluded.embedding, dims = excluded.dims,"
                " updated_at = excluded.updated_at",
                [
                    (
                        self.namespace_id,
                        provider,
                        model,
                        provider_key,
                        h,
                        len(b) // 4,
                        Vector(np.frombuffer(b, dtype="<f4")),
                        now,
                    )
                    for h, b in vectors.items()
                ],
            )

    def prune_embedding_cache(self, max_entries: int, batch: int) -> int:
        """Delete up to ``batch`` oldest cache rows above ``max_entries``; returns how many."""
        excess = self.cache_count() - max_entries
        if excess <= 0:
            return 0
        cur = self.conn.execute(
            "DELETE FROM memmw.embedding_cache WHERE ctid IN (SELECT ctid FROM"
            " memmw.embedding_cache WHERE namespace_id = %s ORDER BY updated_at LIMIT %s)",
            (self.namespace_id, min(excess, batch)),
        )
        return max(cur.rowcount, 0)

    # -- knowledge graph -------------------------------------------------------------
    def replace_note_graph(
        self, *, path: str, source: str, note: ParsedNote | None, fresh: bool = False
    ) -> None:
        """Replace the graph rows of one indexed file with ``note`` (None: just clear them)."""
        pg_graph.write_note(
            self.conn, self.namespace_id, path=path, source=source, parsed=note, fresh=fresh
        )

    def refresh_graph(self) -> None:
        """Recompute what spans files: supersession, co-occurrences, seeded activation."""
        pg_graph.refresh_supersession(self.conn, self.namespace_id)
        pg_graph.refresh_cooccurrences(self.conn, self.namespace_id, self.postings)
        pg_graph.seed_activation(self.conn, self.namespace_id)

    def decay_activation(self) -> None:
        """Apply the daily activation decay (at most once a day)."""
        pg_graph.decay_activation(self.conn, self.namespace_id)

    def bump_activation(self, keys: Iterable[str], amount: float) -> None:
        """Raise the activation of entries by stable key and record the access."""
        pg_graph.bump_activation(self.conn, self.namespace_id, keys, amount)
