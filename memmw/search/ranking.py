"""Score adjustments after the merge: temporal decay, importance and MMR diversity."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, TypeVar

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


def jaccard(a: frozenset[Any], b: frozenset[Any]) -> float:
    """Jaccard similarity; two empty sets are identical, one empty set shares nothing."""
    if not a and not b:
        return 1.0
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


T = TypeVar("T")


def mmr_order(
    items: Sequence[T], scores: Sequence[float], token_sets: Sequence[frozenset[Any]], lam: float
) -> list[T]:
    """Greedy maximal-marginal-relevance order of ``items``.

    Picks, at each step, the item maximising ``lam * norm_score - (1 - lam) * max
    similarity to those already picked``; scores are min-max normalised and ties go to the
    higher raw score. ``lam = 1`` is a plain sort by score.
    """
    n = len(items)
    if n <= 1 or lam >= 1.0:
        return [items[i] for i in sorted(range(n), key=lambda i: -scores[i])]
    lo, hi = min(scores), max(scores)
    norm = [1.0 if hi == lo else (s - lo) / (hi - lo) for s in scores]
    remaining = list(range(n))
    chosen: list[int] = []
    max_sim = [0.0] * n
    while remaining:
        best = max(remaining, key=lambda i: (lam * norm[i] - (1 - lam) * max_sim[i], scores[i]))
        chosen.append(best)
        remaining.remove(best)
        for i in remaining:
            max_sim[i] = max(max_sim[i], jaccard(token_sets[i], token_sets[best]))
    return [items[i] for i in chosen]
