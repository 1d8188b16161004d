"""Score adjustments after the merge: temporal decay, importance and MMR diversity."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

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


class _Overlap:
    """Jaccard similarity of one set to every set, a row at a time (sets of distinct ints).

    MMR needs the rows of its first picks only, so rows are computed on demand: one
    stable sort labels equal integers across all sets, then a row marks one set's labels
    and counts, per set, the marked labels it holds.
    """

    def __init__(self, token_sets: Sequence[np.ndarray]) -> None:
        n = len(token_sets)
        lengths = list(map(len, token_sets))
        self.sizes = np.asarray(lengths, dtype=np.int64)
        self.empty = [i for i, size in enumerate(lengths) if not size]
        every = (
            np.concatenate([np.asarray(s, dtype=np.int64) for s in token_sets])
            if n
            else np.zeros(0, dtype=np.int64)
        )
        self.starts = np.zeros(n, dtype=np.int64)
        np.cumsum(self.sizes[:-1], out=self.starts[1:])
        # Stable: several times faster than the default introsort for int64 here.
        order = np.argsort(every, kind="stable")
        ranked = every[order]
        first = np.ones(len(ranked), dtype=bool)
        np.not_equal(ranked[1:], ranked[:-1], out=first[1:])
        labels = np.cumsum(first)  # 1.. for the distinct integers
        self.n_labels = int(labels[-1]) if len(labels) else 0
        # Label 0, never marked, ends the list: every start is a valid index (the sets
        # after the last element are empty) and the last set's sum ends there.
        self.label = np.zeros(len(every) + 1, dtype=np.int64)
        self.label[order] = labels

    def row(self, i: int) -> list[float]:
        """``len(a & b) / len(a | b)`` of set ``i`` and each set (1.0 for two empty sets).

        Each ratio is the same division of integers a per-pair computation does, so the
        values are exact.
        """
        label, sizes, start = self.label, self.sizes, self.starts[i]
        mark = np.zeros(self.n_labels + 1, dtype=bool)
        mark[label[start : start + sizes[i]]] = True
        common = np.add.reduceat(mark[label], self.starts, dtype=np.int64)
        if self.empty:  # reduceat gives an empty set (equal starts) the next element
            common[self.empty] = 0
        similarity: list[float] = (common / np.maximum(sizes[i] + sizes - common, 1)).tolist()
        if not sizes[i]:
            for j in self.empty:  # two empty sets are identical
                similarity[j] = 1.0
        return similarity


def mmr_picks(
    scores: Sequence[float], token_sets: Sequence[np.ndarray], lam: float
) -> Iterator[int]:
    """Indices in greedy maximal-marginal-relevance order, lazily.

    Picks, at each step, the item maximising ``lam * norm_score - (1 - lam) * max
    similarity to those already picked`` (Jaccard similarity of the items' distinct term
    hashes, ``token_sets``); scores are min-max normalised and ties go to the higher raw
    score, then to the earlier item. ``lam = 1`` is a plain sort by score. A caller that
    needs only the first few picks stops early: a pick's similarities to the others are
    computed only when the next pick needs them.
    """
    n = len(scores)
    if n <= 1 or lam >= 1.0:
        yield from sorted(range(n), key=lambda i: -scores[i])
        return
    lo, hi = min(scores), max(scores)
    relevance = [lam * (1.0 if hi == lo else (s - lo) / (hi - lo)) for s in scores]
    spread = 1 - lam
    overlap: _Overlap | None = None
    remaining = list(range(n))
    max_sim = [0.0] * n
    while True:
        best = max(remaining, key=lambda i: (relevance[i] - spread * max_sim[i], scores[i]))
        yield best
        remaining.remove(best)
        if not remaining:
            return
        if overlap is None:
            overlap = _Overlap(token_sets)
        row = overlap.row(best)
        for i in remaining:
            if row[i] > max_sim[i]:
                max_sim[i] = row[i]
