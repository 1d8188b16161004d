"""Choose and build the store of one agent's index from the configuration."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from memmw.config import IN_MEMORY_STORE, MemoryConfig
from memmw.store.protocol import Store


def create_store(
    config: MemoryConfig,
    *,
    db_path: Path,
    agent_id: str = "main",
    on_reopen: Callable[[], None] | None = None,
) -> Store:
    """The store for ``config``: the SQLite file ``db_path``, with ``store.backend =
    "postgres"`` the agent's namespace in the database of ``store.dsn`` /
    ``$MEMMW_STORE_DSN``, with ``"memory"`` an index in this process (shared by the
    agents of ``db_path``'s folder). Only the chosen backend's package is imported.
    """
    if config.store.backend == "postgres":
        from memmw.store.postgres.backend import create_postgres_store

        return create_postgres_store(config, agent_id=agent_id)
    if config.store.backend == IN_MEMORY_STORE:
        from memmw.store.inmemory import InMemoryStore, process_backend

        # The agents of one state folder share one in-process "database".
        return InMemoryStore(process_backend(str(db_path.parent)), agent_id=agent_id)
    from memmw.store.sqlite.backend import SqliteStore

    return SqliteStore(
        db_path,
        agent_id=agent_id,
        fts_tokenizer=config.store.fts_tokenizer,
        fts=config.store.keyword_backend == "fts5",
        vector_backend=config.store.vector_backend,
        on_reopen=on_reopen,
    )


def sqlite_vec_status() -> tuple[bool, str]:
    """Whether the sqlite-vec extension can be used here, and why (not)."""
    from memmw.store.sqlite.sqlitevec import sqlite_vec_status as status

    return status()


def vector_backend_status(configured: str) -> dict[str, Any]:
    """Which vector search path is active, and why."""
    loadable, why = sqlite_vec_status()
    if configured == "sqlite-vec":
        backend = "sqlite-vec" if loadable else "unavailable"
        reason = why
    else:
        backend = "numpy"
        reason = (
            "numpy brute force (measured faster than a vec0 scan); sqlite-vec: " + why
            if configured == "auto"
            else "configured"
        )
    return {"backend": backend, "reason": reason, "sqliteVecLoadable": loadable}
