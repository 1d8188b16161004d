"""Helpers shared by the SQLite store tests."""

from __future__ import annotations

import sqlite3

from memmw.store.sqlite.schema import MIGRATIONS, fts_ddl, statements


def schema_at(conn: sqlite3.Connection, version: int, **meta: str) -> None:
    """Make ``conn`` an index of schema ``version`` (as that release left it), with ``meta``."""
    conn.execute("BEGIN")
    for step in MIGRATIONS[:version]:
        for statement in statements(step):
            conn.execute(statement)
    conn.execute(fts_ddl("unicode61"))
    rows = {"schema_version": str(version), **meta}
    conn.executemany("INSERT INTO meta(key, value) VALUES (?, ?)", list(rows.items()))
    conn.execute("COMMIT")
