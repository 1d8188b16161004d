"""A small workspace with people, projects, aliases and superseded values."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memmw import Memory, MemoryConfig
from memmw.config import ActiveMemoryConfig

from ..conftest import make_memory, use_store_backend, write

MEMORY_MD = """# Memory

## Alice Martin (Ali)
- aka: 爱丽丝
- city: Berlin
- employer: Acme Corp
- works_at [[Acme Corp]]
- [preference] flat white, no sugar

## People
- Bob Stone (Bobby): CFO at Acme
- Carol Diaz leads Project Atlas

## Project Atlas
- status: design review
- database: Postgres
- Use SQLite for the local cache <!-- trigger: local cache, offline storage -->
"""

DAILY = """# 2026-05-01
## Alice Martin
- city: Lisbon
Alice and Bob had lunch in Lisbon.
"""


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    write(root / "MEMORY.md", MEMORY_MD)
    write(root / "memory" / "2026-05-01.md", DAILY)
    write(root / "memory" / "topics" / "ops.md", "## Gateway\n- port: 8443\n- host: gw.internal\n")
    return root


@pytest.fixture()
def mem(ws: Path, tmp_path: Path) -> Iterator[Memory]:
    config = MemoryConfig(provider="none", active_memory=ActiveMemoryConfig(edit_tools=True))
    m = make_memory(tmp_path, workspace=ws, config=config, sync=True)
    yield m
    m.close()


@pytest.fixture(autouse=True, params=["sqlite", "memory"])
def store_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every ``Memory`` of these tests runs once on SQLite and once on the in-memory store
    (``store.backend = "memory"``), through the real store factory."""
    return use_store_backend(request.param, monkeypatch)
