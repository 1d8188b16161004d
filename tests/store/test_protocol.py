"""The store seam stays narrow: no query dialect, no vector internals, no regrowth."""

from __future__ import annotations

import inspect

from memmw.store.protocol import Store, StoreReader, StoreWriter


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
