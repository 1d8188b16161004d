"""The SQLite store: one agent's index in one database file (implements ``Store``)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memmw.errors import ConfigError, IndexBusyError, IndexCorruptError, IndexStoreError
from memmw.store.ownership import WriterThread
from memmw.store.protocol import LockHolder, StoreHealth, StoreWriter
from memmw.store.sqlite import sync as sqlite_sync
from memmw.store.sqlite.db import (
    connect,
    fts5_available,
    is_corruption,
    is_writable_dir,
    scrub_deleted,
    snapshot,
)
from memmw.store.sqlite.schema import migrate
from memmw.store.sqlite.sqlitevec import SqliteVecIndex
from memmw.store.sqlite.store import IndexStore
from memmw.workspace.locks import exclusive_lock, lock_path_for

log = logging.getLogger(__name__)

#: How long a non-exclusive write (activation bumps) waits for SQLite's own lock.
SMALL_WRITE_BUSY_MS = 100


@dataclass
class _Reader:
    conn: sqlite3.Connection
    inode: int | None
    shm: int | None
    depth: int = 0
    #: Checked against the file by ``open`` since the last snapshot (``read`` skips it).
    validated: bool = False


def translate(exc: sqlite3.Error, location: str) -> IndexStoreError:
    """The store-neutral error for a SQLite error (damaged, busy, or other)."""
    text = str(exc)
    if is_corruption(exc):
        return IndexCorruptError(
            f"the index {location} is damaged ({text}); run 'memmw reset' then "
            "'memmw index' to rebuild it from the notes"
        )
    if "locked" in text or "busy" in text:
        return IndexBusyError(f"the index {location} is busy ({text}); try again shortly")
    return IndexStoreError(f"the index {location} could not be used: {text}")


class SqliteStore:
    """One agent's index in a SQLite file, with WAL, a lock file and atomic rebuilds.

    Reads use one read-only connection per thread (a search never waits for a
    background build or embedding run); writes open a connection under the writer
    lock (``<db>.lock``), which also records who holds it.

    Args:
        db_path: The database file (``<state>/memory/<agent>.sqlite`` by default).
        agent_id: The agent whose index this is (one file per agent).
        fts_tokenizer: Tokenizer of the FTS5 table (``unicode61`` or ``trigram``).
        fts: Keep the FTS5 table filled (only the ``fts5`` keyword backend reads it; the
            keyword postings are always kept).
        vector_backend: ``sqlite-vec`` answers ``nearest`` through a ``vec0`` table,
            anything else by numpy brute force.
        on_reopen: Called when a connection had to be reopened because the file was
            replaced or its WAL lost (cached matrices may then be stale).
    """

    def __init__(
        self,
        db_path: Path,
        *,
        agent_id: str = "main",
        fts_tokenizer: str = "unicode61",
        fts: bool = False,
        vector_backend: str = "auto",
        on_reopen: Callable[[], None] | None = None,
    ) -> None:
        self.db_path = Path(db_path)
        self.agent_id = agent_id
        self.fts_tokenizer = fts_tokenizer
        self.fts = fts
        self.vector_backend = vector_backend
        self.on_reopen = on_reopen
        self._readers: dict[threading.Thread, _Reader] = {}
        self._readers_lock = threading.Lock()
        self._writer_thread = WriterThread()
        self._has_index = False
        self._vec0: SqliteVecIndex | None = None
        self._closed = False

    # -- identity of the store -----------------------------------------------------------
    @property
    def location(self) -> str:
        """The database file."""
        return str(self.db_path)

    @property
    def lock_path(self) -> Path:
        """The writer lock file."""
        return lock_path_for(self.db_path)

    def exists(self) -> bool:
        """True when the database file exists."""
        return self.db_path.exists()

    def read_only(self) -> bool:
        """True when the index folder cannot be written (search works, syncs cannot)."""
        return self.db_path.exists() and not is_writable_dir(self.db_path.parent)

    def published(self) -> bool:
        """True once an index has been built (its identity is recorded)."""
        if self._has_index:
            return True
        if not self.db_path.exists():
            return False
        try:
            conn = connect(self.db_path, readonly=True)
        except sqlite3.Error:
            return False
        try:
            row = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'"
            ).fetchone()
            self._has_index = bool(
                row and conn.execute("SELECT 1 FROM meta WHERE key='identity'").fetchone()
            )
        except sqlite3.Error as exc:
            raise translate(exc, self.location) from exc
        finally:
            conn.close()
        return self._has_index

    def folder_cache(self) -> bool:
        """True: the cache is a table of this state folder's file."""
        return True

    def features(self) -> dict[str, bool]:
        """Capabilities of this SQLite build (``fts5``)."""
        conn = sqlite3.connect(":memory:")
        try:
            return {"fts5": fts5_available(conn)}
        finally:
            conn.close()

    # -- reads ---------------------------------------------------------------------------
    def open(self) -> bool:
        """Make sure this thread's read connection is current; True when it was (re)opened.

        Reopens when the file was replaced or deleted, or its ``-shm`` vanished (the
        connection would no longer see other writers).

        Raises:
            IndexCorruptError: the file is damaged.
            IndexStoreError: the file is missing and cannot be created here.
        """
        if self._closed:
            raise ConfigError("this Memory is closed")
        me = threading.current_thread()
        inode = self._inode()
        with self._readers_lock:
            current = self._readers.get(me)
        if (
            current is not None
            and inode == current.inode
            and inode is not None
            and self._shm_inode() == current.shm
        ):
            current.validated = True
            return False
        if current is not None:
            if current.depth:
                return False  # inside a snapshot: never swap its connection
            if self.on_reopen is not None:
                self.on_reopen()
            self._drop(me)
        try:
            conn = self._open_reader()
        except sqlite3.Error as exc:
            raise translate(exc, self.location) from exc
        reader = _Reader(conn, self._inode(), self._shm_inode(), validated=True)
        with self._readers_lock:
            for thread in [t for t in self._readers if not t.is_alive()]:
                with contextlib.suppress(sqlite3.Error):
                    self._readers.pop(thread).conn.close()
            self._readers[me] = reader
        return True

    def _open_reader(self) -> sqlite3.Connection:
        if self.read_only():
            return connect(self.db_path, readonly=True)  # search only: no migration
        writer = connect(self.db_path)
        try:
            migrate(writer, self.fts_tokenizer)
        finally:
            writer.close()
        # The long-lived reader is read-only: if another program deletes the -wal/-shm
        # under it, closing it can never checkpoint a stale WAL over newer pages.
        return connect(self.db_path, readonly=True)

    def _inode(self) -> int | None:
        try:
            return os.stat(self.db_path).st_ino
        except FileNotFoundError:
            return None

    def _shm_inode(self) -> int | None:
        try:
            return os.stat(f"{self.db_path}-shm").st_ino
        except OSError:
            return None

    def _drop(self, thread: threading.Thread) -> None:
        with self._readers_lock:
            reader = self._readers.pop(thread, None)
        if reader is not None:
            with contextlib.suppress(sqlite3.Error):
                reader.conn.close()

    def drop_readers(self) -> None:
        """Close the read connections not inside a snapshot (they reopen on the next read)."""
        with self._readers_lock:
            idle = [t for t, r in self._readers.items() if not r.depth]
            readers = [self._readers.pop(t) for t in idle]
        for reader in readers:
            with contextlib.suppress(sqlite3.Error):
                reader.conn.close()

    @contextlib.contextmanager
    def read(self) -> Iterator[IndexStore]:
        """A read snapshot of the index for the block (nested reads share it)."""
        me = threading.current_thread()
        with self._readers_lock:
            reader = self._readers.get(me)
        if reader is None or not (reader.depth or reader.validated):
            self.open()  # not checked just before by the caller: check the file now
            with self._readers_lock:
                reader = self._readers[me]
        reader.validated = False
        store = IndexStore(
            reader.conn, fts_tokenizer=self.fts_tokenizer, fts=self.fts, vec0=self._vec0_factory()
        )
        if reader.depth:
            reader.depth += 1
            try:
                yield store
            finally:
                reader.depth -= 1
            return
        reader.depth = 1
        try:
            with snapshot(reader.conn):
                yield store
        except sqlite3.Error as exc:
            raise translate(exc, self.location) from exc
        finally:
            reader.depth = 0

    def _vec0_factory(self) -> Callable[[], SqliteVecIndex] | None:
        if self.vector_backend != "sqlite-vec":
            return None
        return self._sqlite_vec

    def _sqlite_vec(self) -> SqliteVecIndex:
        if self._vec0 is None:
            try:
                self._vec0 = SqliteVecIndex(self.db_path, self.lock_path)
            except RuntimeError as exc:
                raise ConfigError(f"store.vector_backend is 'sqlite-vec' but {exc}") from exc
        return self._vec0

    # -- writes --------------------------------------------------------------------------
    @contextlib.contextmanager
    def write(
        self, *, timeout: float | None = None, what: str = "write", exclusive: bool = True
    ) -> Iterator[IndexStore]:
        """Hold the writer lock (re-entrant in one thread) and yield a writer.

        ``exclusive=False`` skips the writer lock for small independent writes
        (activation bumps): they wait at most ``timeout`` for SQLite's own lock.

        Raises:
            IndexBusyError: the writer lock is held elsewhere past ``timeout``.
        """
        if not exclusive:
            conn = None
            try:
                conn = connect(self.db_path)
                busy_ms = SMALL_WRITE_BUSY_MS if timeout is None else int(timeout * 1000)
                conn.execute(f"PRAGMA busy_timeout={busy_ms}")
                yield IndexStore(conn, fts_tokenizer=self.fts_tokenizer, fts=self.fts)
            except sqlite3.Error as exc:
                raise translate(exc, self.location) from exc
            finally:
                if conn is not None:
                    conn.close()
            return
        with self.writer_lock(timeout=timeout, what=what):
            try:
                conn = connect(self.db_path)
            except sqlite3.Error as exc:
                raise translate(exc, self.location) from exc
            try:
                migrate(conn, self.fts_tokenizer)
                store = IndexStore(conn, fts_tokenizer=self.fts_tokenizer, fts=self.fts)
                yield store
                if store.removed_text:
                    scrub_deleted(conn, fts=self.fts)
            except sqlite3.Error as exc:
                raise translate(exc, self.location) from exc
            finally:
                conn.close()

    @contextlib.contextmanager
    def writer_lock(self, *, timeout: float | None = None, what: str = "write") -> Iterator[None]:
        """Hold the single writer lock (re-entrant in one thread) without a connection.

        Raises:
            IndexBusyError: held elsewhere past ``timeout`` (the message names the holder).
        """
        if self._writer_thread.mine():
            yield
            return
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with exclusive_lock(self.lock_path, timeout=timeout), self._writer_thread.held():
                self._record_holder(what)
                try:
                    sqlite_sync.remove_orphans(self.db_path)
                    yield
                finally:
                    self._clear_holder()
        except TimeoutError as exc:
            holder = self.lock_holder()
            who = holder.describe() if holder is not None else "another process"
            raise IndexBusyError(
                f"{who} is writing {self.db_path.name}; try again shortly"
            ) from exc

    def _record_holder(self, what: str) -> None:
        record = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time(),
                  "what": what}
        with contextlib.suppress(OSError):
            self.lock_path.write_text(json.dumps(record), encoding="utf-8")

    def _clear_holder(self) -> None:
        with contextlib.suppress(OSError), open(self.lock_path, "r+", encoding="utf-8") as fh:
            fh.truncate(0)

    def lock_holder(self) -> LockHolder | None:
        """Who holds the writer lock, as it recorded itself; None when free or unknown."""
        try:
            data = json.loads(self.lock_path.read_text(encoding="utf-8") or "null")
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict):
            return None
        pid = data.get("pid")
        if isinstance(pid, int) and data.get("host") == socket.gethostname() and pid != os.getpid():
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return None  # a crashed holder: the lock itself is free
            except OSError:
                pass
        return LockHolder(
            pid=pid if isinstance(pid, int) else None,
            host=str(data.get("host") or ""),
            since=float(data["since"]) if isinstance(data.get("since"), (int, float)) else None,
            what=str(data.get("what") or ""),
        )

    @contextlib.contextmanager
    def named_lock(self, name: str, *, timeout: float | None = None) -> Iterator[None]:
        """A cross-process lock of this index for one job (``embed``: one backfill at a time).

        Raises:
            IndexBusyError: held elsewhere past ``timeout``.
        """
        try:
            with exclusive_lock(lock_path_for(self.db_path.with_suffix(f".{name}")), timeout=timeout):
                yield
        except TimeoutError as exc:
            raise IndexBusyError(f"another process holds the {name} lock of this index") from exc

    def rebuild(self, writer: StoreWriter) -> contextlib.AbstractContextManager[IndexStore]:
        """Stage a full rebuild in a temporary database, copied over the live one on success."""
        if not self._writer_thread.mine():
            raise IndexStoreError("a rebuild needs the writer lock (call inside write())")
        if not isinstance(writer, IndexStore):
            raise IndexStoreError("a SQLite rebuild needs this store's own writer")
        writer.removed_text = True  # the old pages go: checkpoint them out of the WAL
        return sqlite_sync.staged_rebuild(self.db_path, writer, self.fts_tokenizer, fts=self.fts)

    def quarantine(self, reason: str) -> str:
        """Move a damaged index aside (call holding the writer lock); the next write starts anew.

        Returns:
            The name the damaged file was given (kept for inspection).

        Raises:
            IndexCorruptError: it could not be moved.
        """
        aside = sqlite_sync.quarantine_damaged(self.db_path, reason)
        self._has_index = False
        return aside

    # -- lifecycle -----------------------------------------------------------------------
    def reset(self) -> None:
        """Delete the index file (never a Markdown file); the next sync rebuilds it."""
        with self.writer_lock(timeout=120, what="reset"):
            self.drop_readers()
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(f"{self.db_path}{suffix}")
            self._has_index = False

    def health(self) -> StoreHealth:
        """``PRAGMA quick_check``, the chunk count and FTS5 availability."""
        try:
            conn = connect(self.db_path)
            try:
                result = conn.execute("PRAGMA quick_check").fetchone()[0]
                chunks = conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
                fts = fts5_available(conn)
            finally:
                conn.close()
        except sqlite3.Error as exc:
            return StoreHealth(ok=False, opened=False, detail=str(exc), chunks=0,
                               location=self.location)
        return StoreHealth(ok=result == "ok", detail=str(result), chunks=int(chunks),
                           location=self.location, features={"fts5": fts})

    def namespaces(self) -> list[dict[str, Any]]:
        """This file's one agent and its sizes (empty before the first build)."""
        if not self.exists():
            return []
        with self.read() as reader:
            counts = reader.counts()
            vectors = reader.vector_stats()
        return [
            {
                "namespace": self.agent_id,
                "files": sum(c["files"] for c in counts.values()),
                "chunks": sum(c["chunks"] for c in counts.values()),
                "vectors": vectors.vectors,
                "textBytes": sum(t for t, _ in vectors.bytes_by_source.values()),
            }
        ]

    def close(self) -> None:
        """Close every connection (idempotent)."""
        self.drop_readers()
        if self._vec0 is not None:
            self._vec0.close()
            self._vec0 = None
        self._closed = True
