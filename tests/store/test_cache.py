"""The process's bounded LRU (``memmw.store.cache.RowCache``); what the stores keep
through it is checked in ``tests/store/sqlite/test_postings.py`` (segments) and
``tests/store/postgres/test_cache.py`` (chunk rows and segments)."""

from __future__ import annotations

from collections import OrderedDict

from hypothesis import given, settings
from hypothesis import strategies as st

from memmw.store.cache import RowCache

_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.integers(0, 9), st.integers(0, 40)),
        st.tuples(st.just("get"), st.integers(0, 9), st.just(0)),
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(ops=_OPS, bound=st.integers(1, 100))
def test_the_cache_keeps_at_most_its_bytes_and_drops_the_least_recently_used(
    ops: list[tuple[str, int, int]], bound: int
) -> None:
    """Against a model: the bytes kept never pass the bound, a value larger than a quarter
    of it is not kept, and the least recently used (read or written) goes first."""
    lru: RowCache[int] = RowCache(bound)
    model: OrderedDict[int, tuple[int, int]] = OrderedDict()
    for step, (op, key, size) in enumerate(ops):
        if op == "put":
            lru.put(key, step, size)
            model.pop(key, None)
            if size * 4 <= bound:
                model[key] = (step, size)
                while sum(n for _, n in model.values()) > bound:
                    model.popitem(last=False)
        else:
            want = model.get(key)
            if want is not None:
                model.move_to_end(key)
            assert lru.get(key) == (None if want is None else want[0])
        assert lru.size == sum(n for _, n in model.values()) <= bound
        assert len(lru) == len(model)
