"""Choose and build the store of one agent's index from the configuration."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from memmw.config import MemoryConfig
from memmw.store.protocol import Store


def create_store(
    config: MemoryConfig,
    *,
    db_path: Path,
    agent_id: str = "main",
    on_reopen: Callable[[], None] | None = None,
) -> Store:
    """The store for ``config`` (today the SQLite file ``db_path``).

    A second backend (PostgreSQL) is selected here from ``config.store``; the SQLite
    package is imported only when it is the one chosen.
    """
    from memmw.store.sqlite.backend import SqliteStore

    return SqliteStore(
        db_path,
        agent_id=agent_id,
        fts_tokenizer=config.store.fts_tokenizer,
        vector_backend=config.store.vector_backend,
        on_reopen=on_reopen,
    )


__all__ = ["create_store"]
