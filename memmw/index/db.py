"""SQLite connections for the index: module choice, pragmas, read snapshots."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path

BUSY_TIMEOUT_MS = 5000


def connect(path: Path | str, *, readonly: bool = False) -> sqlite3.Connection:
    """Open an index database with WAL, a busy timeout and foreign keys.

    Args:
        path: Database file (created unless ``readonly``).
        readonly: Open with ``mode=ro`` (the file must exist).
    """
    if readonly:
        conn = sqlite3.connect(
            f"file:{Path(path).as_posix()}?mode=ro",
            uri=True,
            check_same_thread=False,
            isolation_level=None,
        )
    else:
        conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    if not readonly:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA foreign_keys=ON")
    return conn


@contextlib.contextmanager
def transaction(
    conn: sqlite3.Connection, *, immediate: bool = True
) -> Iterator[sqlite3.Connection]:
    """Run the block in one transaction (``BEGIN IMMEDIATE`` takes the write lock up front)."""
    conn.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


@contextlib.contextmanager
def snapshot(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """A read transaction: every query in the block sees one committed generation."""
    conn.execute("BEGIN")
    try:
        yield conn
    finally:
        conn.execute("COMMIT")


def fts5_available(conn: sqlite3.Connection) -> bool:
    """True when this SQLite build has FTS5."""
    try:
        conn.execute("CREATE VIRTUAL TABLE temp.__memmw_fts_probe USING fts5(x)")
        conn.execute("DROP TABLE temp.__memmw_fts_probe")
    except sqlite3.OperationalError:
        return False
    return True
