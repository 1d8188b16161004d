"""Vectors, store-neutral: float32 blobs, their checks, the provider key, brute-force KNN."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from memmw.errors import InvalidVectorError as InvalidVectorError


class Embedder(Protocol):
    """What the index needs of an embedding provider (see ``memmw.embeddings.base``)."""

    @property
    def id(self) -> str: ...

    @property
    def model(self) -> str: ...

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]: ...

    def cache_key_data(self) -> dict[str, object]: ...


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

    @classmethod
    def from_arrays(cls, rowids: np.ndarray, matrix: np.ndarray) -> VectorMatrix:
        """A matrix over ``rowids`` (ascending int64) and their unit vectors, row by row."""
        made = cls.__new__(cls)
        made.rowids, made.matrix = rowids, matrix
        return made

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


def centroid_of(rows: Sequence[tuple[int, bytes]]) -> tuple[np.ndarray, int] | None:
    """``(mean, count)`` of ``(rowid, float32 blob)`` vectors (None: empty or mixed dimensions)."""
    vectors = [np.frombuffer(blob, dtype="<f4") for _, blob in rows]
    if not vectors or len({len(v) for v in vectors}) != 1:
        return None
    mean: np.ndarray = np.vstack(vectors).mean(axis=0, dtype=np.float64)
    return mean.astype(np.float32), len(vectors)


def calibrated(hits: Sequence[tuple[int, float]], median: float) -> list[tuple[int, float]]:
    """``(rowid, cosine)`` hits as ``(cos - median) / (1 - median)``, floored at 0.

    The calibration of :meth:`VectorMatrix.search` with a median given from outside
    (the query's cosine with the corpus centroid when the store searches by HNSW).
    """
    scale = 1.0 - median if median < 1.0 else 1.0
    return [(rowid, max(0.0, (cos - median) / scale)) for rowid, cos in hits]
