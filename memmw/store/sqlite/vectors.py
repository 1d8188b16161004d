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

from memmw.errors import ProviderError
from memmw.redaction import redact_secrets
from memmw.store.sqlite.db import connect
from memmw.workspace.locks import exclusive_lock

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


class InvalidVectorError(ProviderError):
    """A provider answered with a vector that must not be stored (NaN, zero, wrong size)."""


def vector_problem(vector: Sequence[float] | np.ndarray, dims: int | None) -> str | None:
    """Why ``vector`` cannot be stored (non-finite, zero, wrong dimension), or None."""
    try:
        arr = np.asarray(vector, dtype=np.float64)
    except (TypeError, ValueError):
        return "not a list of numbers"
    if arr.ndim != 1 or arr.size == 0:
        return "not a flat, non-empty list of numbers"
    if dims is not None and arr.shape[0] != dims:
        return f"{arr.shape[0]} dimensions where the index has {dims}"
    if not np.all(np.isfinite(arr)):
        return "NaN or infinite values"
    norm = float(np.linalg.norm(arr))
    if norm == 0.0 or not np.isfinite(norm):
        return "a zero vector"
    if not np.all(np.isfinite(arr / norm).astype(np.float32)):
        return "values outside float32 range"
    return None


def to_blob(vector: Sequence[float] | np.ndarray, dims: int | None = None) -> bytes:
    """Little-endian float32 bytes of an L2-normalised vector.

    Raises:
        InvalidVectorError: non-finite values, a zero vector or not ``dims`` long; such a
            vector would rank as noise, so it is never stored or cached.
    """
    problem = vector_problem(vector, dims)
    if problem is not None:
        raise InvalidVectorError(f"the provider returned {problem}")
    arr = np.asarray(vector, dtype=np.float64)
    return (arr / float(np.linalg.norm(arr))).astype("<f4").tobytes()


def blob_ok(blob: bytes | None, dims: int | None) -> bool:
    """True for a stored blob that is ``dims`` float32 values, finite and non-zero."""
    if not blob or len(blob) % 4 or (dims is not None and len(blob) != dims * 4):
        return False
    arr = np.frombuffer(blob, dtype="<f4")
    return bool(np.all(np.isfinite(arr))) and bool(np.any(arr))


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


def _identity(conn: sqlite3.Connection) -> dict[str, object]:
    row = conn.execute("SELECT value FROM meta WHERE key='identity'").fetchone()
    try:
        data = json.loads(row[0]) if row and row[0] else {}
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


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
    """What one backfill run did.

    Attributes:
        rejected: Vectors refused (NaN/inf, zero, wrong dimension); their chunks stay
            keyword-searchable and pending.
        error: Why the run stopped early (redacted of secrets), or None.
    """

    embedded: int = 0
    from_cache: int = 0
    remaining: int = 0
    dims: int | None = None
    error: str | None = None
    seconds: float = 0.0
    rejected: int = 0


#: Meta key holding the last embedding error (so a fresh process's status can say why).
EMBEDDING_ERROR_KEY = "last_embedding_error"


class IndexIdentityChanged(Exception):
    """The index was rebuilt for another provider or model while this run embedded."""


class Backfill:
    """Embeds chunks that have no vector, reusing the embedding cache.

    The writer lock is held only while reading a batch and while writing its vectors,
    never during the (slow) embedding call, so syncs of new files are never blocked by
    a long first backfill. A provider failure stops the run; the chunks stay
    keyword-searchable and are embedded by a later run. Every write re-checks the
    index identity (provider, model, endpoint, dimensions) in its own transaction, so
    two processes on different providers never mix vectors in one index, and vectors
    that are non-finite, zero or of the wrong size are never stored or cached.
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
        self._dims: int | None = None
        self._rejected: list[str] = []

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
            dims = _identity(conn).get("vectorDims")
            self._dims = dims if isinstance(dims, int) and dims > 0 else None
            done = 0
            after = 0  # rowid cursor: chunks whose vectors were rejected are not retried
            while not (should_stop and should_stop()):
                batch = conn.execute(
                    "SELECT c.rowid, c.hash, c.text FROM chunks c LEFT JOIN chunk_vectors v"
                    " ON v.chunk_rowid = c.rowid WHERE v.chunk_rowid IS NULL AND c.rowid > ?"
                    " ORDER BY c.rowid LIMIT ?",
                    (after, EMBED_BATCH),
                ).fetchall()
                if not batch:
                    break
                after = int(batch[-1][0])
                try:
                    vectors, cached = self._vectors(conn, [(h, t) for _, h, t in batch])
                    self._write(conn, batch, vectors)
                except IndexIdentityChanged as exc:
                    report.error = str(exc)
                    log.warning("embedding stopped: %s", exc)
                    break
                except Exception as exc:  # a provider outage never corrupts the index
                    report.error = redact_secrets(f"{type(exc).__name__}: {exc}")
                    log.warning(
                        "embedding stopped, chunks stay keyword-searchable: %s", report.error
                    )
                    break
                good = sum(1 for v in vectors if v is not None)
                report.embedded += good - cached
                report.from_cache += cached
                report.dims = self._dims or report.dims
                done += len(batch)
                if progress is not None:
                    progress(done, max(total, done))
            report.rejected = len(self._rejected)
            if self._rejected and report.error is None:
                report.error = (
                    f"{len(self._rejected)} vectors rejected ({self._rejected[0]}); those chunks"
                    " stay keyword-searchable"
                )
                log.warning("embedding: %s", report.error)
            report.remaining = pending_count(conn)
            self._record_error(conn, report.error)
            if self.cache_enabled:
                self._prune(conn)
        finally:
            conn.close()
        report.seconds = time.perf_counter() - started
        return report

    def _record_error(self, conn: sqlite3.Connection, error: str | None) -> None:
        """Persist the last error (or clear it) so any process's status can show it."""
        with exclusive_lock(self.lock_path):
            conn.execute("BEGIN IMMEDIATE")
            try:
                if error is None:
                    conn.execute("DELETE FROM meta WHERE key=?", (EMBEDDING_ERROR_KEY,))
                else:
                    record = {"error": error, "at": time.time(), "provider": self.provider.id}
                    conn.execute(
                        "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                        (EMBEDDING_ERROR_KEY, json.dumps(record)),
                    )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def _check(self, vector: Sequence[float]) -> bytes | None:
        """The vector as a blob, or None (recorded as rejected) when it must not be stored."""
        problem = vector_problem(vector, self._dims)
        if problem is not None:
            self._rejected.append(f"the provider returned {problem}")
            return None
        blob = to_blob(vector)
        if self._dims is None:
            self._dims = len(blob) // 4
        return blob

    def _vectors(
        self, conn: sqlite3.Connection, items: Sequence[tuple[str, str]]
    ) -> tuple[list[bytes | None], int]:
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
                    # Older versions cached zero vectors: never serve those again.
                    if blob_ok(blob, self._dims):
                        found[h] = blob
                        if self._dims is None:
                            self._dims = len(blob) // 4
        cached = sum(1 for h, _ in items if h in found)
        missing = list(dict.fromkeys((h, t) for h, t in items if h not in found))
        texts = [t for _, t in missing]
        identity = (self.provider.id, self.provider.model)
        fresh: dict[str, bytes] = {}
        if texts:
            # Providers bound their own requests (bytes per request, batch sizes).
            vectors = self.provider.embed_documents(texts)
            if (self.provider.id, self.provider.model) != identity:
                # A fallback took over mid-run: these vectors belong to another model and
                # must not mix with the index's; the next sync rebuilds for the new model.
                raise IndexIdentityChanged("embedding provider switched during the run")
            if len(vectors) != len(texts):
                raise ValueError(f"provider returned {len(vectors)} vectors for {len(texts)} texts")
            for (digest, _text), vec in zip(missing, vectors, strict=True):
                blob = self._check(vec)
                if blob is not None:
                    fresh[digest] = blob
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
        return [found.get(h) for h, _ in items], cached

    def _write(
        self,
        conn: sqlite3.Connection,
        batch: Sequence[tuple[int, str, str]],
        vectors: Sequence[bytes | None],
    ) -> None:
        with exclusive_lock(self.lock_path):
            conn.execute("BEGIN IMMEDIATE")
            try:
                # Same transaction as the writes: another process may have rebuilt the
                # index for another provider, model or dimension since this run began.
                stored = _identity(conn)
                mine = {
                    "provider": self.provider.id,
                    "model": self.provider.model,
                    "providerKey": self.provider_key,
                }
                for key, value in mine.items():
                    if stored.get(key) != value:
                        raise IndexIdentityChanged(
                            f"the index now belongs to {stored.get('provider')}/"
                            f"{stored.get('model')} ({key} changed); vectors of "
                            f"{self.provider.id}/{self.provider.model} were not written"
                        )
                stored_dims = stored.get("vectorDims")
                for (rowid, digest, _text), blob in zip(batch, vectors, strict=True):
                    if blob is None:
                        continue
                    if isinstance(stored_dims, int) and len(blob) != stored_dims * 4:
                        self._rejected.append(
                            f"{len(blob) // 4} dimensions where the index has {stored_dims}"
                        )
                        continue
                    # The chunk may have been replaced by a sync meanwhile: write only if it
                    # still exists with the same text.
                    conn.execute(
                        "INSERT OR REPLACE INTO chunk_vectors(chunk_rowid, embedding)"
                        " SELECT rowid, ? FROM chunks WHERE rowid=? AND hash=?",
                        (blob, rowid, digest),
                    )
                if stored_dims is None and self._dims is not None:
                    stored["vectorDims"] = self._dims
                    conn.execute(
                        "INSERT OR REPLACE INTO meta(key, value) VALUES ('identity', ?)",
                        (json.dumps(stored, sort_keys=True),),
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
