"""Store factories for the conformance suite: every test runs once per store implementation.

A factory is ``make(agent_id="main") -> Store``; stores it makes for different agents
share one backend location (one state folder, one database), so the suite can check
that agents never see each other's rows. Add a backend by adding its factory to
``FACTORIES``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from memmw.store.protocol import Store

StoreFactory = Callable[..., Store]

#: DSN of a scratch PostgreSQL database (with pgvector) for the ``postgres`` factory.
PG_DSN_ENV = "MEMMW_TEST_PG_DSN"


def sqlite_factory(request: pytest.FixtureRequest, tmp_path: Path) -> StoreFactory:
    """SQLite keeps one file per agent: agents of one state folder are separate files."""
    from memmw.store.sqlite.backend import SqliteStore

    def make(agent_id: str = "main") -> Store:
        return SqliteStore(tmp_path / "state" / "memory" / f"{agent_id}.sqlite", agent_id=agent_id)

    return make


def postgres_factory(request: pytest.FixtureRequest, tmp_path: Path) -> StoreFactory:
    """PostgreSQL keeps every agent in one database, namespaced by agent id (issue 12).

    Runs only when ``MEMMW_TEST_PG_DSN`` names a server. The stores live in the test
    module's own database (the ``pg_database`` fixture: created for the module, dropped
    after it), in a namespace unique to this test so tests never see each other's rows;
    nothing is left in the server's databases.
    """
    dsn = str(request.getfixturevalue("pg_database"))
    from memmw.store.postgres import PostgresStore

    namespace = f"t{uuid.uuid4().hex[:12]}"

    def make(agent_id: str = "main") -> Store:
        store: Store = PostgresStore(dsn, agent_id=agent_id, namespace=namespace)
        return store

    return make


def memory_factory(request: pytest.FixtureRequest, tmp_path: Path) -> StoreFactory:
    """The in-memory store: agents of one test share one backend (one "database")."""
    from memmw.store.inmemory import InMemoryBackend, InMemoryStore

    backend = InMemoryBackend()

    def make(agent_id: str = "main") -> Store:
        return InMemoryStore(backend, agent_id=agent_id)

    return make


#: Store implementations the conformance suite runs against, by name: ``factory(request,
#: tmp_path) -> make``. PostgreSQL joins when ``MEMMW_TEST_PG_DSN`` is set (no skipped
#: copies of every test otherwise).
FACTORIES: dict[str, Callable[[pytest.FixtureRequest, Path], StoreFactory]] = {
    "sqlite": sqlite_factory,
    "memory": memory_factory,
}
if os.environ.get(PG_DSN_ENV):
    FACTORIES["postgres"] = postgres_factory


@pytest.fixture(params=sorted(FACTORIES))
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """``make(agent_id="main") -> Store``; every store it made is closed afterwards."""
    build = FACTORIES[request.param](request, tmp_path)
    made: list[Store] = []

    def make(agent_id: str = "main") -> Store:
        store = build(agent_id)
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()


@pytest.fixture()
def store(store_factory: StoreFactory) -> Store:
    """The store of agent ``main``."""
    return store_factory("main")
