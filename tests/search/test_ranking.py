"""Ranking: temporal decay (bounded and classic), importance, Jaccard, MMR."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memmw.config import TemporalDecayConfig
from memmw.search.ranking import (
    DAY_S,
    _Overlap,
    decay_multiplier,
    importance_multiplier,
    mmr_picks,
)
from memmw.store.terms import term_hash

NOW = 1_800_000_000.0


def test_classic_decay_is_the_original_exponential() -> None:
    cfg = TemporalDecayConfig.classic()
    assert decay_multiplier(NOW, config=cfg, now=NOW, newest=None) == 1.0
    assert decay_multiplier(NOW - 30 * DAY_S, config=cfg, now=NOW, newest=None) == pytest.approx(
        0.5
    )
    assert decay_multiplier(NOW - 90 * DAY_S, config=cfg, now=NOW, newest=None) == pytest.approx(
        0.125
    )
    expected = math.exp(-math.log(2) / 30 * 365)
    assert decay_multiplier(NOW - 365 * DAY_S, config=cfg, now=NOW, newest=NOW) == pytest.approx(
        expected
    )
    # Classic measures against the clock, even when newer memories exist.
    assert decay_multiplier(
        NOW - 30 * DAY_S, config=cfg, now=NOW, newest=NOW - 30 * DAY_S
    ) == pytest.approx(0.5)


def test_bounded_decay_never_goes_below_the_floor() -> None:
    cfg = TemporalDecayConfig()
    floor = cfg.floor
    assert decay_multiplier(NOW - 30 * DAY_S, config=cfg, now=NOW, newest=NOW) == pytest.approx(
        floor + (1 - floor) * 0.5
    )
    assert decay_multiplier(NOW - 10_000 * DAY_S, config=cfg, now=NOW, newest=NOW) == pytest.approx(
        floor
    )
    custom = TemporalDecayConfig(floor=0.5, half_life_days=10)
    assert decay_multiplier(NOW - 10 * DAY_S, config=custom, now=NOW, newest=NOW) == pytest.approx(
        0.75
    )


def test_bounded_decay_measures_age_from_the_newest_memory() -> None:
    cfg = TemporalDecayConfig()
    newest = NOW - 400 * DAY_S  # the workspace was left alone for a year
    assert decay_multiplier(newest, config=cfg, now=NOW, newest=newest) == 1.0
    a = decay_multiplier(newest - 30 * DAY_S, config=cfg, now=NOW, newest=newest)
    assert a == pytest.approx(cfg.floor + (1 - cfg.floor) * 0.5)
    now_ref = TemporalDecayConfig(reference="now")
    assert decay_multiplier(newest, config=now_ref, now=NOW, newest=newest) < 0.9
    # No dated memories yet: fall back to the clock.
    assert decay_multiplier(NOW, config=cfg, now=NOW, newest=None) == 1.0


def test_evergreen_future_and_disabled() -> None:
    cfg = TemporalDecayConfig()
    assert decay_multiplier(None, config=cfg, now=NOW, newest=NOW) == 1.0
    assert decay_multiplier(NOW + 5 * DAY_S, config=cfg, now=NOW, newest=None) == 1.0
    off = TemporalDecayConfig(enabled=False)
    assert decay_multiplier(NOW - 1000 * DAY_S, config=off, now=NOW, newest=NOW) == 1.0


@pytest.mark.parametrize(
    ("importance", "expected"),
    [(None, 1.0), (1, 0.8), (5, 1.0), (8, 1.15), (10, 1.25), (0, 0.8), (42, 1.25)],
)
def test_importance_multiplier(importance: int | None, expected: float) -> None:
    assert importance_multiplier(importance) == pytest.approx(expected)


def jaccard_matrix(token_sets: list[np.ndarray]) -> np.ndarray:
    """Every row MMR can ask for, as one matrix."""
    n = len(token_sets)
    overlap = _Overlap(token_sets)
    return np.asarray([overlap.row(i) for i in range(n)], dtype=np.float64).reshape(n, n)


def mmr_order(
    items: list[str] | list[int], scores: list[float], token_sets: list[np.ndarray], lam: float
) -> list[object]:
    """``items`` in the order ``mmr_picks`` gives."""
    return [items[i] for i in mmr_picks(scores, token_sets, lam)]


def ids(*sets: set[str]) -> list[np.ndarray]:
    """Sets of words as the distinct integer ids the ranking functions take."""
    return [np.asarray(sorted(term_hash(w) for w in s), dtype=np.int64) for s in sets]


def test_jaccard_matrix() -> None:
    sim = jaccard_matrix(ids(set(), set(), {"a", "b"}, {"b", "c"}))
    assert sim[0, 1] == 1.0  # two empty sets are identical
    assert sim[0, 2] == 0.0 and sim[2, 0] == 0.0
    assert sim[2, 2] == 1.0
    assert sim[2, 3] == 1 / 3
    assert jaccard_matrix([]).shape == (0, 0)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sets(st.integers(-(2**63), 2**63 - 1) | st.integers(0, 30)), max_size=8))
def test_jaccard_matrix_equals_the_set_formula(sets: list[set[int]]) -> None:
    """Every entry is exactly ``len(a & b) / len(a | b)`` (1.0 for two empty sets)."""
    sim = jaccard_matrix([np.asarray(sorted(s), dtype=np.int64) for s in sets])
    for i, a in enumerate(sets):
        for j, b in enumerate(sets):
            assert sim[i, j] == (len(a & b) / len(a | b) if a or b else 1.0)


def test_mmr_demotes_near_duplicates() -> None:
    items = ["A", "B", "C"]
    scores = [1.0, 0.95, 0.92]
    sets = ids({"x", "y"}, {"x", "y"}, {"p", "q"})
    assert mmr_order(items, scores, sets, 0.7) == ["A", "C", "B"]
    assert mmr_order(items, scores, sets, 1.0) == ["A", "B", "C"]


def test_mmr_edge_cases() -> None:
    assert mmr_order([], [], [], 0.7) == []
    assert mmr_order(["only"], [0.3], ids(set()), 0.7) == ["only"]
    # Equal scores: diversity decides after the first pick (ties go to the higher raw score).
    sets = ids({"a"}, {"a"}, {"b"})
    assert mmr_order(["1", "2", "3"], [0.5, 0.5, 0.5], sets, 0.5) == ["1", "3", "2"]
    assert sorted(mmr_order(list("abcd"), [0.1, 0.9, 0.5, 0.3], ids(*[set()] * 4), 0.7)) == list(
        "abcd"
    )


def reference_mmr(scores: list[float], sets: list[set[int]], lam: float) -> list[int]:
    """MMR as first written: the whole similarity matrix by the set formula, then greedy."""
    n = len(scores)
    if n <= 1 or lam >= 1.0:
        return sorted(range(n), key=lambda i: -scores[i])
    lo, hi = min(scores), max(scores)
    norm = [1.0 if hi == lo else (s - lo) / (hi - lo) for s in scores]
    similarity = [[len(a & b) / len(a | b) if a or b else 1.0 for b in sets] for a in sets]
    remaining = list(range(n))
    chosen: list[int] = []
    max_sim = [0.0] * n
    while remaining:
        best = max(remaining, key=lambda i: (lam * norm[i] - (1 - lam) * max_sim[i], scores[i]))
        chosen.append(best)
        remaining.remove(best)
        for i in remaining:
            max_sim[i] = max(max_sim[i], similarity[best][i])
    return chosen


@settings(max_examples=300, deadline=None)
@given(
    data=st.lists(
        st.tuples(
            st.sampled_from([0.0, 0.25, 0.5, 1.0]) | st.floats(-2.0, 2.0),
            st.sets(st.integers(0, 12) | st.integers(-(2**63), 2**63 - 1), max_size=8),
        ),
        max_size=12,
    ),
    lam=st.sampled_from([0.0, 0.3, 0.5, 0.7, 1.0]) | st.floats(0.0, 1.0),
    taken=st.integers(0, 12),
)
def test_mmr_picks_equal_the_reference(
    data: list[tuple[float, set[int]]], lam: float, taken: int
) -> None:
    """Same order as the full-matrix MMR, also when a caller stops after a few picks."""
    scores = [s for s, _ in data]
    sets = [t for _, t in data]
    arrays = [np.asarray(sorted(t), dtype=np.int64) for t in sets]
    expected = reference_mmr(scores, sets, lam)
    assert mmr_order(list(range(len(data))), scores, arrays, lam) == expected
    picks = mmr_picks(scores, arrays, lam)
    assert [next(picks) for _ in range(min(taken, len(data)))] == expected[:taken]
