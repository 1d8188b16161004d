"""The deterministic fake provider in ``memmw.testing``."""

from __future__ import annotations

import math

import pytest

from memmw.embeddings.base import EmbeddingProvider
from memmw.errors import ProviderError
from memmw.testing import FakeEmbeddingProvider, fake_vector


def _cos(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_deterministic_and_normalised() -> None:
    a = FakeEmbeddingProvider(dims=32)
    b = FakeEmbeddingProvider(dims=32)
    assert isinstance(a, EmbeddingProvider)
    v = a.embed_query("The quick brown fox")
    assert v == b.embed_documents(["The quick brown fox"])[0]
    assert v == fake_vector("the quick BROWN fox", 32)  # case-insensitive
    assert len(v) == 32 and math.isclose(math.hypot(*v), 1.0)
    # stable across processes and runs (no use of Python's salted hash())
    expected = [-0.3162, 0.0, 0.3162, -0.6325, 0.0, 0.0, -0.6325, 0.0]
    assert [round(x, 4) for x in fake_vector("memory", 8)] == expected


def test_similar_texts_score_higher() -> None:
    p = FakeEmbeddingProvider(dims=256)
    q = p.embed_query("what is my cat called")
    near, far = p.embed_documents(["my cat is called Miso", "quarterly revenue grew by 4%"])
    assert _cos(q, near) > _cos(q, far)
    assert _cos(p.embed_query("cats"), p.embed_query("cat")) > 0.2  # shared trigrams


def test_empty_text_gives_zero_vector() -> None:
    assert FakeEmbeddingProvider(dims=4).embed_query("  ") == [0.0] * 4


def test_fail_n_times_then_recover_and_counts() -> None:
    p = FakeEmbeddingProvider(fail_times=2)
    for _ in range(2):
        with pytest.raises(ProviderError, match="500"):
            p.embed_query("x")
    assert len(p.embed_documents(["a", "b"])) == 2
    assert (p.calls, p.query_calls, p.document_calls, p.texts_embedded) == (3, 2, 1, 2)


def test_fail_forever_with_custom_error() -> None:
    p = FakeEmbeddingProvider()
    p.fail(error=TimeoutError("slow"))
    for _ in range(3):
        with pytest.raises(TimeoutError):
            p.embed_documents(["x"])
    p.recover()
    assert p.embed_query("x")
    p.fail(1)
    with pytest.raises(TimeoutError):
        p.embed_query("x")
    assert p.embed_query("x")


def test_identity() -> None:
    p = FakeEmbeddingProvider(dims=7, model="m", provider_id="fake")
    assert (p.id, p.model, p.dims) == ("fake", "m", 7)
    assert p.cache_key_data() == {"provider": "fake", "model": "m", "dims": 7}
    with pytest.raises(ValueError):
        FakeEmbeddingProvider(dims=0)
