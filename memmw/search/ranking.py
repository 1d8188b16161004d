"""Score adjustments after the merge: temporal decay, importance and MMR diversity."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypeVar

import numpy as np

from memmw.config import TemporalDecayConfig

DAY_S = 86_400.0


def decay_multiplier(
    ts: float | None, *, config: TemporalDecayConfig, now: float, newest: float | None
) -> float:
    """How much a memory dated ``ts`` keeps of its score (1.0 for evergreen memories).

    ``classic`` is the original ``exp(-ln2/h * age)`` against the clock. ``bounded``
    (default) measures age against the newest dated memory and never goes below
    ``floor``, so an old memory that clearly matches still beats a new one that barely
    does.
    """
    if ts is None or not config.enabled:
        return 1.0
    reference = now if config.reference == "now" or newest is None else newest
    age_days = max(0.0, reference - ts) / DAY_S
    fresh = math.exp(-math.log(2) / config.half_life_days * age_days)
    if config.mode == "classic":
        return fresh
    return config.floor + (1.0 - config.floor) * fresh


def importance_multiplier(importance: int | None) -> float:
    """``<!-- importance: N -->`` weight: 0.80 (N=1) .. 1.25 (N=10); 1.0 when absent."""
    if importance is None:
        return 1.0
    return 0.75 + 0.05 * max(1, min(10, int(importance)))


def jaccard_matrix(token_sets: Sequence[np.ndarray]) -> np.ndarray:
    """Pairwise Jaccard similarity of sets of distinct integers (term hashes).

    Two empty sets are identical (1.0); an empty set shares nothing with another (0.0).
    Each ratio is the same division of integers a per-pair ``len(a & b) / len(a | b)``
    does, so the values are exact.
    """
    n = len(token_sets)
    sizes = np.asarray([len(s) for s in token_sets], dtype=np.int64)
    every = np.concatenate([np.asarray(s, dtype=np.int64) for s in token_sets]) if n else sizes
    common = np.zeros((n, n), dtype=np.int64)
    if len(every):
        labels, column = np.unique(every, return_inverse=True)
        member = np.zeros((n, len(labels)), dtype=bool)
        member[np.repeat(np.arange(n), sizes), column] = True
        # Set i's terms, looked up in every set (a gather, not a matrix product: BLAS
        # threads cost more than the counting at this size).
        ends = np.cumsum(sizes)
        for i in range(n):
            common[i] = member[:, column[ends[i] - sizes[i] : ends[i]]].sum(axis=1)
    union = sizes[:, None] + sizes[None, :] - common
    similarity: np.ndarray = np.where(union > 0, common / np.maximum(union, 1), 1.0)
    return similarity


T = TypeVar("T")


def mmr_order(
    items: Sequence[T], scores: Sequence[float], token_sets: Sequence[np.ndarray], lam: float
) -> list[T]:
    """Greedy maximal-marginal-relevance order of ``items``.

    Picks, at each step, the item maximising ``lam * norm_score - (1 - lam) * max
    similarity to those already picked`` (Jaccard similarity of the items' distinct term
    hashes, ``token_sets``); scores are min-max normalised and ties go to the higher raw
    score. ``lam = 1`` is a plain sort by score.
    """
    n = len(items)
    if n <= 1 or lam >= 1.0:
        return [items[i] for i in sorted(range(n), key=lambda i: -scores[i])]
    lo, hi = min(scores), max(scores)
    norm = [1.0 if hi == lo else (s - lo) / (hi - lo) for s in scores]
    similarity = jaccard_matrix(token_sets).tolist()
    remaining = list(range(n))
    chosen: list[int] = []
    max_sim = [0.0] * n
    while remaining:
        best = max(remaining, key=lambda i: (lam * norm[i] - (1 - lam) * max_sim[i], scores[i]))
        chosen.append(best)
        remaining.remove(best)
        row = similarity[best]
        for i in remaining:
            max_sim[i] = max(max_sim[i], row[i])
    return [items[i] for i in chosen]
