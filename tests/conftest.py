"""Shared test configuration: hypothesis profiles (CI runs derandomized, so a red build
always reproduces; ``HYPOTHESIS_PROFILE=deep`` searches much harder on a workstation), the
helpers the test modules import (``from ..conftest import write, make_memory``) and the
PostgreSQL fixtures (``pg_dsn``, ``pg_database``)."""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest
from hypothesis import settings

from memmw import Memory, MemoryConfig
from memmw.testing import require_optional

settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("deep", max_examples=3000)
_profile = os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else None)
if _profile:
    settings.load_profile(_profile)

# What memmw keeps in the user's cache folder (the dictionary tables of
# memmw.text.lexicon) goes to a folder of this test run, never the real one.
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="memmw-test-cache-")


def write(path: Path, text: str = "x\n") -> Path:
    """Write ``text`` (UTF-8) to ``path``, creating its folders; returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


#: What tests search with unless they say otherwise: keyword only, no provider to start.
KEYWORD_ONLY = MemoryConfig(provider="none")


def make_memory(
    root: Path | None = None,
    files: dict[str, str] | None = None,
    *,
    config: MemoryConfig | None = None,
    workspace: Path | None = None,
    state_dir: Path | None = None,
    agent_id: str = "main",
    sync: bool = False,
) -> Memory:
    """The one way tests build a ``Memory``: workspace ``root/ws`` or ``workspace`` (its
    ``memory/`` folder made, unless both ``workspace`` and ``state_dir`` are given), with
    ``files`` written (relative path -> text), state in ``root/state`` or ``state_dir``,
    keyword-only unless ``config`` says otherwise; synced first with ``sync``. Close it
    (or use ``with``).

    Build a ``Memory`` directly only to test its constructor or special wiring.
    """
    if root is None and (workspace is None or state_dir is None):
        raise TypeError("make_memory needs root, or both workspace and state_dir")
    if workspace is None or state_dir is None:
        assert root is not None
        workspace = workspace if workspace is not None else root / "ws"
        state_dir = state_dir if state_dir is not None else root / "state"
        (workspace / "memory").mkdir(parents=True, exist_ok=True)
    for rel, text in (files or {}).items():
        write(workspace / rel, text)
    mem = Memory(workspace=workspace, state_dir=state_dir, agent_id=agent_id,
                 config=config or KEYWORD_ONLY)
    if sync:
        mem.sync()
    return mem


def use_store_backend(backend: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Make every ``Memory`` built from now on use ``backend`` (``sqlite`` or ``memory``).

    A test whose config asks for the ``fts5`` keyword backend is skipped on the
    in-memory store (it has no full-text index).
    """
    if backend == "sqlite":
        return backend
    import dataclasses

    from memmw.engine import memory as engine_memory

    real = engine_memory.create_store

    def create(config: MemoryConfig, **kwargs: Any) -> Any:
        if config.store.keyword_backend == "fts5":
            pytest.skip("the in-memory store has no full-text index (fts5)")
        store = dataclasses.replace(config.store, backend=backend)
        return real(dataclasses.replace(config, store=store), **kwargs)

    monkeypatch.setattr(engine_memory, "create_store", create)
    return backend


# --- PostgreSQL + pgvector (the Postgres store's tests) ---------------------------------------
# `make test` starts a local server (scripts/pgserver.py) and exports its DSN; after `make pg`
# a plain `pytest` finds it through .cache/pgserver/dsn. Under CI a missing server fails the
# tests that need it; on a workstation they skip with the reason.
PG_DSN_ENV = "MEMMW_TEST_PG_DSN"
_PG_DSN_FILE = Path(__file__).resolve().parent.parent / ".cache" / "pgserver" / "dsn"


def _pg_unavailable(reason: str) -> NoReturn:
    if os.environ.get("CI"):
        pytest.fail(f"PostgreSQL is required under CI: {reason}", pytrace=False)
    pytest.skip(reason)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that uses a PostgreSQL fixture ``postgres`` (``-m "not postgres"``)."""
    for item in items:
        if {"pg_dsn", "pg_database", "pg_store"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.postgres)


@pytest.fixture(scope="session")
def pg_dsn() -> str:
    """DSN of a PostgreSQL server with pgvector, connected as a role that may create databases."""
    require_optional("psycopg", "postgres")
    import psycopg

    dsn = os.environ.get(PG_DSN_ENV, "").strip()
    explicit = bool(dsn)
    if not dsn and _PG_DSN_FILE.exists():
        dsn = _PG_DSN_FILE.read_text(encoding="utf-8").strip()
    if not dsn:
        _pg_unavailable(
            f"no PostgreSQL server: set {PG_DSN_ENV} or run `make pg` (`make test` starts one)"
        )
    try:
        with psycopg.connect(dsn, connect_timeout=10, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except psycopg.Error as exc:
        reason = f"PostgreSQL at {dsn} is unusable: {exc}"
        if explicit:
            pytest.fail(reason, pytrace=False)
        _pg_unavailable(reason + f" (stale {_PG_DSN_FILE}? run `make pg`)")
    return dsn


@pytest.fixture(scope="module")
def pg_database(pg_dsn: str) -> Iterator[str]:
    """DSN of a fresh database (with pgvector) for one test module, dropped afterwards."""
    import psycopg
    from psycopg import sql
    from psycopg.conninfo import make_conninfo

    name = f"memmw_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    dsn = make_conninfo(pg_dsn, dbname=name)
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        yield dsn
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


@pytest.fixture
def pg_store(pg_database: str) -> Iterator[object]:
    """A fresh, empty PostgreSQL store (its own namespace in the module's database).

    For the store conformance suite: parametrise its store fixture over ``"postgres"`` and
    take this one with ``request.getfixturevalue("pg_store")``.
    """
    from memmw.store.postgres.backend import PostgresStore

    store = PostgresStore(pg_database, agent_id=f"agent-{uuid.uuid4().hex[:12]}", pool_size=4)
    try:
        yield store
    finally:
        store.close()


@pytest.fixture
def recording_provider() -> Iterator[Any]:
    """A deterministic embedding provider registered as ``recording`` that keeps every
    query text it embeds (``.queries``): what the vector leg was asked to embed."""
    from memmw.embeddings.registry import register_provider, unregister_provider
    from memmw.testing import FakeEmbeddingProvider

    class Recording(FakeEmbeddingProvider):
        def __init__(self) -> None:
            super().__init__(dims=16)
            self.queries: list[str] = []

        def embed_query(self, text: str) -> list[float]:
            self.queries.append(text)
            return super().embed_query(text)

    provider = Recording()
    register_provider("recording", lambda config: provider, replace=True)
    try:
        yield provider
    finally:
        unregister_provider("recording")
