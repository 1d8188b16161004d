"""The store seam stays narrow: no query dialect, no vector internals, no regrowth; and its
shared helpers over sorted postings."""

from __future__ import annotations

import inspect

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from memmw.store.protocol import Store, StoreReader, StoreWriter, find_sorted, first_of_runs


def methods(cls: type) -> set[str]:
    return {
        name
        for name, obj in vars(cls).items()
        if not name.startswith("_") and (inspect.isfunction(obj) or isinstance(obj, property))
    }


def test_the_protocol_is_no_wider_than_today() -> None:
    # e552b82: 57 (reader + writer 40, store 17). The vector reads (nearest,
    # vector_matrix, vector_centroid) and two unused reads (sources_present,
    # chunk_count) left; vector_index, warm_vectors and folder_cache came.
    assert len(methods(StoreReader) | methods(StoreWriter)) + len(methods(Store)) <= 55


def test_no_query_dialect_or_vector_internals_cross_the_seam() -> None:
    every = methods(StoreReader) | methods(StoreWriter) | methods(Store)
    assert not {"nearest", "vector_matrix", "vector_centroid", "sources_present"} & every
    for cls in (StoreReader, StoreWriter, Store):
        for name in methods(cls):
            obj = vars(cls)[name]
            if inspect.isfunction(obj):
                params = set(inspect.signature(obj).parameters)
                assert not {"match", "sql", "query"} & params, f"{cls.__name__}.{name}"


@settings(max_examples=200, deadline=None)
@given(ordered=st.lists(st.integers(-5, 60), unique=True).map(sorted),
       values=st.lists(st.integers(-10, 70)))
def test_find_sorted_says_where_each_value_is_whatever_the_values(
    ordered: list[int], values: list[int]
) -> None:
    """Values before, between, on and past the ordered ones, repeated or not, against an
    empty array too: found exactly where present, and at its index there."""
    found, at = find_sorted(np.asarray(ordered, dtype=np.int64), np.asarray(values, dtype=np.int64))
    assert found.tolist() == [v in ordered for v in values]
    assert [int(a) for a, f in zip(at, found, strict=True) if f] == [
        ordered.index(v) for v in values if v in ordered
    ]


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.integers(-3, 6)).map(sorted))
def test_first_of_runs_keeps_each_value_once(values: list[int]) -> None:
    """Any sorted values, repeated or not, none or one: the mask marks each value's first."""
    ordered = np.asarray(values, dtype=np.int64)
    first = first_of_runs(ordered)
    assert first.tolist() == [i == 0 or values[i] != values[i - 1] for i in range(len(values))]
    assert ordered[first].tolist() == sorted(set(values))
