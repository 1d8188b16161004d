"""The vector-search capability every store offers: the store picks HNSW, KNN or the matrix.

A search asks its store reader for a :class:`VectorIndex` (``reader.vector_index``) before
it embeds the query, and binds the query's unit vector to it (:meth:`VectorIndex.leg`).
Which path answers is the store's business:

* PostgreSQL with at least :data:`HNSW_MIN_VECTORS` vectors: the server's HNSW index,
  calibrated against the query's cosine with the corpus centroid (no vector read into
  the process);
* ``store.vector_backend = "sqlite-vec"``: the store's own KNN (``nearest``), raw cosine;
* otherwise the in-process :class:`~memmw.store.vectors.VectorMatrix` of the current
  generation, kept in a :class:`VectorCache` until a sync or backfill writes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from memmw.store.vectors import VectorMatrix, calibrated

#: Vectors from which a store that has an HNSW index (PostgreSQL) answers the vector leg
#: itself, calibrated against the corpus centroid (an approximation of the query's median
#: cosine). Below it the vectors are read once per generation and searched exactly, which
#: is cheap and gives the same scores as SQLite.
HNSW_MIN_VECTORS = 10_000

#: ``(limit) -> [(rowid, cosine similarity)]``, best first.
VectorLeg = Callable[[int], list[tuple[int, float]]]


class VectorReads(Protocol):
    """The vector reads each store reader has for its vector paths (inside ``store/``).

    Not part of :class:`memmw.store.protocol.StoreReader`: above the store a search asks
    ``vector_index`` only, and the store chooses which of these answer.
    """

    def generation(self) -> int: ...

    def get_meta(self, key: str) -> str | None: ...

    def nearest(
        self, vector: Sequence[float], k: int, sources: Sequence[str]
    ) -> list[tuple[int, float]]:
        """The ``k`` stored vectors of ``sources`` nearest ``vector``: ``(rowid, cosine)``,
        best first."""
        ...

    def vector_matrix(self, sources: Sequence[str], dims: int | None) -> VectorMatrix:
        """Every stored vector of ``sources`` as one matrix (only ``dims``-long ones when
        given): what the in-process vector leg searches."""
        ...

    def vector_centroid(self, sources: Sequence[str]) -> tuple[np.ndarray, int] | None:
        """``(mean, count)`` of the stored unit vectors of ``sources``; None when none.

        A query's cosine with the mean approximates its median cosine with the corpus (the
        calibration statistic) without reading every vector, for a search by HNSW.
        """
        ...


def vectors_written(store: VectorReads, sources: Sequence[str]) -> tuple[object, ...]:
    """What changes whenever the stored vectors of ``sources`` may have (a cache key).

    The epoch is the rebuild id: counters restart after a reset, the epoch never repeats,
    so a long-lived process never keeps another index's vectors.
    """
    return (
        store.generation(),
        store.get_meta("vector_generation"),
        tuple(sources),
        store.get_meta("epoch"),
    )


class VectorCache:
    """One index's vectors kept in this process between searches (matrix and centroid)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._vectors: VectorMatrix | None = None
        self._vectors_key: tuple[object, ...] | None = None
        self._centroid: tuple[np.ndarray, int] | None = None
        self._centroid_key: tuple[object, ...] | None = None

    def invalidate(self) -> None:
        """Forget the cached vectors (the index file was replaced or its WAL lost)."""
        with self._lock:
            self._vectors = self._vectors_key = None
            self._centroid = self._centroid_key = None

    def matrix(self, store: VectorReads, sources: Sequence[str], dims: int | None) -> VectorMatrix:
        """Stored vectors of the current generation (reloaded when a sync or backfill wrote)."""
        key = (*vectors_written(store, sources), dims)
        with self._lock:
            if self._vectors is None or self._vectors_key != key:
                self._vectors = store.vector_matrix(sources, dims)
                self._vectors_key = key
            return self._vectors

    def hnsw_centroid(self, store: VectorReads, sources: Sequence[str]) -> np.ndarray | None:
        """Mean stored vector of ``sources`` when there are enough vectors to search them by
        HNSW in the server (``HNSW_MIN_VECTORS``), else None; cached until a sync or backfill
        writes."""
        key = vectors_written(store, sources)
        with self._lock:
            if self._centroid_key != key:
                self._centroid = store.vector_centroid(sources)
                self._centroid_key = key
            summary = self._centroid
        if summary is None or summary[1] < HNSW_MIN_VECTORS:
            return None
        return summary[0]


class VectorIndex:
    """How one index answers the vector leg; :meth:`leg` binds it to a query vector."""

    def leg(self, unit: np.ndarray) -> VectorLeg:
        """``(limit) -> [(rowid, similarity)]`` for the unit query vector ``unit``."""
        raise NotImplementedError


class MatrixIndex(VectorIndex):
    """The in-process matrix: exact cosines, calibrated against the query's median."""

    def __init__(self, matrix: VectorMatrix, *, calibrate: bool) -> None:
        self.matrix = matrix
        self.calibrate = calibrate

    def leg(self, unit: np.ndarray) -> VectorLeg:
        matrix, calibrate = self.matrix, self.calibrate
        return lambda limit: matrix.search(unit, limit, calibrate=calibrate)


class KnnIndex(VectorIndex):
    """The store's own nearest-neighbour search (sqlite-vec's ``vec0``): raw cosines."""

    def __init__(self, store: VectorReads, sources: Sequence[str]) -> None:
        self.store = store
        self.sources = sources

    def leg(self, unit: np.ndarray) -> VectorLeg:
        store, sources = self.store, self.sources
        return lambda limit: store.nearest(unit.tolist(), limit, sources)


class HnswIndex(VectorIndex):
    """The server's HNSW index, calibrated against the query's cosine with the centroid."""

    def __init__(
        self, store: VectorReads, sources: Sequence[str], centroid: np.ndarray, *, calibrate: bool
    ) -> None:
        self.store = store
        self.sources = sources
        self.centroid = centroid
        self.calibrate = calibrate

    def leg(self, unit: np.ndarray) -> VectorLeg:
        store, sources = self.store, self.sources
        median = float(unit @ self.centroid) if self.calibrate else None
        return lambda limit: hnsw_hits(store, unit, limit, sources, median)


def hnsw_hits(
    store: VectorReads, unit: np.ndarray, limit: int, sources: Sequence[str], median: float | None
) -> list[tuple[int, float]]:
    """The store's own nearest vectors (HNSW), calibrated against ``median`` when given."""
    hits = store.nearest(unit.tolist(), limit, sources)
    return hits if median is None else calibrated(hits, median)


def choose_vector_index(
    store: VectorReads,
    sources: Sequence[str],
    dims: int | None,
    cache: VectorCache,
    *,
    calibrate: bool,
    knn: bool,
    hnsw: bool,
) -> VectorIndex | None:
    """The path that answers this index's vector leg, or None when it has no vectors.

    Called by each store's ``vector_index`` with what it can do: ``hnsw`` (a server-side
    HNSW index, used from :data:`HNSW_MIN_VECTORS` vectors) and ``knn`` (its own KNN
    table). Runs before the query is embedded: a store that cannot answer fails first.
    """
    centroid = cache.hnsw_centroid(store, sources) if dims and hnsw else None
    if centroid is not None:
        return HnswIndex(store, sources, centroid, calibrate=calibrate)
    if knn:
        if not dims:
            return None
        store.nearest([0.0] * int(dims), 1, sources)  # fail before embedding
        return KnnIndex(store, sources)
    matrix = cache.matrix(store, sources, dims)
    if not len(matrix):
        return None
    return MatrixIndex(matrix, calibrate=calibrate)
