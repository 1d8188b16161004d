"""Vectors: float32 blobs, the embedding cache, backfill of pending chunks, and KNN."""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from memmw.index.db import connect
from memmw.locks import exclusive_lock

log = logging.getLogger(__name__)

#: Cache rows looked up per query (the reference's 400).
CACHE_LOOKUP_BATCH = 400
#: Rows deleted per transaction when pruning the cache.
PRUNE_BATCH = 100
#: Chunks embedded between two commits of the backfill.
EMBED_BATCH = 32


class Embedder(Protocol):
    """What the index needs of an embedding provider (see ``memmw.embeddings.base``)."""

    @property
    def id(self) -> str: ...

    @property
    def model(self) -> str: ...

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]: ...

    def cache_key_data(self) -> dict[str, object]: ...


def to_blob(vector: Sequence[float] | np.ndarray) -> bytes:
    """Little-endian float32 bytes of an L2-normalised vector (zero stays zero)."""
    arr = np.asarray(vector, dtype=np.float32)
    arr = np.where(np.isfinite(arr), arr, 0.0).astype("<f4")
    norm = float(np.linalg.norm(arr))
    return (arr / norm if norm > 0 else arr).astype("<f4").tobytes()


def provider_key(provider: Embedder) -> str:
    """sha256 of the provider's cache-key data (endpoint identity, never a key in clear)."""
    data = {"provider": provider.id, "model": provider.model, **provider.cache_key_data()}
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


class VectorMatrix:
    """All vectors of one index generation as a normalised float32 matrix (brute-force KNN).

    numpy brute force measured faster here than a ``vec0`` scan, and works with any
    sqlite3 module.
    """

    def __init__(self, rows: Sequence[tuple[int, bytes]], dims: int | None) -> None:
        good = [(r, b) for r, b in rows if dims is None or len(b) == dims * 4]
        self.rowids = np.fromiter((r for r, _ in good), dtype=np.int64, count=len(good))
        if good:
            self.matrix = np.frombuffer(b"".join(b for _, b in good), dtype="<f4").reshape(
                len(good), -1
            )
        else:
            self.matrix = np.zeros((0, dims or 0), dtype=np.float32)

    def __len__(self) -> int:
        return len(self.rowids)

    def search(
        self, query: np.ndarray, limit: int, *, calibrate: bool = False
    ) -> list[tuple[int, float]]:
        """Top ``limit`` ``(rowid, similarity)`` pairs, best first.

        Args:
            query: Unit query vector.
            limit: Pairs to return.
            calibrate: Report ``(cos - median) / (1 - median)`` (floored at 0), where the
                median is this query's cosine with the whole corpus. Small embedding
                models give unrelated texts cosines of 0.7-0.8; calibrated, a score says
                how far a chunk stands out, so thresholds mean the same for every model.
                The order is unchanged.
        """
        if not len(self) or query.shape[0] != self.matrix.shape[1]:
            return []
        sims = self.matrix @ query.astype(np.float32)
        k = min(limit, len(sims))
        top = np.argpartition(-sims, k - 1)[:k]
        top = top[np.argsort(-sims[top], kind="stable")]
        if not calibrate:
            return [(int(self.rowids[i]), float(sims[i])) for i in top]
        median = float(np.partition(sims, len(sims) // 2)[len(sims) // 2])
        scale = 1.0 - median if median < 1.0 else 1.0
        return [(int(self.rowids[i]), max(0.0, (float(sims[i]) - median) / scale)) for i in top]


def load_vectors(
    conn: sqlite3.Connection, sources: Sequence[str], dims: int | None
) -> VectorMatrix:
    """Read every stored vector of ``sources``."""
    marks = ",".join("?" * len(sources))
    rows = conn.execute(
        "SELECT v.chunk_rowid, v.embedding FROM chunk_vectors v JOIN chunks c"
        f" ON c.rowid = v.chunk_rowid WHERE c.source IN ({marks}) ORDER BY v.chunk_rowid",
        tuple(sources),
    ).fetchall()
    return VectorMatrix(rows, dims)


def pending_count(conn: sqlite3.Connection) -> int:
    """Chunks that have no vector yet."""
    row = conn.execute(
        "SELECT COUNT(*) FROM chunks c LEFT JOIN chunk_vectors v ON v.chunk_rowid = c.rowid"
        " WHERE v.chunk_rowid IS NULL"
    ).fetchone()
    return int(row[0])


@dataclass
class BackfillReport:
    """What one backfill run did."""

    embedded: int = 0
    from_cache: int = 0
    remaining: int = 0
    dims: int | None = None
    error: str | None = None
    seconds: float = 0.0


class Backfill:
    """Embeds chunks that have no vector, reusing the embedding cache.

    The writer lock is held only while reading a batch and while writing its vectors,
    never during the (slow) embedding call, so syncs of new files are never blocked by
    a long first backfill. A provider failure stops the run; the chunks stay
    keyword-searchable and are embedded by a later run.
    """

    def __init__(
        self,
        *,
        db_path: Path,
        lock_path: Path,
        provider: Embedder,
        provider_key: str,
        cache_enabled: bool = True,
        cache_max_entries: int = 50_000,
    ) -> None:
        self.db_path = db_path
        self.lock_path = lock_path
        self.provider = provider
        self.provider_key = provider_key
        self.cache_enabled = cache_enabled
        self.cache_max_entries = cache_max_entries

    def run(
        self,
        *,
        progress: Callable[[int, int], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> BackfillReport:
        """Embed every pending chunk (or until ``should_stop`` returns True)."""
        report = BackfillReport()
        started = time.perf_counter()
        conn = connect(self.db_path)
        try:
            total = pending_count(conn)
            done = 0
            while not (should_stop and should_stop()):
                batch = conn.execute(
                    "SELECT c.rowid, c.hash, c.text FROM chunks c LEFT JOIN chunk_vectors v"
                    " ON v.chunk_rowid = c.rowid WHERE v.chunk_rowid IS NULL"
                    " ORDER BY c.rowid LIMIT ?",
                    (EMBED_BATCH,),
                ).fetchall()
                if not batch:
                    break
                try:
                    vectors, cached = self._vectors(conn, [(h, t) for _, h, t in batch])
                except Exception as exc:  # a provider outage never corrupts the index
                    report.error = f"{type(exc).__name__}: {exc}"
                    log.warning("embedding stopped, chunks stay keyword-searchable: %s", exc)
                    break
                self._write(conn, batch, vectors)
                report.embedded += len(batch) - cached
                report.from_cache += cached
                report.dims = len(vectors[0]) // 4 if vectors else report.dims
                done += len(batch)
                if progress is not None:
                    progress(done, max(total, done))
            report.remaining = pending_count(conn)
            if self.cache_enabled:
                self._prune(conn)
        finally:
            conn.close()
        report.seconds = time.perf_counter() - started
        return report

    def _vectors(
        self, conn: sqlite3.Connection, items: Sequence[tuple[str, str]]
    ) -> tuple[list[bytes], int]:
        found: dict[str, bytes] = {}
        hashes = list(dict.fromkeys(h for h, _ in items))
        if self.cache_enabled:
            for start in range(0, len(hashes), CACHE_LOOKUP_BATCH):
                part = hashes[start : start + CACHE_LOOKUP_BATCH]
                marks = ",".join("?" * len(part))
                for h, blob in conn.execute(
                    "SELECT hash, embedding FROM embedding_cache WHERE provider=? AND model=?"
                    f" AND provider_key=? AND hash IN ({marks})",
                    (self.provider.id, self.provider.model, self.provider_key, *part),
                ):
                    if blob:
                        found[h] = blob
        cached = sum(1 for h, _ in items if h in found)
        missing = [(h, t) for h, t in items if h not in found]
        texts = [t for _, t in missing]
        identity = (self.provider.id, self.provider.model)
        fresh: dict[str, bytes] = {}
        if texts:
            # Providers bound their own requests (bytes per request, batch sizes).
            vectors = self.provider.embed_documents(texts)
            if (self.provider.id, self.provider.model) != identity:
                # A fallback took over mid-run: these vectors belong to another model and
                # must not mix with the index's; the next sync rebuilds for the new model.
                raise RuntimeError("embedding provider switched during the run")
            if len(vectors) != len(texts):
                raise ValueError(f"provider returned {len(vectors)} vectors for {len(texts)} texts")
            for (digest, _text), vec in zip(missing, vectors, strict=True):
                fresh[digest] = to_blob(vec)
        if fresh and self.cache_enabled:
            now = time.time()
            with exclusive_lock(self.lock_path):
                conn.execute("BEGIN IMMEDIATE")
                conn.executemany(
                    "INSERT OR REPLACE INTO embedding_cache VALUES (?,?,?,?,?,?,?)",
                    [
                        (
                            self.provider.id,
                            self.provider.model,
                            self.provider_key,
                            h,
                            len(b) // 4,
                            b,
                            now,
                        )
                        for h, b in fresh.items()
                    ],
                )
                conn.execute("COMMIT")
        found.update(fresh)
        return [found[h] for h, _ in items], cached

    def _write(
        self, conn: sqlite3.Connection, batch: Sequence[tuple[int, str, str]], vectors: list[bytes]
    ) -> None:
        with exclusive_lock(self.lock_path):
            conn.execute("BEGIN IMMEDIATE")
            try:
                for (rowid, digest, _text), blob in zip(batch, vectors, strict=True):
                    # The chunk may have been replaced by a sync meanwhile: write only if it
                    # still exists with the same text.
                    conn.execute(
                        "INSERT OR REPLACE INTO chunk_vectors(chunk_rowid, embedding)"
                        " SELECT rowid, ? FROM chunks WHERE rowid=? AND hash=?",
                        (blob, rowid, digest),
                    )
                gen = conn.execute(
                    "SELECT value FROM meta WHERE key='vector_generation'"
                ).fetchone()
                conn.execute(
                    "INSERT OR REPLACE INTO meta(key, value) VALUES ('vector_generation', ?)",
                    (str(int(gen[0]) + 1 if gen else 1),),
                )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def _prune(self, conn: sqlite3.Connection) -> None:
        while True:
            count = conn.execute("SELECT COUNT(*) FROM embedding_cache").fetchone()[0]
            excess = int(count) - self.cache_max_entries
            if excess <= 0:
                return
            with exclusive_lock(self.lock_path):
                conn.execute("BEGIN IMMEDIATE")
                conn.execute(
                    "DELETE FROM embedding_cache WHERE rowid IN (SELECT rowid FROM"
                    " embedding_cache ORDER BY updated_at LIMIT ?)",
                    (min(excess, PRUNE_BATCH),),
                )
                conn.execute("COMMIT")
