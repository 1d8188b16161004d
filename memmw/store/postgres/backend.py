"""The PostgreSQL store: one agent's index as a namespace of a shared database (implements ``Store``)."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memmw.errors import ConfigError, IndexBusyError, IndexCorruptError, IndexStoreError
from memmw.redaction import redact_error
from memmw.store.graphrows import COOC_NAMES_KEY
from memmw.store.ownership import WriterThread
from memmw.store.postgres.connection import open_pool, probed, redact_dsn
from memmw.store.postgres.postings import SourceStats
from memmw.store.postgres.schema import WRITER_LOCK_CLASS
from memmw.store.postgres.store import PostgresReader, PostgresWriter
from memmw.store.protocol import LockHolder, StoreHealth, StoreWriter

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

    from memmw.config import MemoryConfig

log = logging.getLogger(__name__)

#: First half of the key of named job locks (``embed``); the second is a hash of the name.
NAMED_LOCK_CLASS = WRITER_LOCK_CLASS + 1
#: How often a waiting writer retries the advisory lock.
LOCK_POLL_S = 0.1


@dataclass
class _Read:
    conn: psycopg.Connection[Any]
    reader: PostgresReader
    depth: int


#: Chunks of a rebuilt namespace from which the rebuild vacuums and analyzes its tables.
ANALYZE_MIN_CHUNKS = 10_000


#: A search's snapshot: its reads see one committed state and write nothing.
_BEGIN_SNAPSHOT = "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"


def _driver_errors() -> tuple[type[BaseException], ...]:
    import psycopg

    return (psycopg.Error,)


def translate(exc: BaseException, location: str) -> IndexStoreError:
    """The store-neutral error for a driver error (busy, damaged or other)."""
    import psycopg

    text = redact_error(str(exc).strip()) or type(exc).__name__
    if isinstance(exc, psycopg.errors.LockNotAvailable | psycopg.errors.QueryCanceled):
        return IndexBusyError(f"the index {location} is busy ({text}); try again shortly")
    if isinstance(exc, psycopg.errors.DataCorrupted | psycopg.errors.IndexCorrupted):
        return IndexCorruptError(
            f"the index {location} is damaged ({text}); run 'memmw reset' then 'memmw index'"
        )
    if isinstance(exc, psycopg.OperationalError):
        return IndexStoreError(f"lost the PostgreSQL store {location}: {text}")
    return IndexStoreError(f"the index {location} could not be used: {text}")


def _lock_key(agent_id: str, name: str) -> int:
    digest = hashlib.blake2b(f"{agent_id}\x1f{name}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "little", signed=True)


class PostgresStore:
    """One agent's index in a PostgreSQL database shared by many agents and hosts.

    Each agent is a namespace (its own files, chunks, vectors, graph and identity) in one
    schema. Readers use REPEATABLE READ snapshots from a connection pool and are never
    blocked; the single writer of a namespace holds a session advisory lock (on any host)
    and records its host and pid, so a second writer is told who holds it. A rebuild runs
    in one transaction: readers see the old rows until it commits, and nothing if it fails
    or the connection is lost.

    Args:
        dsn: libpq connection string or URI.
        agent_id: The namespace (the agent whose index this is).
        fts_tokenizer: Recorded for the keyword leg (postings hold memmw's own terms).
        pool_size: Most connections this process opens.
        pool: An existing pool to share (several agents in one process); not closed here.
        namespace: A group of agents within the database (a deployment, a test run): the
            agent's rows live under ``<namespace>/<agent_id>``. None: the agent id alone.
        vector_backend: ``store.vector_backend``; ``sqlite-vec`` answers a small
            namespace's vector leg by ``nearest`` instead of the in-process matrix.
    """

    def __init__(
        self,
        dsn: str,
        *,
        agent_id: str = "main",
        fts_tokenizer: str = "unicode61",
        pool_size: int = 4,
        pool: ConnectionPool[Any] | None = None,
        namespace: str | None = None,
        vector_backend: str = "auto",
    ) -> None:
        self.dsn = dsn
        self.vector_backend = vector_backend
        self.agent_id = agent_id
        #: The name of this agent's namespace row.
        self.namespace = f"{namespace}/{agent_id}" if namespace else agent_id
        self.fts_tokenizer = fts_tokenizer
        self._pool_size = pool_size
        self._pool = pool
        self._owns_pool = pool is None
        self._namespace_id: int | None = None
        self._exists = False
        #: An identity was seen: ``published`` answers without a round trip (as the SQLite
        #: backend does) until a snapshot finds none or this process resets the index.
        self._published = False
        self._reads = threading.local()
        self._writer_thread = WriterThread()
        self._lock_conn: psycopg.Connection[Any] | None = None
        self._writer: PostgresWriter | None = None
        self._closed = False

    # -- identity of the store -----------------------------------------------------------
    @property
    def location(self) -> str:
        """The server, database and namespace (no password)."""
        return f"{redact_dsn(self.dsn)} namespace {self.namespace}"

    def folder_cache(self) -> bool:
        """False: one namespace per agent, whose cache does not depend on a path."""
        return False

    def features(self) -> dict[str, bool]:
        """Capabilities: pgvector HNSW and BM25 over stored postings."""
        return {"pgvector": True, "hnsw": True, "postings": True}

    def read_only(self) -> bool:
        """False: any host with the DSN may write (one at a time)."""
        return False

    def _ensure_pool(self) -> ConnectionPool[Any]:
        if self._closed:
            raise ConfigError("this Memory is closed")
        if self._pool is None:
            self._pool = open_pool(self.dsn, max_size=self._pool_size)
        return self._pool

    @property
    def namespace_id(self) -> int:
        """The namespace's id (created on first use)."""
        if self._namespace_id is None:
            pool = self._ensure_pool()
            try:
                with pool.connection() as conn:
                    conn.execute(
                        "INSERT INTO memmw.namespaces (name) VALUES (%s)"
                        " ON CONFLICT (name) DO NOTHING",
                        (self.namespace,),
                    )
                    row = conn.execute(
                        "SELECT id FROM memmw.namespaces WHERE name = %s", (self.namespace,)
                    ).fetchone()
            except _driver_errors() as exc:
                raise translate(exc, self.location) from exc
            assert row is not None
            self._namespace_id = int(row[0])
        return self._namespace_id

    def exists(self) -> bool:
        """True when the database has this namespace (possibly empty).

        Once seen it is not asked again: nothing deletes a namespace row (a reset empties
        it, setting a damaged one aside inserts its successor at once), and every search
        asks.
        """
        if self._exists:
            return True
        pool = self._ensure_pool()
        with pool.connection() as conn:
            row = conn.execute(
                "SELECT 1 FROM memmw.namespaces WHERE name = %s", (self.namespace,)
            ).fetchone()
        self._exists = row is not None
        return self._exists

    def published(self) -> bool:
        """True once an index has been built (its identity is recorded): one statement
        until it is seen, none after (each search asks, and its snapshot checks again)."""
        current: _Read | None = getattr(self._reads, "current", None)
        if current is not None or (self._writer_thread.mine() and self._writer is not None):
            with self.read() as reader:  # inside a snapshot or the writer: what it sees
                return reader.get_meta("identity") is not None
        if self._published:
            return True
        pool = self._ensure_pool()

        def ask(conn: psycopg.Connection[Any]) -> Any:
            return conn.execute(
                "SELECT m.value IS NOT NULL FROM memmw.namespaces n LEFT JOIN memmw.meta m"
                " ON m.namespace_id = n.id AND m.key = 'identity' WHERE n.name = %s",
                (self.namespace,),
            ).fetchone()

        with probed(pool, ask) as (_, row):
            self._published = bool(row and row[0])
        return self._published

    def open(self) -> bool:
        """Connect on first use; True when a new pool was opened.

        A connection lost with the server is replaced by the pool, so there is nothing
        to reopen afterwards.
        """
        if self._pool is not None and self._namespace_id is not None:
            return False
        _ = self.namespace_id
        return True

    # -- reads ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def read(self) -> Iterator[PostgresReader]:
        """A REPEATABLE READ, READ ONLY snapshot for the block (nested reads share it)."""
        current: _Read | None = getattr(self._reads, "current", None)
        if current is not None:
            current.depth += 1
            try:
                yield current.reader
            finally:
                current.depth -= 1
            return
        if self._writer_thread.mine() and self._writer is not None:
            # The writer reads its own uncommitted writes.
            yield self._writer
            return
        ns = self.namespace_id
        pool = self._ensure_pool()

        def begin(conn: psycopg.Connection[Any]) -> tuple[dict[str, str], SourceStats]:
            # The snapshot's BEGIN, its meta rows (a search's identity, generation, epoch
            # and postings version), each source's keyword statistics and tombstones, and
            # the newest decay date, in one round trip, which also checks the pooled
            # connection: a search whose terms' segments this process holds at that
            # postings version asks nothing more for its keyword leg.
            cur = conn.execute(
                f"{_BEGIN_SNAPSHOT}; SELECT key, value FROM memmw.meta"
                # Not the co-occurrence names (the writer's, as long as the graph's names).
                f" WHERE namespace_id = {int(ns)} AND key <> '{COOC_NAMES_KEY}';"
                " SELECT source, n_docs, total_len, dead FROM memmw.source_stats"
                f" WHERE namespace_id = {int(ns)};"
                f" SELECT max(decay_ts) FROM memmw.files WHERE namespace_id = {int(ns)}"
            )
            cur.nextset()
            meta = {str(k): str(v) for k, v in cur.fetchall()}
            cur.nextset()
            rows = {
                str(source): (int(n), int(total), None if dead is None else bytes(dead))
                for source, n, total, dead in cur.fetchall()
            }
            cur.nextset()
            newest = cur.fetchone()
            return meta, SourceStats(
                rows, None if newest is None or newest[0] is None else float(newest[0])
            )

        try:
            with probed(pool, begin) as (conn, (meta, sources)):
                if "identity" not in meta:
                    self._published = False  # reset elsewhere: the next search asks again
                reader = PostgresReader(
                    conn,
                    ns,
                    fts_tokenizer=self.fts_tokenizer,
                    vector_backend=self.vector_backend,
                )
                reader.as_snapshot(meta, sources, (self.dsn, ns))
                self._reads.current = _Read(conn, reader, 1)
                try:
                    yield reader
                except BaseException:
                    self._reads.current = None
                    if not conn.closed:
                        with contextlib.suppress(*_driver_errors()):
                            conn.execute("ROLLBACK")
                    raise
                self._reads.current = None
                conn.execute("COMMIT")
        except _driver_errors() as exc:
            raise translate(exc, self.location) from exc

    # -- writes --------------------------------------------------------------------------
    @contextlib.contextmanager
    def writer_lock(self, *, timeout: float | None = None, what: str = "write") -> Iterator[None]:
        """Hold the namespace's single writer lock (re-entrant in one thread).

        A session advisory lock on a connection kept for the block: the server releases it
        if this process or its connection dies. :meth:`write` inside joins it.

        Raises:
            IndexBusyError: another process holds it past ``timeout``; the message names
                its host, pid and job.
        """
        if self._writer_thread.mine():
            yield
            return
        ns = self.namespace_id
        pool = self._ensure_pool()
        try:
            with pool.connection() as conn:
                self._acquire(conn, ns, timeout, what)
                self._lock_conn = conn
                try:
                    with self._writer_thread.held():
                        yield
                finally:
                    self._lock_conn = None
                    self._release(conn, ns)
        except _driver_errors() as exc:
            raise translate(exc, self.location) from exc

    @contextlib.contextmanager
    def write(
        self, *, timeout: float | None = None, what: str = "write", exclusive: bool = True
    ) -> Iterator[PostgresWriter]:
        """Hold the namespace's writer lock (re-entrant in one thread) and yield the writer.

        ``exclusive=False`` skips the lock for small independent writes (activation bumps),
        which wait at most ``timeout`` (default 1 s) for row locks.

        Raises:
            IndexBusyError: another process holds the lock past ``timeout``; the message
                names its host and pid.
        """
        if not exclusive and not self._writer_thread.mine():
            yield from self._small_write(timeout)
            return
        with self.writer_lock(timeout=timeout, what=what):
            if self._writer is not None:
                yield self._writer
                return
            assert self._lock_conn is not None
            writer = PostgresWriter(self._lock_conn, self.namespace_id,
                                    fts_tokenizer=self.fts_tokenizer)
            writer.vector_backend = self.vector_backend  # it answers its thread's reads
            self._writer = writer
            try:
                yield writer
                # Indexes deferred because a transaction was open: create them now.
                for dims in sorted(writer.missing_vector_indexes):
                    writer.ensure_vector_index(dims)
            except _driver_errors() as exc:
                raise translate(exc, self.location) from exc
            finally:
                self._writer = None

    def _small_write(self, timeout: float | None) -> Iterator[PostgresWriter]:
        ns = self.namespace_id
        try:
            with self._ensure_pool().connection() as conn:
                ms = int(1000 * (1.0 if timeout is None else timeout))
                conn.execute(f"SET lock_timeout = {max(ms, 1)}")
                try:
                    yield PostgresWriter(conn, ns, fts_tokenizer=self.fts_tokenizer)
                finally:
                    if not conn.closed and not conn.broken:
                        conn.execute("RESET lock_timeout")
        except _driver_errors() as exc:
            raise translate(exc, self.location) from exc

    def _acquire(
        self, conn: psycopg.Connection[Any], ns: int, timeout: float | None, what: str
    ) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            row = conn.execute(
                "SELECT pg_try_advisory_lock(%s, %s)", (WRITER_LOCK_CLASS, ns)
            ).fetchone()
            if row is not None and row[0]:
                break
            if deadline is not None and time.monotonic() >= deadline:
                holder = self.lock_holder()
                who = holder.describe() if holder is not None else "another process"
                raise IndexBusyError(
                    f"{who} is writing the index {self.location}; try again shortly"
                )
            time.sleep(LOCK_POLL_S)
        conn.execute(
            "INSERT INTO memmw.writers (namespace_id, host, pid, backend_pid, what, since)"
            " VALUES (%s, %s, %s, pg_backend_pid(), %s, now()) ON CONFLICT (namespace_id)"
            " DO UPDATE SET host = excluded.host, pid = excluded.pid,"
            " backend_pid = excluded.backend_pid, what = excluded.what, since = now()",
            (ns, socket.gethostname(), os.getpid(), what),
        )

    def _release(self, conn: psycopg.Connection[Any], ns: int) -> None:
        if conn.closed or conn.broken:
            return  # the server released the session lock with the connection
        with contextlib.suppress(*_driver_errors()):
            conn.execute(
                "DELETE FROM memmw.writers WHERE namespace_id = %s"
                " AND backend_pid = pg_backend_pid()",
                (ns,),
            )
            conn.execute("SELECT pg_advisory_unlock(%s, %s)", (WRITER_LOCK_CLASS, ns))

    def lock_holder(self) -> LockHolder | None:
        """Who holds the writer lock now (host, pid, what, since), or None when free."""
        ns = self.namespace_id
        with self._ensure_pool().connection() as conn:
            row = conn.execute(
                "SELECT w.host, w.pid, extract(epoch FROM w.since), w.what"
                " FROM memmw.writers w JOIN pg_locks l ON l.locktype = 'advisory' AND l.granted"
                " AND l.classid = %s AND l.objid = %s AND l.objsubid = 2"
                " AND l.pid = w.backend_pid WHERE w.namespace_id = %s",
                (WRITER_LOCK_CLASS, ns, ns),
            ).fetchone()
            if row is None:
                held = conn.execute(
                    "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted"
                    " AND classid = %s AND objid = %s AND objsubid = 2",
                    (WRITER_LOCK_CLASS, ns),
                ).fetchone()
                return LockHolder(what="unknown holder") if held else None
        return LockHolder(pid=int(row[1]), host=str(row[0]), since=float(row[2]),
                          what=str(row[3] or ""))

    @contextlib.contextmanager
    def named_lock(self, name: str, *, timeout: float | None = None) -> Iterator[None]:
        """A cross-host lock of this namespace for one job (``embed``).

        Raises:
            IndexBusyError: held elsewhere past ``timeout``.
        """
        key = _lock_key(self.namespace, name)
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._ensure_pool().connection() as conn:
            while True:
                row = conn.execute(
                    "SELECT pg_try_advisory_lock(%s, %s)", (NAMED_LOCK_CLASS, key)
                ).fetchone()
                if row is not None and row[0]:
                    break
                if deadline is not None and time.monotonic() >= deadline:
                    raise IndexBusyError(
                        f"another process holds the {name} lock of the index {self.location}"
                    )
                time.sleep(LOCK_POLL_S)
            try:
                yield
            finally:
                if not conn.closed and not conn.broken:
                    with contextlib.suppress(*_driver_errors()):
                        conn.execute("SELECT pg_advisory_unlock(%s, %s)", (NAMED_LOCK_CLASS, key))

    @contextlib.contextmanager
    def rebuild(self, writer: StoreWriter) -> Iterator[StoreWriter]:
        """A full rebuild in one transaction on the writer's connection.

        The namespace starts empty apart from what survives a rebuild (generation counter,
        graph activation, the embedding cache and the rowid sequence) and gets a new
        ``epoch``. Other sessions see the old rows until the block commits; a block that
        raises (or a lost connection) rolls back and the old rows stay searchable.
        """
        if (
            not isinstance(writer, PostgresWriter)
            or self._writer is not writer
            or not self._writer_thread.mine()
        ):
            raise IndexStoreError("a rebuild needs the writer lock (call inside write())")
        with writer.conn.transaction():
            writer.clear_rows()
            writer.set_meta("epoch", uuid.uuid4().hex)
            # Postings are buffered and written sorted at the end (far fewer page writes).
            writer.begin_bulk()
            try:
                yield writer
            except BaseException:
                writer.end_bulk(commit=False)
                raise
            writer.end_bulk(commit=True)
        self._analyze_after_load(writer)

    def _analyze_after_load(self, writer: PostgresWriter) -> None:
        """Vacuum and sample the planner statistics of the tables a large rebuild filled.

        Autovacuum comes by only minutes later: until then the planner plans a namespace
        of 250,000 chunks with the statistics of the smaller tables it saw before, and
        every first read of a loaded row sets its hint bits (measured right after such a
        load, 200 searches: keyword p50 / p95 31.6 / 83.5 ms as before, 24.1 / 62.1 with
        ANALYZE, 18.8 / 41.5 with VACUUM (ANALYZE); 9-13 / 14-22 ms once autovacuum
        passed). Maintenance only: a failure changes nothing.
        """
        row = writer.conn.execute(
            "SELECT coalesce(sum(n_docs), 0) FROM memmw.source_stats WHERE namespace_id = %s",
            (writer.namespace_id,),
        ).fetchone()
        if not row or int(row[0]) < ANALYZE_MIN_CHUNKS:
            return
        with contextlib.suppress(*_driver_errors()):
            # Outside any transaction (the writer's connection is autocommit).
            writer.conn.execute(
                "VACUUM (ANALYZE) memmw.chunks, memmw.files, memmw.chunk_vectors,"
                " memmw.postings_segments, memmw.postings_dead, memmw.source_stats"
            )

    def quarantine(self, reason: str) -> str:
        """Set a damaged namespace aside under another name; the next write starts a fresh one.

        Returns:
            The name the damaged namespace was given.
        """
        with self.write(what="quarantine") as writer:
            return self._quarantine(writer, reason)

    def _quarantine(self, writer: PostgresWriter, reason: str) -> str:
        aside = f"{self.namespace}.damaged-{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}"
        conn = writer.conn
        try:
            with conn.transaction():
                conn.execute(
                    "UPDATE memmw.namespaces SET name = %s WHERE id = %s",
                    (aside, writer.namespace_id),
                )
                row = conn.execute(
                    "INSERT INTO memmw.namespaces (name) VALUES (%s) RETURNING id",
                    (self.namespace,),
                ).fetchone()
        except _driver_errors() as exc:
            raise IndexCorruptError(
                f"the index {self.location} is damaged ({reason}) and could not be set aside"
                f" ({exc})"
            ) from exc
        assert row is not None
        log.warning("namespace %s set aside as %s (%s)", self.namespace, aside, reason)
        self._published = False
        self._namespace_id = writer.namespace_id = int(row[0])
        return aside

    # -- lifecycle -----------------------------------------------------------------------
    def reset(self) -> None:
        """Delete this namespace's rows (never a Markdown file); the next sync rebuilds it."""
        self._published = False
        with self.write(timeout=120, what="reset") as writer, writer.transaction():
            writer.clear_rows()
            writer.conn.execute(
                "DELETE FROM memmw.meta WHERE namespace_id = %s", (writer.namespace_id,)
            )
            for table in ("graph_activation", "embedding_cache"):
                writer.conn.execute(
                    f"DELETE FROM memmw.{table} WHERE namespace_id = %s", (writer.namespace_id,)
                )

    def health(self) -> StoreHealth:
        """Reachability, the chunk count and the pgvector version."""
        errors: tuple[type[BaseException], ...] = (IndexStoreError, *_driver_errors())
        try:
            pool = self._ensure_pool()
            with pool.connection() as conn:
                chunks = conn.execute(
                    "SELECT count(*) FROM memmw.chunks c JOIN memmw.namespaces n"
                    " ON n.id = c.namespace_id WHERE n.name = %s",
                    (self.namespace,),
                ).fetchone()
                version = conn.execute(
                    "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
                ).fetchone()
        except errors as exc:
            return StoreHealth(ok=False, opened=False, detail=str(exc), chunks=0,
                               location=self.location)
        return StoreHealth(
            ok=version is not None,
            detail=f"ok (pgvector {version[0]})" if version else "pgvector is not installed",
            chunks=int(chunks[0]) if chunks else 0,
            location=self.location,
            features=self.features(),
        )

    def namespaces(self) -> list[dict[str, Any]]:
        """Every namespace of the database with its files, chunks, vectors and text bytes."""
        with self._ensure_pool().connection() as conn:
            rows = conn.execute(
                "SELECT n.name,"
                " (SELECT count(*) FROM memmw.files f WHERE f.namespace_id = n.id),"
                " (SELECT count(*) FROM memmw.chunks c WHERE c.namespace_id = n.id),"
                " (SELECT count(*) FROM memmw.chunk_vectors v WHERE v.namespace_id = n.id),"
                " (SELECT coalesce(sum(octet_length(c.text)), 0) FROM memmw.chunks c"
                "  WHERE c.namespace_id = n.id)"
                " FROM memmw.namespaces n ORDER BY n.name"
            ).fetchall()
        return [
            {"namespace": r[0], "files": int(r[1]), "chunks": int(r[2]), "vectors": int(r[3]),
             "textBytes": int(r[4])}
            for r in rows
        ]

    def close(self) -> None:
        """Close the pool if this store opened it (idempotent)."""
        if self._pool is not None and self._owns_pool:
            self._pool.close()
        self._pool = None
        self._closed = True


def create_postgres_store(config: MemoryConfig, *, agent_id: str) -> PostgresStore:
    """The PostgreSQL store of ``agent_id`` for ``config`` (``store.backend = "postgres"``).

    Raises:
        ConfigError: no DSN in ``store.dsn`` or ``$MEMMW_STORE_DSN``, or the ``postgres``
            extra is missing.
    """
    from memmw.store.postgres.connection import import_driver, resolve_dsn

    import_driver()
    return PostgresStore(
        resolve_dsn(config.store.dsn),
        agent_id=agent_id,
        fts_tokenizer=config.store.fts_tokenizer,
        vector_backend=config.store.vector_backend,
    )
