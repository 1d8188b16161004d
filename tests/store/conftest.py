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


def sqlite_factory(tmp_path: Path) -> StoreFactory:
    """SQLite keeps one file per agent: agents of one state folder are separate files."""
    from memmw.store.sqlite.backend import SqliteStore

    def make(agent_id: str = "main") -> Store:
        return SqliteStore(tmp_path / "state" / "memory" / f"{agent_id}.sqlite", agent_id=agent_id)

    return make


def postgres_factory(tmp_path: Path) -> StoreFactory:
    """PostgreSQL keeps every agent in one database, namespaced by agent id (issue 12).

    Runs only when ``MEMMW_TEST_PG_DSN`` names a scratch database. The PostgreSQL store
    plugs in here: build it from the DSN and the agent id, in a namespace unique to
    this test so runs never see each other's rows.
    """
    dsn = os.environ.get(PG_DSN_ENV)
    if not dsn:
        pytest.skip(f"set {PG_DSN_ENV} to run the store conformance suite against PostgreSQL")
    try:
        from memmw.store.postgres import PostgresStore  # type: ignore[import-not-found]
    except ImportError:
        pytest.skip("the PostgreSQL store (memmw.store.postgres) is not in this tree yet")
    namespace = f"t{uuid.uuid4().hex[:12]}"

    def make(agent_id: str = "main") -> Store:
        store: Store = PostgresStore(dsn, agent_id=agent_id, namespace=namespace)
        return store

    return make


#: Store implementations the conformance suite runs against, by name. PostgreSQL joins
#: when ``MEMMW_TEST_PG_DSN`` is set (no skipped copies of every test otherwise).
FACTORIES: dict[str, Callable[[Path], StoreFactory]] = {"sqlite": sqlite_factory}
if os.environ.get(PG_DSN_ENV):
    FACTORIES["postgres"] = postgres_factory


@pytest.fixture(params=sorted(FACTORIES))
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """``make(agent_id="main") -> Store``; every store it made is closed afterwards."""
    build = FACTORIES[request.param](tmp_path)
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
