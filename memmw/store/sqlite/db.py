"""SQLite connections for the index: module choice, pragmas, read snapshots."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

BUSY_TIMEOUT_MS = 5000
#: Page size of a new index file (an existing file keeps its own).
PAGE_SIZE = 16384


def connect(path: Path | str, *, readonly: bool = False) -> sqlite3.Connection:
    """Open an index database with WAL, a busy timeout and foreign keys.

    Args:
        path: Database file (created unless ``readonly``).
        readonly: Open with ``mode=ro`` (the file must exist), ``immutable`` when its
            folder is read-only.
    """
    if readonly:
        return _connect_readonly(Path(path))
    conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    conn.execute(f"PRAGMA page_size={PAGE_SIZE}")  # before WAL writes the first page
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA foreign_keys=ON")
    # Deleted rows are overwritten with zeros, not left in free space: a secret removed
    # from a note does not survive in the file's bytes (FTS5 shadow tables included).
    conn.execute("PRAGMA secure_delete=ON")
    return conn


def scrub_deleted(conn: sqlite3.Connection, *, fts: bool) -> None:
    """After a write that removed indexed text: leave none of it in the file's bytes.

    ``secure_delete`` zeroes deleted rows in the pages written to the WAL; FTS5 keeps a
    deleted row's tokens in older index segments until they merge, so those are merged
    (``optimize``, only when the FTS table is kept); then the WAL, which still holds
    the pages as they were before the delete, is checkpointed into the main file and
    truncated. A reader holding an old snapshot keeps that checkpoint from finishing;
    the next write that removes text tries again.
    """
    if fts:
        conn.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('optimize')")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()


def _connect_readonly(path: Path) -> sqlite3.Connection:
    """A read-only connection; ``immutable`` when the folder cannot hold a ``-shm``.

    A WAL database normally needs its ``-shm`` file, which a read-only state folder
    cannot create; opened ``immutable`` SQLite reads the file as it is, which is all a
    search on a read-only state folder can do anyway (nobody can write there either).
    """
    uri = f"file:{urllib.parse.quote(path.as_posix())}?mode=ro"
    conn = sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None)
    try:
        conn.execute("PRAGMA schema_version").fetchone()
    except sqlite3.OperationalError:
        conn.close()
        if os.access(path.parent, os.W_OK) or not os.path.exists(path):
            raise
        conn = sqlite3.connect(
            uri + "&immutable=1", uri=True, check_same_thread=False, isolation_level=None
        )
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA foreign_keys=ON")
    return conn


def is_writable_dir(path: Path) -> bool:
    """True when files can be created in ``path`` (or it can be created)."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return os.access(candidate, os.W_OK | os.X_OK)
    return False


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
def savepoint(conn: sqlite3.Connection, name: str = "memmw_nested") -> Iterator[sqlite3.Connection]:
    """Run the block in a savepoint of the open transaction (undone alone when it raises)."""
    conn.execute(f"SAVEPOINT {name}")
    try:
        yield conn
    except BaseException:
        conn.execute(f"ROLLBACK TO {name}")
        conn.execute(f"RELEASE {name}")
        raise
    conn.execute(f"RELEASE {name}")


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


#: SQLite messages that mean the file itself is damaged (not busy, not read-only).
_CORRUPTION = (
    "file is not a database",
    "database disk image is malformed",
    "malformed database schema",
    "file is encrypted or is not a database",
)


def is_corruption(exc: BaseException) -> bool:
    """True when ``exc`` says the database file is damaged (rebuild it, don't retry)."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    text = str(exc).lower()
    return any(marker in text for marker in _CORRUPTION)


def quarantine(path: Path) -> Path:
    """Move a damaged database (and its ``-wal``/``-shm``) aside; returns the new name.

    The copy is kept for inspection (``<name>.corrupt-<unix time>``); memmw never reads
    it again.
    """
    target = path.with_name(f"{path.name}.corrupt-{int(time.time())}")
    os.replace(path, target)
    for suffix in ("-wal", "-shm", "-journal"):
        side = Path(f"{path}{suffix}")
        with contextlib.suppress(FileNotFoundError):
            os.replace(side, Path(f"{target}{suffix}"))
    return target
