"""Search tests run against every store: SQLite and the in-memory store."""

from __future__ import annotations

import pytest

from ..conftest import use_store_backend


@pytest.fixture(autouse=True, params=["sqlite", "memory"])
def store_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every ``Memory`` of these tests runs once on SQLite and once on the in-memory store
    (``store.backend = "memory"``), through the real store factory."""
    return use_store_backend(request.param, monkeypatch)
