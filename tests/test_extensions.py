"""The public extension module: each extension point works through it alone."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memmw import MemoryConfig
from memmw.extensions import (
    EmbeddingProvider,
    available_providers,
    register_provider,
    unregister_provider,
    write_active_context,
)
from memmw.testing import FakeEmbeddingProvider

from .conftest import make_memory


@pytest.fixture()
def custom_provider() -> Iterator[str]:
    register_provider("my-embedder", lambda config: FakeEmbeddingProvider(dims=16))
    try:
        yield "my-embedder"
    finally:
        unregister_provider("my-embedder")


def test_a_registered_provider_serves_hybrid_search(tmp_path: Path, custom_provider: str) -> None:
    assert custom_provider in available_providers()
    files = {"memory/2026-01-02.md": "The gateway runs on port 8080.\n"}
    config = MemoryConfig(provider=custom_provider)
    with make_memory(tmp_path, files, config=config) as mem:
        mem.sync()
        assert isinstance(mem.provider, EmbeddingProvider)
        found = mem.search_result("gateway port")
    assert (found.provider, found.mode) == ("fake", "hybrid")
    assert found.hits[0].path == "memory/2026-01-02.md"


def test_write_active_context_replaces_the_file(tmp_path: Path) -> None:
    write_active_context(tmp_path, "first")
    assert write_active_context(tmp_path, "now: the release") == len("now: the release\n")
    assert (tmp_path / "active-context.md").read_text() == "now: the release\n"
