"""Fixtures shared by the engine tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from memmw.embeddings.registry import register_provider, unregister_provider
from memmw.testing import FakeEmbeddingProvider


@pytest.fixture
def counting() -> Iterator[FakeEmbeddingProvider]:
    """The deterministic fake provider under the name ``counting``; it counts embed calls."""
    provider = FakeEmbeddingProvider(dims=32)
    register_provider("counting", lambda config: provider, replace=True)
    yield provider
    unregister_provider("counting")
