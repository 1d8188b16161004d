"""The term identity: hashes and per-chunk counts equal their definitions."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memmw.store import terms as terms_module
from memmw.store.terms import term_counts, term_hash
from memmw.text.analysis import WordMemo, terms

_TEXT = st.text(
    st.sampled_from(list("ab Zé’-_ 1\n\tPaint painted PAINTS\x00\x7f中文猫ミケ한국𠀀ꀀ\u3000ﬁＡ")) | st.characters(),
    max_size=80,
)


def _expected(text: str) -> tuple[list[int], list[int], int]:
    counts = Counter(terms(text))
    return [term_hash(t) for t in counts], [min(n, 65535) for n in counts.values()], counts.total()


@settings(max_examples=300, deadline=None)
@given(_TEXT)
def test_term_counts_equal_counting_the_terms(text: str) -> None:
    hashes, tf, length = term_counts(text)
    assert hashes.dtype == np.int64 and tf.dtype == np.uint16
    # The same terms, counts and order (first occurrence) as counting terms() one by one.
    assert (hashes.tolist(), tf.tolist(), length) == _expected(text)


def test_words_sharing_a_stem_add_up_in_first_occurrence_order() -> None:
    hashes, tf, length = term_counts("Paints, the painted PAINT; the end")
    assert (hashes.tolist(), tf.tolist(), length) == _expected("Paints, the painted PAINT; the end")
    assert tf.tolist() == [3, 2, 1]


def test_counts_clamp_at_uint16() -> None:
    hashes, tf, length = term_counts("tea " * 70_000 + "cup")
    assert tf.tolist() == [65535, 1] and length == 70_001
    assert hashes.tolist() == [term_hash("tea"), term_hash("cup")]


def test_word_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    cache = WordMemo(terms_module._word_hash, 3)
    monkeypatch.setattr(terms_module, "_WORD_HASHES", cache)
    for word in ("alpha", "beta", "gamma", "delta", "epsilon"):
        assert term_counts(word)[0].tolist() == [term_hash(terms(word)[0])]
        assert len(cache) <= 3
