"""The ``Memory`` facade: one object per agent workspace (sync, search, get, status)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import numpy as np

from memmw.config import MemoryConfig, resolve_state_dir, resolve_workspace
from memmw.embeddings.base import EmbeddingProvider
from memmw.embeddings.breaker import (
    BreakerPolicy,
    CircuitBreaker,
    CircuitOpenError,
    GuardedEmbedder,
)
from memmw.embeddings.registry import ProviderSelection, create_provider
from memmw.engine.freshness import Freshness
from memmw.errors import (
    ConfigError,
    IndexCorruptError,
    MemmwError,
    PathPolicyError,
    ProviderError,
)
from memmw.graph.engine import ForgetResult, GraphEngine
from memmw.graph.search import FactHit
from memmw.graph.telemetry import TelemetryLog, telemetry_path
from memmw.redaction import redact_secrets
from memmw.search.searcher import Searcher, VectorLeg
from memmw.store.sqlite.db import (
    connect,
    fts5_available,
    is_corruption,
    is_writable_dir,
    snapshot,
    transaction,
)
from memmw.store.sqlite.schema import migrate
from memmw.store.sqlite.sqlitevec import SqliteVecIndex, sqlite_vec_status
from memmw.store.sqlite.store import IndexStore
from memmw.store.sqlite.sync import (
    SCAN_ISSUES_KEY,
    FileReadError,
    Indexer,
    Progress,
    ProviderIdentity,
    read_markdown,
)
from memmw.store.sqlite.vectors import (
    EMBEDDING_ERROR_KEY,
    Backfill,
    BackfillReport,
    pending_count,
    provider_key,
)
from memmw.text.analysis import cut_utf16, utf16_len
from memmw.types import FileIssue, ReadResult, SearchHit, Status, SyncReport
from memmw.workspace.files import discover, resolve_read_path
from memmw.workspace.locks import exclusive_lock, lock_path_for
from memmw.workspace.transcripts import sessions_dir

log = logging.getLogger(__name__)

#: ``BackfillReport.error`` when another process is already embedding this index.
EMBEDDING_BUSY = "another process is embedding this index; its vectors appear as it goes"

#: Providers reached over HTTP: their query embedding is bounded by one timeout.
REMOTE_PROVIDERS = frozenset({"openai", "gemini"})

#: Seconds ``close`` gives background embedding to reach a batch boundary.
CLOSE_EMBED_GRACE_S = 0.5
_AGENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


@dataclasses.dataclass(frozen=True)
class _SearchResult:
    hits: list[SearchHit]
    mode: str
    warning: str | None


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


def default_db_path(state_dir: Path, agent_id: str, template: str | None) -> Path:
    """``store.path`` with ``{agentId}`` replaced, else ``<state_dir>/memory/<agent>.sqlite``."""
    if template:
        return Path(os.path.expanduser(template.replace("{agentId}", agent_id)))
    return state_dir / "memory" / f"{agent_id}.sqlite"


class Memory:
    """Long-term memory of one agent: Markdown files in a workspace plus a derived index.

    Example:
        >>> with Memory(workspace="ws", state_dir="state") as mem:  # doctest: +SKIP
        ...     mem.sync()
        ...     hits = mem.search("where does the gateway run?")

    Args:
        workspace: Folder holding ``MEMORY.md``, ``USER.md`` and ``memory/``
            (default ``$MEMMW_WORKSPACE``, else the current directory).
        state_dir: Where derived state lives (default ``$MEMMW_STATE_DIR``, else a folder
            of this workspace's own under the user state directory; see
            :func:`memmw.statedir.default_state_dir`).
        agent_id: Names the index file; letters, digits, ``.``, ``_`` and ``-``.
        config: Settings; default loaded from ``<workspace>/memmw.toml`` and ``MEMMW__*``.
        config_file: Explicit TOML file to load when ``config`` is not given.
        watch: Start the file watcher now (see :meth:`start_watching`); the index then
            follows edits to the memory files within about ``sync.watch_debounce_ms``.
    """

    def __init__(
        self,
        workspace: str | os.PathLike[str] | None = None,
        state_dir: str | os.PathLike[str] | None = None,
        agent_id: str = "main",
        config: MemoryConfig | None = None,
        *,
        config_file: str | os.PathLike[str] | None = None,
        watch: bool = False,
    ) -> None:
        self.workspace = resolve_workspace(workspace).absolute()
        if not self.workspace.is_dir():
            raise ConfigError(f"workspace folder not found: {self.workspace}")
        if not _AGENT_ID.match(agent_id or ""):
            raise ConfigError(
                f"agent_id must be letters, digits, '.', '_' or '-' (max 128); got {agent_id!r}"
            )
        self.agent_id = agent_id
        self.config = config or MemoryConfig.load(workspace=self.workspace, config_file=config_file)
        self.state_dir = resolve_state_dir(state_dir, self.workspace).absolute()
        self.db_path = default_db_path(self.state_dir, agent_id, self.config.store.path)
        transcripts = (
            sessions_dir(self.state_dir, agent_id) if "sessions" in self.config.sources else None
        )
        self._indexer = Indexer(
            db_path=self.db_path,
            workspace=self.workspace,
            config=self.config,
            sessions_dir=transcripts,
        )
        self._searcher = Searcher(self.config, connect=lambda: connect(self.db_path))
        self._conn: sqlite3.Connection | None = None
        self._conn_inode: int | None = None
        self._conn_shm: int | None = None
        self._lock = threading.RLock()
        self._closed = False
        self._selection: ProviderSelection | None = None
        self._backfill_thread: threading.Thread | None = None
        self._backfill_report: BackfillReport | None = None
        self._embed_lock = threading.Lock()
        self._stop = threading.Event()
        self._vec0: SqliteVecIndex | None = None
        self._has_index = False
        #: Fail-fast guard of the embedding provider (see ``memmw.embeddings.breaker``).
        self.breaker_policy = BreakerPolicy()
        self._breaker: CircuitBreaker | None = None
        self._freshness = Freshness(
            run_sync=lambda: self.sync(embeddings="background"),
            workspace=self.workspace,
            extra_paths=self.config.extra_paths,
            sessions_dir=transcripts,
            config=self.config.sync,
            name=agent_id,
        )
        # -- knowledge graph (issue 13): facts, activation, forget, telemetry --
        self.graph_engine = GraphEngine(
            db_path=self.db_path,
            reader=self._reader,
            lock=self._lock,
            ensure_index=self._ensure_index,
            workspace=self.workspace,
            extra_paths=self.config.extra_paths,
            telemetry=TelemetryLog(
                telemetry_path(self.state_dir, agent_id),
                enabled=self.config.active_memory.telemetry,
            ),
        )
        if watch:
            self.start_watching()

    # -- lifecycle -------------------------------------------------------------------
    def __enter__(self) -> Memory:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the index connection (stops the watcher, background syncs and embedding).

        Returns promptly: background embedding is abandoned at its next batch boundary
        and the chunks it did not reach stay pending for a later run.
        """
        self._freshness.close()
        self.graph_engine.close()
        self._stop.set()
        thread = self._backfill_thread
        if thread is not None:
            # Never wait out background embedding: it stops at its next batch boundary,
            # every batch is committed atomically, and whatever is left stays pending
            # (keyword-searchable) for the next index run or long-lived process.
            thread.join(timeout=CLOSE_EMBED_GRACE_S)
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            if self._vec0 is not None:
                self._vec0.close()
                self._vec0 = None
            self._closed = True

    def _reader(self) -> sqlite3.Connection:
        """The read connection, reopened if the index file was replaced or deleted."""
        if self._closed:
            raise ConfigError("this Memory is closed")
        try:
            inode: int | None = os.stat(self.db_path).st_ino
        except FileNotFoundError:
            inode = None
        if (
            self._conn is not None
            and inode == self._conn_inode
            and inode is not None
            # An open WAL connection keeps its "-shm" alive; if it was deleted (or
            # replaced) under us, this connection no longer sees other writers: reopen.
            and self._shm_inode() == self._conn_shm
        ):
            return self._conn
        if self._conn is not None:
            # Replaced file or lost WAL: counters may repeat, so cached matrices can lie.
            self._searcher.invalidate()
        self._drop_reader()
        if inode is None:  # deleted meanwhile (another process ran reset): rebuild
            self.sync(embeddings="background")
        try:
            conn = self._open_reader()
        except sqlite3.DatabaseError as exc:
            if not is_corruption(exc):
                raise
            self.sync(embeddings="background")  # moves the damaged file aside, rebuilds
            conn = self._open_reader()
        try:
            self._check_workspace(conn)
        except BaseException:
            conn.close()
            raise
        self._conn, self._conn_inode = conn, os.stat(self.db_path).st_ino
        self._conn_shm = self._shm_inode()
        return conn

    def _shm_inode(self) -> int | None:
        try:
            return os.stat(f"{self.db_path}-shm").st_ino
        except OSError:
            return None

    def _open_reader(self) -> sqlite3.Connection:
        if self._state_read_only():
            return connect(self.db_path, readonly=True)  # search only: no migration
        writer = connect(self.db_path)
        try:
            migrate(writer, self.config.store.fts_tokenizer)
        finally:
            writer.close()
        # The long-lived reader is read-only: if another program deletes the -wal/-shm
        # under it, closing it can never checkpoint a stale WAL over newer pages.
        return connect(self.db_path, readonly=True)

    def _drop_reader(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(sqlite3.Error):
                self._conn.close()
            self._conn = None

    def _check_workspace(self, conn: sqlite3.Connection | None = None) -> None:
        """Refuse an index that was built for another workspace (never re-point it).

        Raises:
            ConfigError: the index records a different workspace folder.
        """
        if conn is None:
            if not self.db_path.exists():
                return
            try:
                conn = connect(self.db_path)
            except sqlite3.DatabaseError:  # damaged: the sync moves it aside and rebuilds
                return
            try:
                self._check_workspace(conn)
            finally:
                conn.close()
            return
        try:
            row = conn.execute("SELECT value FROM meta WHERE key='workspace'").fetchone()
        except sqlite3.DatabaseError:  # no meta table yet (a new index), or damaged
            return
        mine = str(self.workspace.resolve())
        if row is not None and row[0] != mine:
            raise ConfigError(
                f"the index {self.db_path} was built for the workspace {row[0]}, not {mine}; "
                "leave the state folder unset (each workspace then gets its own), choose "
                "another one (--state-dir / MEMMW_STATE_DIR / store.path), or delete this "
                "index with 'memmw reset' to rebuild it for this workspace"
            )

    def _record_workspace(self) -> None:
        """Record which workspace the index belongs to (checked by later opens)."""
        mine = str(self.workspace.resolve())
        with exclusive_lock(self._indexer.lock_path):
            conn = connect(self.db_path)
            try:
                store = IndexStore(conn)
                if store.get_meta("workspace") != mine:
                    with transaction(conn):
                        store.set_meta("workspace", mine)
            finally:
                conn.close()

    def _published(self) -> bool:
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
        finally:
            conn.close()
        return self._has_index

    def _state_read_only(self) -> bool:
        """True when the index folder cannot be written (search works, syncs cannot)."""
        return self.db_path.exists() and not is_writable_dir(self.db_path.parent)

    def _ensure_index(self) -> None:
        """Build the index when none was published yet (keyword search ready on return)."""
        if not self._published():
            self.sync(embeddings="background")

    def _store(self) -> IndexStore:
        return IndexStore(self._reader(), fts_tokenizer=self.config.store.fts_tokenizer)

    # -- public API ------------------------------------------------------------------
    # -- embeddings --------------------------------------------------------------------
    @property
    def selection(self) -> ProviderSelection:
        """The embedding provider chosen for this config (resolved on first use).

        Raises:
            ProviderUnavailableError: an explicitly chosen provider cannot start.
        """
        if self._selection is None:
            self._selection = create_provider(self.config)
        return self._selection

    @property
    def provider(self) -> EmbeddingProvider | None:
        """The active embedding provider, or None in keyword-only mode."""
        return self.selection.provider

    def _provider_breaker(self, provider: EmbeddingProvider) -> CircuitBreaker:
        """The circuit breaker of ``provider`` (made on first use, probes it when open)."""
        if self._breaker is None:
            self._breaker = CircuitBreaker(
                lambda: provider.embed_query("memmw health probe"),
                self.breaker_policy,
                stop=self._stop,
            )
        return self._breaker

    def _provider_identity(self) -> ProviderIdentity:
        provider = self.provider
        if provider is None or not self.config.store.vector_enabled:
            return ProviderIdentity()
        return ProviderIdentity(
            provider=provider.id, model=provider.model, provider_key=provider_key(provider)
        )

    def embed_pending(
        self, *, progress: Callable[[int, int], None] | None = None
    ) -> BackfillReport | None:
        """Embed chunks that have no vector yet (cache first); None in keyword-only mode.

        A provider failure stops the run without touching the rest of the index: those
        chunks stay keyword-searchable and are embedded by a later call.
        """
        provider = self.provider
        if provider is None or not self.config.store.vector_enabled:
            return None
        identity = self._provider_identity()
        backfill = Backfill(
            db_path=self.db_path,
            lock_path=self._indexer.lock_path,
            provider=GuardedEmbedder(provider, self._provider_breaker(provider)),
            provider_key=identity.provider_key,
            cache_enabled=self.config.cache.enabled,
            cache_max_entries=self.config.cache.max_entries,
        )
        switches = getattr(provider, "generation", 0)
        with self._embed_lock:  # one backfill at a time in this process
            try:
                # ... and across processes: a second `memmw index` (or an agent beside it)
                # must not embed the same chunks again while the first is at it.
                with exclusive_lock(lock_path_for(self.db_path.with_suffix(".embed")), timeout=0):
                    report = backfill.run(progress=progress, should_stop=self._stop.is_set)
            except TimeoutError:
                return BackfillReport(error=EMBEDDING_BUSY)
        self._backfill_report = report
        if report.dims:
            self._record_dims(report.dims)
        if getattr(provider, "generation", 0) != switches and not self._stop.is_set():
            # The fallback took over mid-run: the index belongs to the failed provider's
            # model, so rebuild it for the fallback's and embed again (the cache makes a
            # repeat cheap). One retry: a second switch cannot happen (it is sticky).
            log.warning(
                "embedding provider switched to %s; re-indexing for its vectors", provider.id
            )
            self.sync(embeddings="skip")
            return self.embed_pending(progress=progress)
        return report

    def _record_dims(self, dims: int) -> None:
        with exclusive_lock(self._indexer.lock_path):
            conn = connect(self.db_path)
            try:
                store = IndexStore(conn)
                raw = store.get_meta("identity")
                identity = json.loads(raw) if raw else {}
                if identity.get("vectorDims") != dims:
                    identity["vectorDims"] = dims
                    with transaction(conn):
                        store.set_meta("identity", json.dumps(identity, sort_keys=True))
            finally:
                conn.close()

    def _start_background_embedding(self) -> None:
        thread = self._backfill_thread
        if thread is not None and thread.is_alive():
            return

        def work() -> None:
            try:
                self.embed_pending()
            except Exception:  # logged; never raised into a search
                log.exception("background embedding failed")

        self._backfill_thread = threading.Thread(target=work, name="memmw-embed", daemon=True)
        self._backfill_thread.start()

    def sync(
        self,
        force: bool = False,
        *,
        progress: Progress | None = None,
        embeddings: Literal["wait", "background", "skip"] = "wait",
        embed_progress: Callable[[int, int], None] | None = None,
    ) -> SyncReport:
        """Bring the index up to date with the workspace.

        Unchanged files (same sha256) are skipped, removed files dropped, and unreadable,
        binary or non-UTF-8 files reported in ``SyncReport.issues`` while the others index.
        New chunks are keyword-searchable as soon as this returns; their vectors are
        computed afterwards (``embeddings``).

        Args:
            force: Rebuild the whole index (atomically; searches keep working meanwhile).
            progress: Optional ``(done, total, path)`` callback.
            embeddings: ``wait`` embeds new chunks before returning, ``background`` in a
                thread (search uses what is ready), ``skip`` leaves them pending.
            embed_progress: Optional ``(done, total)`` callback while embedding (``wait``).
        """
        self._check_workspace()
        self._indexer.provider = self._provider_identity()
        mark = self._freshness.sync_started()
        report = self._indexer.sync(force=force, progress=progress)
        self._record_workspace()
        self._freshness.sync_finished(mark)
        if embeddings == "wait":
            backfill = self.embed_pending(progress=embed_progress)
            if backfill is not None:
                report = dataclasses.replace(report, embedded=backfill.embedded)
        elif embeddings == "background" and self.provider is not None:
            self._start_background_embedding()
        return report

    def search(
        self, query: str, max_results: int | None = None, min_score: float | None = None
    ) -> list[SearchHit]:
        """Search memory; returns at most ``max_results`` hits, best first.

        A search never waits for a sync: when the index may be stale (``sync.on_search``)
        a background sync starts and this search reads the last published index. Only
        when there is no index at all is it built first.

        Args:
            query: Free text; any characters are safe.
            max_results: Default ``query.max_results`` (6).
            min_score: Keep only hits whose score (the ranking score, 0..1) is at least
                this; out-of-range values raise ``ConfigError``. When None, the default
                ``query.min_score`` (0.35) applies and keyword hits below it still fill
                empty slots (the reference's keyword relaxation).
        """
        return self._search(query, max_results, min_score).hits

    def _search(
        self, query: str, max_results: int | None, min_score: float | None
    ) -> _SearchResult:
        if not self.config.enabled or not isinstance(query, str) or not query.strip():
            return _SearchResult([], "fts-only", None)
        if max_results is not None and max_results < 1:
            raise ConfigError(f"max_results must be >= 1; got {max_results}")
        started = time.perf_counter()
        result = self._search_locked(query, max_results, min_score)
        try:  # telemetry and activation never fail a search
            self.graph_engine.on_search(result.hits, (time.perf_counter() - started) * 1000, query)
        except Exception:
            log.debug("graph bookkeeping after search failed", exc_info=True)
        return result

    def _search_locked(
        self, query: str, max_results: int | None, min_score: float | None
    ) -> _SearchResult:
        with self._lock:
            if not self._published():
                # Nothing published yet: build it (keyword search is ready when this
                # returns; vectors follow in the background). If a background sync is
                # building it right now, the writer lock makes this wait for it.
                self.sync(embeddings="background")
            elif self.config.sync.on_search and not self._state_read_only():
                self._freshness.on_search()  # a background sync if dirty; never waits
            try:
                return self._search_index(query, max_results, min_score)
            except sqlite3.DatabaseError as exc:
                if not is_corruption(exc):
                    raise
                # Damage found past the header (a torn page): rebuild, then answer.
                log.warning("the index is damaged (%s); rebuilding it from the notes", exc)
                self._drop_reader()
                self._heal()
                return self._search_index(query, max_results, min_score)

    def _heal(self) -> None:
        """Rebuild a damaged index from the Markdown files (moved aside if unreadable)."""
        try:
            self.sync(force=True, embeddings="background")
        except sqlite3.DatabaseError as exc:
            raise IndexCorruptError(
                f"the index {self.db_path} is damaged ({exc}); run 'memmw reset' then "
                "'memmw index' to rebuild it from the notes"
            ) from exc

    def _search_index(
        self, query: str, max_results: int | None, min_score: float | None
    ) -> _SearchResult:
        conn = self._reader()
        with snapshot(conn):
            store = IndexStore(conn, fts_tokenizer=self.config.store.fts_tokenizer)
            vector_leg, warning = self._vector_leg(store, query)
            outcome = self._searcher.search(
                store,
                query,
                max_results=max_results,
                min_score=min_score,
                vector_leg=vector_leg,
            )
        return _SearchResult(outcome.hits, outcome.mode, warning)

    def prepare(self, timeout: float | None = None) -> None:
        """Load the search structures now and wait for them (e.g. at server start-up).

        Builds the index if there is none, then the keyword matrix (large indexes build it
        in the background; until then FTS5 answers searches) and the vector matrix.
        """
        if not self._published():
            self.sync(embeddings="background")
        with self._lock:
            store = self._store()
            with snapshot(store.conn):
                self._searcher.keyword_matrix(store, self.config.sources)
        self._searcher.wait_ready(timeout)
        with self._lock:
            store = self._store()
            with snapshot(store.conn):
                self._searcher.keyword_matrix(store, self.config.sources)
                if self.provider is not None and self.config.store.vector_backend != "sqlite-vec":
                    raw = store.get_meta("identity")
                    dims = json.loads(raw).get("vectorDims") if raw else None
                    self._searcher.vector_matrix(store, self.config.sources, dims)

    def _vector_leg(self, store: IndexStore, query: str) -> tuple[VectorLeg | None, str | None]:
        """The vector leg for ``query``, or None (keyword only) with a warning if it failed."""
        provider = self.provider
        if provider is None or not self.config.store.vector_enabled:
            return None, None
        raw = store.get_meta("identity")
        identity = json.loads(raw) if raw else {}
        early: list[float] | None = None
        if (
            identity.get("provider") not in (None, provider.id)
            and getattr(provider, "generation", None) == 0
            and identity.get("vectorDims")
        ):
            # The index may have been embedded by the fallback after the primary failed
            # in an earlier process: embedding the query tries the primary and switches.
            try:
                early = self._embed_query(provider, self._provider_breaker(provider), query)
            except Exception as exc:
                log.warning(
                    "query embedding failed; keyword-only results: %s", redact_secrets(str(exc))
                )
                return None, f"embedding provider failed ({type(exc).__name__}); keyword-only results"
        if identity.get("model") != provider.model or identity.get("provider") != provider.id:
            # The provider switched (fallback) since the index was built: never mix two
            # models' vectors; the next sync rebuilds.
            return (
                None,
                "the embedding provider changed; vectors are rebuilt on the next sync",
            )
        dims = identity.get("vectorDims")
        use_vec0 = self.config.store.vector_backend == "sqlite-vec"
        if use_vec0:
            if not dims:
                return None, None
            vec0 = self._sqlite_vec()
            vec0.refresh(int(dims))
            present = {r[0] for r in store.conn.execute("SELECT DISTINCT source FROM files")}
            allowed = None
            if not present <= set(self.config.sources):
                marks = ",".join("?" * len(self.config.sources))
                allowed = [
                    r[0]
                    for r in store.conn.execute(
                        f"SELECT rowid FROM chunks WHERE source IN ({marks})", self.config.sources
                    )
                ]
        else:
            matrix = self._searcher.vector_matrix(store, self.config.sources, dims)
            if not len(matrix):
                return None, None
        breaker = self._provider_breaker(provider)
        try:
            qvec = np.asarray(
                early if early is not None else self._embed_query(provider, breaker, query),
                dtype=np.float32,
            )
        except CircuitOpenError:
            # Fail fast: a hung provider must not stall every search for its retry budget.
            return (
                None,
                "the embedding provider is failing (circuit open); keyword-only results"
                " until a background probe succeeds",
            )
        except Exception as exc:  # a dead provider degrades to keyword search
            log.warning(
                "query embedding failed; keyword-only results: %s", redact_secrets(str(exc))
            )
            return (
                None,
                f"embedding provider failed ({type(exc).__name__}); keyword-only results",
            )
        qvec = np.where(np.isfinite(qvec), qvec, 0.0)
        norm = float(np.linalg.norm(qvec))
        if norm == 0.0:
            return None, None
        unit = qvec / norm
        if use_vec0:
            return (lambda limit: vec0.search(unit, limit, allowed)), None
        calibrate = self.config.query.hybrid.calibrate_vectors
        return (lambda limit: matrix.search(unit, limit, calibrate=calibrate)), None

    def _embed_query(
        self, provider: EmbeddingProvider, breaker: CircuitBreaker, query: str
    ) -> list[float]:
        """Embed a query through the breaker; remote providers get one timeout, not retries.

        A search wants an answer now: waiting out a remote provider's whole retry budget
        (``timeout_s`` x tries plus backoff) would stall it, so the call runs in a helper
        thread and the search goes keyword-only after about one ``remote.timeout_s``.
        """
        if provider.id not in REMOTE_PROVIDERS:
            result: list[float] = breaker.call(lambda: provider.embed_query(query))
            return result
        breaker.check()
        box: dict[str, Any] = {}
        done = threading.Event()

        def run() -> None:
            try:
                box["vector"] = provider.embed_query(query)
            except BaseException as exc:  # handed to the waiting search
                box["error"] = exc
            finally:
                done.set()

        threading.Thread(target=run, name="memmw-query-embed", daemon=True).start()
        deadline = self.config.remote.timeout_s * 1.2 + 0.2
        if not done.wait(deadline):
            error = ProviderError(
                f"query embedding took longer than remote.timeout_s ({deadline:.1f}s)"
            )
            breaker.failure(error)
            raise error
        if "error" in box:
            breaker.failure(box["error"])
            raise box["error"]
        breaker.success()
        vector: list[float] = box["vector"]
        return vector

    def _sqlite_vec(self) -> SqliteVecIndex:
        if self._vec0 is None:
            try:
                self._vec0 = SqliteVecIndex(self.db_path, self._indexer.lock_path)
            except RuntimeError as exc:
                raise ConfigError(f"store.vector_backend is 'sqlite-vec' but {exc}") from exc
        return self._vec0

    def search_payload(
        self,
        query: str,
        max_results: int | None = None,
        min_score: float | None = None,
        *,
        citations: bool = True,
    ) -> dict[str, Any]:
        """The ``memory_search`` tool payload (also what ``memmw search --json`` prints)."""
        result = self._search(query, max_results, min_score)
        provider = self.provider
        selection = self.selection
        fallback = selection.fallback_from or getattr(provider, "fallback_from", None)
        payload: dict[str, Any] = {
            "results": [h.to_payload(citations=citations) for h in result.hits],
            "provider": provider.id if provider is not None else "none",
            "model": provider.model if provider is not None else "fts-only",
            "fallback": {
                "from": fallback,
                "reason": selection.fallback_reason or getattr(provider, "fallback_reason", None),
            }
            if fallback
            else None,
            "citations": "on" if citations else "off",
            "mode": result.mode,
        }
        if result.warning:
            payload["warning"] = result.warning
        return payload

    def get(self, path: str, from_line: int | None = None, lines: int | None = None) -> ReadResult:
        """Read a window of a memory file.

        Only ``MEMORY.md``, ``USER.md``, ``memory/**`` and configured extra paths can be
        read (``.md`` only, no symlinks, no escapes). A missing file gives
        ``status="not_found"``. The window is at most ``read.max_lines`` lines and
        ``read.max_chars`` characters; ``next_from`` continues a truncated read.

        Raises:
            PathPolicyError: the path is not a readable memory file.
        """
        rel, abs_path = resolve_read_path(self.workspace, path, self.config.extra_paths)
        if not abs_path.exists():
            return ReadResult(path=rel, text="", status="not_found")
        if not abs_path.is_file():
            raise PathPolicyError(f"{rel}: not a regular file")
        try:
            text = read_markdown(abs_path)[0]
        except FileReadError as exc:
            raise PathPolicyError(f"{rel}: {exc}") from exc
        return read_window(
            rel,
            text,
            from_line,
            lines,
            max_lines=self.config.read.max_lines,
            max_chars=self.config.read.max_chars,
        )

    def status(self, deep: bool = False) -> Status:
        """Report files, chunks, freshness and backends of this agent's index.

        Args:
            deep: Also probe the search backends (FTS5 availability, keyword matrix load).
        """
        counts: dict[str, dict[str, int]] = {}
        last_sync: float | None = None
        issues: tuple[FileIssue, ...] = ()
        details: dict[str, Any] = {}
        exists = self.db_path.exists()
        if exists:
            with self._lock:
                store = self._store()
                with snapshot(store.conn):
                    counts = store.counts()
                    raw = store.get_meta("last_sync")
                    last_sync = float(raw) if raw else None
                    raw_issues = store.get_meta(SCAN_ISSUES_KEY)
                    issues = tuple(FileIssue(**i) for i in json.loads(raw_issues or "[]"))
                    if deep:
                        details["fts"] = {
                            "available": fts5_available(store.conn),
                            "tokenizer": self.config.store.fts_tokenizer,
                            "keywordBackend": (
                                "fts5" if self.config.store.keyword_backend == "fts5" else "memory"
                            ),
                        }
                        matrix = self._searcher.keyword_matrix(store, self.config.sources)
                        details["keywordMatrix"] = (
                            {"state": "building in the background (FTS5 answers meanwhile)"}
                            if matrix is None
                            else {
                                "state": "ready",
                                "chunks": matrix.n_docs,
                                "segments": matrix.segments,
                                "terms": matrix.n_terms,
                            }
                        )
        details.update(self._provider_status(deep))
        details.update(self._freshness.to_dict())
        return Status(
            agent_id=self.agent_id,
            workspace=str(self.workspace),
            db_path=str(self.db_path),
            files=sum(c["files"] for c in counts.values()),
            chunks=sum(c["chunks"] for c in counts.values()),
            dirty=not exists or (self._freshness.dirty and self._files_changed()),
            sources=self.config.sources,
            source_counts=counts,
            mode="fts-only" if details["vector"].get("vectors", 0) == 0 else "hybrid",
            provider=details["embedding"].get("provider") or "none",
            model=details["embedding"].get("model") or "fts-only",
            last_sync=last_sync,
            issues=issues,
            details=details,
        )

    def _files_changed(self) -> bool:
        """True when memory files were added, removed or modified since they were indexed.

        A stat of each file (size and mtime) against the index; no file is read.
        """
        files, _issues = discover(self.workspace, self.config.extra_paths)
        with self._lock:
            store = self._store()
            with snapshot(store.conn):
                indexed = store.file_records("memory")
        if {f.path for f in files} != set(indexed):
            return True
        for f in files:
            try:
                st = os.stat(f.abs_path)
            except OSError:
                return True
            _hash, mtime, size = indexed[f.path]
            if (st.st_mtime, st.st_size) != (mtime, size):
                return True
        return False

    def _provider_status(self, deep: bool) -> dict[str, Any]:
        """The ``embedding``, ``vector`` and ``cache`` sections of the status."""
        try:
            selection = self.selection
        except MemmwError as exc:
            return {
                "embedding": {
                    "provider": None,
                    "requested": self.config.provider,
                    "error": str(exc),
                },
                "vector": {"enabled": False, "reason": f"provider cannot start: {exc}"},
            }
        provider = selection.provider
        embedding: dict[str, Any] = selection.to_dict()
        embedding["dims"] = getattr(provider, "dims", None)
        if provider is not None and getattr(provider, "fallback_from", None):
            embedding["fallback_from"] = provider.fallback_from  # type: ignore[attr-defined]
            embedding["fallback_reason"] = provider.fallback_reason  # type: ignore[attr-defined]
        vector: dict[str, Any] = {
            "enabled": provider is not None and self.config.store.vector_enabled
        }
        cache: dict[str, Any] = {
            "enabled": self.config.cache.enabled,
            "maxEntries": self.config.cache.max_entries,
        }
        if provider is None:
            vector["reason"] = selection.unavailable_reason or "keyword-only"
        else:
            vector.update(vector_backend_status(self.config.store.vector_backend))
        if self.db_path.exists():
            with self._lock:
                store = self._store()
                with snapshot(store.conn):
                    conn = store.conn
                    vector["vectors"] = int(
                        conn.execute("SELECT COUNT(*) FROM chunk_vectors").fetchone()[0]
                    )
                    vector["pending"] = pending_count(conn) if provider is not None else 0
                    cache["entries"] = int(
                        conn.execute("SELECT COUNT(*) FROM embedding_cache").fetchone()[0]
                    )
                    bytes_by_source = conn.execute(
                        "SELECT c.source, SUM(LENGTH(c.text)), SUM(LENGTH(v.embedding))"
                        " FROM chunks c LEFT JOIN chunk_vectors v ON v.chunk_rowid = c.rowid"
                        " GROUP BY c.source"
                    ).fetchall()
                    vector["bytesBySource"] = {
                        src: {"chunkBytes": int(tb or 0), "embeddingBytes": int(eb or 0)}
                        for src, tb, eb in bytes_by_source
                    }
                    raw = store.get_meta("identity")
                    vector["dims"] = json.loads(raw).get("vectorDims") if raw else None
                    stored_error = store.get_meta(EMBEDDING_ERROR_KEY)
                    if stored_error and vector["pending"]:
                        # Persisted by whichever process embedded last: a fresh process's
                        # status says why vectors are pending.
                        vector["lastError"] = json.loads(stored_error).get("error")
        if self._backfill_report is not None and self._backfill_report.error:
            vector["lastError"] = self._backfill_report.error
        if self._breaker is not None:
            embedding["circuit"] = self._breaker.to_dict()
        if deep and provider is not None:
            started = time.perf_counter()
            try:
                probe = provider.embed_query("memmw status probe")
                embedding["probe"] = {
                    "ok": True,
                    "dims": len(probe),
                    "ms": round((time.perf_counter() - started) * 1000, 1),
                }
            except Exception as exc:
                embedding["probe"] = {
                    "ok": False,
                    "error": redact_secrets(f"{type(exc).__name__}: {exc}"),
                }
        return {"embedding": embedding, "vector": vector, "cache": cache}

    # -- knowledge graph (issue 13) ----------------------------------------------------
    def facts(
        self,
        query: str,
        max_results: int = 10,
        *,
        include_history: bool | None = None,
        include_private: bool = True,
    ) -> list[FactHit]:
        """Four-phase fact search over the graph derived from the notes.

        Phases: entities named in the query (names, aliases, fuzzy) with the facts the
        question asks about; the rest of those entities' facts and relations; full-text
        facts; full-text relations. Superseded values come only with ``include_history``
        (default: when the query asks about the past); retracted entries never.
        """
        return self.graph_engine.facts(
            query,
            max_results=max_results,
            threshold=self.config.active_memory.threshold,
            include_history=include_history,
            include_private=include_private,
        )

    def facts_payload(
        self, query: str, max_results: int | None = None, *, citations: bool = True,
        include_private: bool = True,
    ) -> dict[str, Any]:
        """The ``memory_facts`` tool payload (also what ``memmw facts --json`` prints)."""
        hits = self.facts(query, max_results or 10, include_private=include_private)
        return {"results": [h.to_payload(citations=citations) for h in hits]}

    def forget(
        self,
        citation: str | None = None,
        *,
        entity: str | None = None,
        key: str | None = None,
        reason: str = "",
        embeddings: Literal["wait", "background", "skip"] = "background",
    ) -> ForgetResult:
        """Retract an entry in the Markdown (struck through and annotated, never deleted).

        Name it by ``citation`` (``path#L12``) or by ``entity`` and ``key`` (every value
        of that fact). The index is synced so search and facts skip it at once;
        ``embeddings`` is passed to that sync (one-shot callers such as the CLI skip it).

        Raises:
            memmw.graph.engine.ForgetError: nothing to retract there.
            PathPolicyError: the path is not a memory file.
        """
        result = self.graph_engine.forget(citation, entity=entity, key=key, reason=reason)
        self.sync(embeddings=embeddings)
        return result

    def add_facts(self, facts: Any, path: str | None = None) -> tuple[str, int]:
        """Write proposed facts to a ``memory/`` note (default today's), then sync.

        ``facts`` is an iterable of mappings (entity, key, value, optional valid_from and
        relation), ``(entity, key, value)`` tuples or ``ProposedFact``; unusable items are
        skipped. The Markdown is written first: the index only ever derives from it.

        Returns:
            ``(path written, number of facts)``.
        """
        from memmw.graph.extract import write_facts
        from memmw.timeutil import user_now

        target = path or f"memory/{user_now(self.config.user_timezone).date().isoformat()}.md"
        rel, count = write_facts(self.workspace, target, facts)
        if count:
            self.sync(embeddings="background")
        return rel, count

    def extract_facts(
        self, text: str, extractor: Callable[[str], Any], path: str | None = None
    ) -> tuple[str, int]:
        """Run an extractor (e.g. an LLM call) on ``text`` and write what it proposes.

        Errors of the extractor are logged and write nothing.
        """
        try:
            proposed = list(extractor(text))
        except Exception as exc:
            log.warning("fact extractor failed: %s", type(exc).__name__)
            return path or "", 0
        return self.add_facts(proposed, path)

    def write_graph_html(self, path: str | os.PathLike[str]) -> Path:
        """Write a self-contained page drawing the graph (``memmw graph --html FILE``)."""
        from memmw.graph.html import write_graph_html

        return write_graph_html(
            self.graph_engine.graph(),
            Path(path),
            title=f"memmw graph: {self.agent_id}",
            workspace=self.workspace,
        )

    def stats(self, since: float | None = None) -> dict[str, Any]:
        """Summary of the telemetry log: latency, hit and injection rates (``memmw stats``)."""
        from memmw.graph.telemetry import summarize_telemetry

        return summarize_telemetry(self.graph_engine.telemetry.path, since=since)

    def reset(self) -> None:
        """Delete the derived index (never a Markdown file); the next sync rebuilds it."""
        with self._lock, exclusive_lock(self._indexer.lock_path, timeout=120):
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(f"{self.db_path}{suffix}")
            self._has_index = False
            self._freshness.mark_dirty()

    # -- freshness -------------------------------------------------------------------
    def start_watching(self) -> str:
        """Watch the memory files (and transcripts, with the ``sessions`` source).

        Edits mark the index dirty and start a debounced incremental sync in the
        background (``sync.watch_debounce_ms``). Idempotent; :meth:`close` stops it.

        Returns:
            The watcher state: ``watching``, or ``fallback`` when the OS has no file
            watches left (one warning is logged and searches sync instead).

        Raises:
            ConfigError: watchdog is not installed (``pip install 'memmw[watch]'``).
        """
        return self._freshness.start_watching()

    def stop_watching(self) -> None:
        """Stop the file watcher (idempotent)."""
        self._freshness.stop_watching()

    @property
    def watcher_state(self) -> str:
        """``stopped``, ``watching``, ``fallback`` (no OS watches left) or ``failed``."""
        return self._freshness.watcher_state

    @property
    def dirty(self) -> bool:
        """True when files may have changed since this process last synced."""
        return self._freshness.dirty

    def sync_in_background(self) -> None:
        """Mark the index dirty and start an incremental sync in the background."""
        self._freshness.mark_dirty()
        self._freshness.request()

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        """Wait until no background sync is running or queued; False on timeout."""
        return self._freshness.wait_idle(timeout)

    def notify_transcript(self, path: str | os.PathLike[str]) -> bool:
        """A session transcript grew; re-index it past ``sync.sessions`` thresholds.

        Only needed when not watching (the watcher reports transcripts itself).

        Returns:
            True when a background sync was requested.
        """
        return self._freshness.notify_transcript(path)

    def notify_compaction(self) -> bool:
        """A session was compacted; re-index transcripts now (``post_compaction_force``)."""
        return self._freshness.notify_compaction()


def read_window(
    path: str,
    text: str,
    from_line: int | None,
    lines: int | None,
    *,
    max_lines: int,
    max_chars: int,
) -> ReadResult:
    """Cut ``text`` to the requested window within the line and character budgets."""
    all_lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if all_lines and all_lines[-1] == "":
        all_lines.pop()
    total = len(all_lines)
    start = max(1, int(from_line or 1))
    want = min(max_lines, max(1, int(lines))) if lines is not None else max_lines
    window = all_lines[start - 1 : start - 1 + want]
    shown: list[str] = []
    used = 0
    cut_line = False
    for line in window:
        cost = utf16_len(line) + (1 if shown else 0)
        if used + cost > max_chars:
            if not shown:  # one huge line: hard-cut it
                shown.append(cut_utf16(line, max_chars))
                cut_line = True
            break
        shown.append(line)
        used += cost
    end = start + len(shown) - 1
    more = end < total
    body = "\n".join(shown)
    # A single line longer than the budget is shown cut; continuing moves to the next
    # line (line-based reads cannot resume inside a line), and the notice says so.
    next_from = end + 1 if more else None
    notes = []
    if cut_line:
        notes.append(f"line {end} was cut at {max_chars} characters")
    if more:
        notes.append(f"showed lines {start}-{end} of {total}; continue with from={next_from}")
    if notes:
        body += "\n\n[truncated: " + "; ".join(notes) + "]"
    return ReadResult(
        path=path,
        text=body,
        status="ok",
        from_line=start,
        lines=len(shown),
        total_lines=total,
        truncated=more or cut_line,
        next_from=next_from,
    )
