"""Grouping requests by bytes, splitting over-long inputs, averaging piece vectors."""

from __future__ import annotations

import math
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memmw.embeddings.batching import (
    embed_with_limits,
    group_by_bytes,
    max_input_bytes_for,
    mean_vector,
    normalize,
    split_utf8,
    utf8_len,
)
from memmw.errors import ProviderError


@pytest.mark.parametrize(
    "text",
    [
        "plain ascii " * 300,
        "中文记忆测试" * 400,
        "emoji 😀🎉 mixed ünïcödé " * 200,
        "x" * 5000,
        "line one\nline two\n" * 300,
    ],
)
def test_split_keeps_text_and_respects_limit(text: str) -> None:
    pieces = split_utf8(text, 2048)
    assert "".join(pieces) == text
    assert len(pieces) > 1
    assert all(0 < utf8_len(p) <= 2048 for p in pieces)


def test_split_short_text_is_untouched() -> None:
    assert split_utf8("short", 2048) == ["short"]
    assert split_utf8("", 2048) == [""]


def test_split_prefers_whitespace_near_the_end() -> None:
    text = ("word " * 1000).strip()
    pieces = split_utf8(text, 100)
    assert all(not p.startswith(" ") for p in pieces)
    assert all(p.endswith(" ") for p in pieces[:-1])


def test_split_never_cuts_a_multibyte_character() -> None:
    text = "é" * 10  # 2 bytes each
    assert split_utf8(text, 5) == ["éé", "éé", "éé", "éé", "éé"]


def test_group_by_bytes_limits_and_order() -> None:
    texts = ["a" * 3000, "b" * 3000, "c" * 3000, "d" * 9000, "e" * 10, "f" * 10]
    groups = group_by_bytes(texts, 8000)
    assert groups == [[0, 1], [2], [3], [4, 5]]
    for g in groups:
        size = sum(utf8_len(texts[i]) for i in g)
        assert size <= 8000 or len(g) == 1  # an oversize text goes alone


def test_group_counts_bytes_not_characters() -> None:
    texts = ["中" * 1000, "中" * 1000, "中" * 1000]  # 3000 bytes each
    assert group_by_bytes(texts, 8000) == [[0, 1], [2]]


@pytest.mark.parametrize(
    ("provider", "model", "limit"),
    [
        ("openai", "text-embedding-3-small", 8192),
        ("openai", "text-embedding-3-large", 8192),
        ("openai", "text-embedding-ada-002", 8191),
        ("gemini", "gemini-embedding-001", 2048),
        ("gemini", "models/gemini-embedding-001", 2048),
        ("gemini", "some-future-model", 2048),
        ("local", "model.gguf", 2048),
        ("openai", "my-compatible-model", 8192),
        ("custom", "whatever", 8192),
    ],
)
def test_input_limits(provider: str, model: str, limit: int) -> None:
    assert max_input_bytes_for(provider, model) == limit


def test_embed_with_limits_averages_pieces_and_keeps_single_vectors() -> None:
    calls: list[list[str]] = []

    def embed(batch: list[str]) -> list[list[float]]:
        calls.append(batch)
        return [[float(len(t)), 1.0, 0.0] for t in batch]

    texts = ["short", "y" * 5000, ""]
    vectors = embed_with_limits(texts, embed, max_input_bytes=2048, max_request_bytes=8000)
    assert len(vectors) == 3
    assert vectors[0] == [5.0, 1.0, 0.0]  # one piece: as returned
    assert math.isclose(math.hypot(*vectors[1]), 1.0)  # averaged: normalised
    assert vectors[2] == [1.0, 1.0, 0.0]  # empty input sent as one space
    sent = [t for batch in calls for t in batch]
    assert all(utf8_len(t) <= 2048 for t in sent)
    assert all(sum(utf8_len(t) for t in b) <= 8000 for b in calls)


def test_embed_with_limits_concurrent_keeps_order() -> None:
    texts = [f"text {i} " + "z" * 3000 for i in range(10)]
    out = embed_with_limits(
        texts,
        lambda batch: [[float(t.split()[1]), 0.0] for t in batch],
        max_input_bytes=8192,
        concurrency=4,
    )
    assert [v[0] for v in out] == [float(i) for i in range(10)]


def test_embed_with_limits_rejects_wrong_count() -> None:
    with pytest.raises(ValueError, match="returned 0 vectors"):
        embed_with_limits(["a"], lambda batch: [], max_input_bytes=100)


def test_normalize_sanitises_non_finite() -> None:
    assert normalize([float("nan"), 3.0, float("inf"), 4.0]) == [0.0, 0.6, 0.0, 0.8]
    assert normalize([0.0, 0.0]) == [0.0, 0.0]


def test_mean_vector_weights() -> None:
    v = mean_vector([[1.0, 0.0], [0.0, 1.0]], [3.0, 1.0])
    assert v[0] > v[1] > 0
    assert math.isclose(math.hypot(*v), 1.0)


# -- after a failed request no new request of the same call is sent ------------------------


@settings(max_examples=60, deadline=None)
@given(
    outcomes=st.lists(st.booleans(), min_size=1, max_size=12),
    concurrency=st.integers(1, 5),
)
def test_once_a_request_fails_no_further_request_of_the_call_is_sent(
    outcomes: list[bool], concurrency: int
) -> None:
    """Invariant: a call returns every vector, or raises the provider's error having sent
    at most ``concurrency`` requests beyond those that succeeded (the ones already in
    flight), never the rest of the queue (a hung provider gets one wave, not several)."""
    texts = [f"text {i}" for i in range(len(outcomes))]
    sent: list[int] = []
    lock = threading.Lock()

    def embed_batch(batch: list[str]) -> list[list[float]]:
        (text,) = batch
        i = int(text.split()[1])
        with lock:
            sent.append(i)
        time.sleep(0.002)
        if not outcomes[i]:
            raise ProviderError(f"request {i} timed out")
        return [[1.0, float(i)]]

    try:
        vectors = embed_with_limits(
            texts, embed_batch, max_input_bytes=100, max_request_bytes=7,
            concurrency=concurrency,
        )
    except ProviderError:
        assert not all(outcomes)
        succeeded = sum(1 for i in sent if outcomes[i])
        assert len(sent) <= succeeded + concurrency
        if concurrency == 1:
            assert not outcomes[sent[-1]] and all(outcomes[i] for i in sent[:-1])
    else:
        assert all(outcomes) and sorted(sent) == list(range(len(outcomes)))
        assert vectors == [[1.0, float(i)] for i in range(len(outcomes))]
