"""The ``Memory`` facade: one object per agent workspace (sync, search, get, status)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from memmw import observability
from memmw.config import (
    FACT_SEARCH_MAX_RESULTS,
    POSTINGS_KEYWORD_BACKEND,
    MemoryConfig,
    Source,
    check_agent_id,
    resolve_state_dir,
    resolve_workspace,
)
from memmw.embeddings.base import EmbeddingProvider, SwitchingProvider
from memmw.embeddings.breaker import BreakerPolicy
from memmw.embeddings.query import is_remote
from memmw.embeddings.registry import ProviderSelection
from memmw.embeddings.service import Embeddings
from memmw.engine.backfill import (
    EMBEDDING_ERROR_KEY,
    Backfill,
    BackfillReport,
    BoundedEmbedding,
    pending_warning,
)
from memmw.engine.backup import BackupReport, RestoreReport
from memmw.engine.backup import backup as backup_archive
from memmw.engine.backup import restore as restore_archive
from memmw.engine.freshness import Freshness
from memmw.engine.indexer import (
    SCAN_ISSUES_KEY,
    Indexer,
    Progress,
    ProviderIdentity,
)
from memmw.engine.statefolders import SiblingCaches
from memmw.errors import (
    ConfigError,
    FileReadError,
    IndexBusyError,
    IndexCorruptError,
    MemmwError,
    PathPolicyError,
    ProviderError,
)
from memmw.graph.engine import ForgetResult, GraphEngine
from memmw.graph.search import FactHit
from memmw.graph.telemetry import TelemetryLog, telemetry_path
from memmw.search.retriever import AgentSearch, Retriever, SearchRun, Visibility
from memmw.statedir import FLUSH_SESSIONS_KEY, INDEX_DIR, flush_state_path
from memmw.store.factory import create_store, vector_backend_status
from memmw.store.protocol import StoreReader
from memmw.store.vectors import provider_key
from memmw.store.vectorsearch import VectorCache
from memmw.types import (
    KEYWORD_ONLY,
    FileIssue,
    ReadResult,
    SearchHit,
    SearchResult,
    Status,
    SyncReport,
)
from memmw.workspace.files import discover, display_path, resolve_read_path
from memmw.workspace.reading import read_markdown
from memmw.workspace.reads import read_window
from memmw.workspace.transcripts import transcripts_dir

log = logging.getLogger(__name__)

#: ``BackfillReport.error`` when another process is already embedding this index.
EMBEDDING_BUSY = "another process is embedding this index; its vectors appear as it goes"

#: Seconds ``close`` gives background embedding to reach a batch boundary.
CLOSE_EMBED_GRACE_S = 0.5


def default_db_path(state_dir: Path, agent_id: str, template: str | None) -> Path:
    """``store.path`` with ``{agentId}`` replaced, else ``<state_dir>/memory/<agent>.sqlite``."""
    if template:
        return Path(os.path.expanduser(template.replace("{agentId}", agent_id)))
    return state_dir / INDEX_DIR / f"{agent_id}.sqlite"


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
        agent_id: Names the index file: a letter or digit, then letters, digits, ``.``,
            ``_`` and ``-`` (128 at most; see :data:`memmw.config.AGENT_ID_PATTERN`).
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
        check_agent_id(agent_id)
        self.agent_id = agent_id
        self.config = config or MemoryConfig.load(workspace=self.workspace, config_file=config_file)
        self.state_dir = resolve_state_dir(state_dir, self.workspace).absolute()
        self.db_path = default_db_path(self.state_dir, agent_id, self.config.store.path)
        transcripts = (
            transcripts_dir(self.state_dir, agent_id) if Source.TRANSCRIPTS in self.config.sources else None
        )
        own = VectorCache()
        #: The index of this agent, reached only through the store protocol.
        self.store = create_store(
            self.config,
            db_path=self.db_path,
            agent_id=agent_id,
            # Replaced file or lost WAL: counters may repeat, so cached matrices can lie.
            on_reopen=own.invalidate,
        )
        self._indexer = Indexer(
            store=self.store,
            db_path=self.db_path,
            workspace=self.workspace,
            config=self.config,
            transcripts_dir=transcripts,
        )
        self._lock = threading.RLock()
        self._workspace_ok = False
        self._closed = False
        self._backfill_thread: threading.Thread | None = None
        self._backfill_report: BackfillReport | None = None
        self._embed_lock = threading.Lock()
        self._stop = threading.Event()
        #: The embedding provider with its breaker, query deadline and fallback.
        self.embeddings = Embeddings(self.config, self.state_dir, stop=self._stop)
        #: Search: this agent's index and the ``store.shared`` namespaces (opened on use).
        self._agent_search = AgentSearch(
            self.config,
            agent_id,
            Retriever(self.config, self.store, vectors=own),
            self.embeddings,
            open_namespace=lambda name: create_store(
                self.config,
                db_path=default_db_path(self.state_dir, name, self.config.store.path),
                agent_id=name,
            ),
        )
        self._freshness = Freshness(
            run_sync=lambda: self.sync(embeddings="background"),
            workspace=self.workspace,
            extra_paths=self.config.extra_paths,
            transcripts_dir=transcripts,
            config=self.config.sync,
            name=agent_id,
        )
        # -- knowledge graph (issue 13): facts, activation, forget, telemetry --
        self.graph_engine = GraphEngine(
            store=self.store,
            open_store=self._open_store,
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
            self.store.close()
            self._agent_search.close()
            self._closed = True
        self.embeddings.close()

    def _open_store(self) -> None:
        """Make the store's read side current; rebuild a deleted or damaged index first."""
        if self._closed:
            raise ConfigError("this Memory is closed")
        if not self.store.exists():  # deleted meanwhile (another process ran reset): rebuild
            self.sync(embeddings="background")
        try:
            reopened = self.store.open()
        except IndexCorruptError:
            self.sync(embeddings="background")  # moves the damaged file aside, rebuilds
            reopened = self.store.open()
        if reopened or not self._workspace_ok:
            self._check_workspace(opened=True)
            self._workspace_ok = True

    def _check_workspace(self, *, opened: bool = False) -> None:
        """Refuse an index that was built for another workspace that still exists.

        An index whose recorded workspace folder no longer exists follows this one (a
        moved workspace with an explicit state folder, or a PostgreSQL namespace): the
        next sync records the new folder and re-embeds nothing that did not change.

        Raises:
            ConfigError: the index records a different workspace folder.
        """
        if not opened and not self.store.exists():
            return
        try:
            with self.store.read() as reader:
                recorded = reader.get_meta("workspace")
        except ConfigError:  # this Memory is closed
            raise
        except MemmwError:  # no meta yet (a new index), or damaged: the sync rebuilds it
            return
        mine = str(self.workspace.resolve())
        if recorded is not None and recorded != mine and not Path(recorded).is_dir():
            # The workspace was moved (its old folder is gone): the index follows it. Paths
            # are workspace-relative, so the next sync only re-reads what changed.
            log.info("the workspace %s of %s is gone; the index follows %s",
                     recorded, self.store.location, mine)
        elif recorded is not None and recorded != mine:
            raise ConfigError(
                f"the index {self.store.location} was built for the workspace {recorded}, not {mine}; "
                "leave the state folder unset (each workspace then gets its own), choose "
                "another one (--state-dir / MEMMW_STATE_DIR / store.path), or delete this "
                "index with 'memmw reset' to rebuild it for this workspace"
            )

    def _record_workspace(self) -> None:
        """Record which workspace the index belongs to (checked by later opens)."""
        mine = str(self.workspace.resolve())
        with self.store.write(what="sync") as writer:
            if writer.get_meta("workspace") != mine:
                with writer.transaction():
                    writer.set_meta("workspace", mine)

    def _published(self) -> bool:
        """True once an index has been built (its identity is recorded)."""
        return self.store.published()

    def _state_read_only(self) -> bool:
        """True when the index cannot be written here (search works, syncs cannot)."""
        return self.store.read_only()

    def _ensure_index(self) -> None:
        """Build the index when none was published yet (keyword search ready on return)."""
        if not self._published():
            self.sync(embeddings="background")

    def _read(self) -> contextlib.AbstractContextManager[StoreReader]:
        """A read snapshot of the index (reopened, rebuilt or checked first as needed)."""
        self._open_store()
        return self.store.read()

    # -- public API ------------------------------------------------------------------
    # -- embeddings --------------------------------------------------------------------
    @property
    def selection(self) -> ProviderSelection:
        """The embedding provider chosen for this config (resolved on first use).

        Raises:
            ProviderUnavailableError: an explicitly chosen provider cannot start.
        """
        return self.embeddings.selection

    @property
    def provider(self) -> EmbeddingProvider | None:
        """The active embedding provider, or None in keyword-only mode."""
        return self.embeddings.provider

    @property
    def breaker_policy(self) -> BreakerPolicy:
        """Fail-fast guard of the embedding provider (see ``memmw.embeddings.breaker``)."""
        return self.embeddings.policy

    @breaker_policy.setter
    def breaker_policy(self, policy: BreakerPolicy) -> None:
        self.embeddings.policy = policy

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

        Bounded against a hung remote provider: a request that timed out is retried
        only if the provider answered another request meanwhile, the requests of a
        failed batch not yet sent are dropped, the failure counts once on the (shared)
        breaker and the run stops. A provider that never answers costs one
        ``remote.timeout_s`` (60 s at defaults) plus the file pass; one that stops
        answering mid-run, at most about twice that after its last answer.
        """
        provider = self.provider
        if provider is None or not self.config.store.vector_enabled:
            return None
        identity = self._provider_identity()
        seed = self._sibling_caches()
        backfill = Backfill(
            store=self.store,
            provider=self.embeddings.guarded(provider),
            provider_key=identity.provider_key,
            cache_enabled=self.config.cache.enabled,
            cache_max_entries=self.config.cache.max_entries,
            seed=seed,
        )
        switches = self.embeddings.generation or 0
        with self._embed_lock:  # one backfill at a time in this process
            try:
                # ... and across processes: a second `memmw index` (or an agent beside it)
                # must not embed the same chunks again while the first is at it.
                with self.store.named_lock("embed", timeout=0):
                    report = backfill.run(progress=progress, should_stop=self._stop.is_set)
            except IndexBusyError:
                return BackfillReport(error=EMBEDDING_BUSY)
            finally:
                if seed is not None:
                    seed.close()
        self._backfill_report = report
        if report.dims:
            self._record_dims(report.dims)
        if (self.embeddings.generation or 0) != switches and not self._stop.is_set():
            # The fallback took over mid-run: the index belongs to the failed provider's
            # model, so rebuild it for the fallback's and embed again (the cache makes a
            # repeat cheap). One retry: a second switch cannot happen (it is sticky).
            log.warning(
                "embedding provider switched to %s; re-indexing for its vectors", provider.id
            )
            self.sync(embeddings="skip")
            return self.embed_pending(progress=progress)
        return report

    def _sibling_caches(self) -> SiblingCaches | None:
        """The other state folders' caches, for a SQLite index in the default layout.

        A moved or copied workspace gets a new state folder (its key is the path); the
        vectors of its chunks are in the old folder's cache, keyed by content. PostgreSQL
        keeps one namespace per agent, whose cache does not depend on the path. None
        when this index's cache already holds at least as many rows as chunks wait.
        """
        if not self.store.folder_cache() or not self.config.cache.enabled:
            return None
        # Asked only while this cache knows fewer texts than wait for a vector (a new
        # folder, or its interrupted first run): an ordinary sync of a few new chunks
        # must not open every other state folder.
        try:
            with self.store.read() as reader:
                if reader.cache_count() >= reader.pending_count():
                    return None
        except MemmwError:  # no index yet: the backfill finds nothing to embed either
            return None
        return SiblingCaches(self.db_path)

    def _record_dims(self, dims: int) -> None:
        with self.store.write(what="embed") as writer:
            identity = writer.identity() or {}
            if identity.get("vectorDims") != dims:
                identity["vectorDims"] = dims
                with writer.transaction():
                    writer.set_identity(identity)

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

    def _embed_for_sync(
        self, progress: Callable[[int, int], None] | None
    ) -> tuple[BackfillReport | None, str | None]:
        """Embed the pending chunks for a sync; a remote provider within ``sync_wait_s``.

        A hung remote provider must not hold the sync (nor the reply of an agent that
        synced): the embedding runs in a thread and the sync waits at most
        ``remote.sync_wait_s``. Past it the chunks stay pending (keyword-searchable) and
        the thread goes on; if no batch came back at all, that counts as one breaker
        failure. In-process providers cannot hang on a network and a batch-API job has
        its own ``remote.batch.timeout_minutes``: those are waited for.
        """
        provider = self.provider
        if provider is None or not self.config.store.vector_enabled:
            return None, None
        if not is_remote(provider) or self.config.remote.batch.enabled:
            report = self.embed_pending(progress=progress)
            return report, pending_warning(report)
        def embed(counted: Callable[[int, int], None]) -> BackfillReport | None:
            try:
                return self.embed_pending(progress=counted)
            except Exception:
                if not self._stop.is_set():
                    raise
                # Closed while a request was out: the chunks stay pending, nothing failed.
                log.debug("embedding after sync abandoned: this Memory was closed")
                return None

        run = BoundedEmbedding(
            embed,
            wait_s=self.config.remote.sync_wait_s,
            progress=progress,
        )
        previous = self._backfill_thread
        if previous is None or not previous.is_alive():
            self._backfill_thread = run.thread  # ``close`` gives it its grace period
        report, warning = run.wait()
        if run.stalled:  # not one batch came back: the provider counts as failing
            self.embeddings.breaker_for(provider).failure(ProviderError(warning))
        return report, warning

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
            embeddings: ``wait`` embeds new chunks before returning (a remote provider
                is waited for at most ``remote.sync_wait_s``; then embedding goes on in
                the background and ``SyncReport.warning`` says so), ``background`` in a
                thread (search uses what is ready), ``skip`` leaves them pending.
            embed_progress: Optional ``(done, total)`` callback while embedding (``wait``).
        """
        with observability.span("sync", self.agent_id, sync_force=force, sync_embeddings=embeddings) as sp:
            self._check_workspace()
            self._indexer.provider = self._provider_identity()
            mark = self._freshness.sync_started()
            report = self._indexer.sync(force=force, progress=progress)
            self._record_workspace()
            self._freshness.sync_finished(mark)
            if embeddings == "wait":
                backfill, warning = self._embed_for_sync(embed_progress)
                if backfill is not None:
                    report = dataclasses.replace(report, embedded=backfill.embedded, warning=warning)
            elif embeddings == "background" and self.provider is not None:
                self._start_background_embedding()
            sp.set(
                sync_full_rebuild=report.full_rebuild,
                sync_files_added=report.files_added,
                sync_files_changed=report.files_changed,
                sync_files_removed=report.files_removed,
                sync_files_unchanged=report.files_unchanged,
                sync_chunks_indexed=report.chunks_indexed,
                sync_chunks_total=report.chunks_total,
                sync_embedded=report.embedded,
                sync_issues=len(report.issues),
                sync_vectors_pending=report.warning is not None,
            )
            self._agent_search.prepare()  # what a first search would read: not in a turn
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
            min_score: Keep only hits whose score (0..1, one scale in every mode: see
                :attr:`memmw.types.SearchHit.score`) is at least this; out-of-range
                values raise ``ConfigError``. When None, the default ``query.min_score``
                (0.35) applies, keyword hits below it still fill empty slots unless they
                would print as 0.000, and the strongest vector match is never dropped for a
                lower-scoring hit.
        """
        return self._search(query, max_results, min_score).hits

    def _search(
        self,
        query: str,
        max_results: int | None,
        min_score: float | None,
        *,
        report: bool = False,
        visible: Visibility | None = None,
    ) -> SearchRun:
        with observability.span("search", self.agent_id) as sp:
            sp.query_text(query, self.config.tracing.capture_query_text)
            if not self.config.enabled or not isinstance(query, str) or not query.strip():
                result = SearchRun([], KEYWORD_ONLY, None)
            else:
                started = time.perf_counter()
                result = self._search_locked(
                    query, max_results, min_score, report=report, visible=visible
                )
                sp.set(search_max_results=result.limit)
                try:  # telemetry and activation never fail a search
                    self.graph_engine.on_search(
                        result.hits, (time.perf_counter() - started) * 1000, query
                    )
                except Exception:
                    log.debug("graph bookkeeping after search failed", exc_info=True)
            sp.set(
                **{observability.RECORD_COUNT: len(result.hits)},
                search_mode=result.mode,
                search_partial=result.partial,
                search_vector_skipped=result.warning is not None,
            )
            return result

    def _search_locked(
        self,
        query: str,
        max_results: int | None,
        min_score: float | None,
        *,
        report: bool,
        visible: Visibility | None,
    ) -> SearchRun:
        with self._lock:
            if not self._published():
                # Nothing published yet: build it (keyword search is ready when this
                # returns; vectors follow in the background). If a background sync is
                # building it right now, the writer lock makes this wait for it.
                self.sync(embeddings="background")
            elif self.config.sync.on_search and not self._state_read_only():
                self._freshness.on_search()  # a background sync if dirty; never waits
            try:
                self._open_store()
                with self._freshness.searching():  # a background sync steps aside
                    run = self._agent_search.run(
                        query, max_results, min_score, report=report, visible=visible
                    )
                if run.unpublished:
                    # Reset by another process while this search read it: rebuild, answer.
                    self.sync(embeddings="background")
                    run = self._agent_search.run(
                        query, max_results, min_score, report=report, visible=visible
                    )
                return run
            except IndexCorruptError as exc:
                # Damage found past the header (a torn page): rebuild, then answer.
                log.warning("the index is damaged (%s); rebuilding it from the notes", exc)
                self._heal()
                self._open_store()
                return self._agent_search.run(
                    query, max_results, min_score, report=report, visible=visible
                )

    def _heal(self) -> None:
        """Rebuild a damaged index from the Markdown files (moved aside if unreadable)."""
        self.sync(force=True, embeddings="background")

    def _namespace_workspace(self, namespace: str) -> Path:
        """The workspace whose notes the shared namespace ``namespace`` indexes.

        Raises:
            PathPolicyError: ``namespace`` is not in ``store.shared``.
            FileReadError: its index does not record a workspace reachable from here.
        """
        if namespace not in self.config.store.shared:
            shared = ", ".join(self.config.store.shared) or "none"
            raise PathPolicyError(
                f"namespace {namespace!r} is not shared with this agent (store.shared: {shared})"
            )
        store = self._agent_search.shared(namespace).store
        recorded: str | None = None
        try:
            if store.published():
                with store.read() as reader:
                    recorded = reader.get_meta("workspace")
        except MemmwError as exc:
            raise FileReadError(f"namespace {namespace!r} could not be read: {exc}") from exc
        if not recorded or not Path(recorded).is_dir():
            raise FileReadError(
                f"the notes of namespace {namespace!r} are not readable from here (its index"
                " records no workspace on this machine); its search snippets are what there is"
            )
        return Path(recorded)

    def prepare(self, timeout: float | None = None) -> None:
        """Load the search structures now (e.g. at server start-up).

        Builds the index if there is none, then loads the vector matrix. Keyword search
        needs no preparation: each query reads its terms' stored postings. ``timeout``
        is accepted for compatibility and unused.
        """
        if not self._published():
            self.sync(embeddings="background")
        with self._lock, self._read() as store:
            if self.provider is not None:
                self._agent_search.own.warm(store)

    def search_result(
        self,
        query: str,
        max_results: int | None = None,
        min_score: float | None = None,
        *,
        visible: Visibility | None = None,
    ) -> SearchResult:
        """Search like :meth:`search`, and also report how: mode, provider, fallback, warning.

        :func:`memmw.agent.tools.search_payload` renders it as the ``memory_search``
        payload (what ``memmw search --json`` prints). ``visible`` is what the searching
        session may be shown (:class:`memmw.search.retriever.Visibility`, from its privacy
        gate): the hits are those it keeps, as many as the count asks when there are.
        """
        run = self._search(query, max_results, min_score, report=True, visible=visible)
        return run.report or self._agent_search.result(run)

    def get(
        self,
        path: str,
        from_line: int | None = None,
        lines: int | None = None,
        *,
        namespace: str | None = None,
    ) -> ReadResult:
        """Read a window of a memory file.

        Only ``MEMORY.md``, ``USER.md``, ``memory/**`` and configured extra paths can be
        read (``.md`` only, no symlinks, no escapes). A missing file gives
        ``status="not_found"``. The window is at most ``read.max_lines`` lines and
        ``read.max_chars`` characters; ``next_from`` continues a truncated read.

        ``namespace`` (a search hit's ``namespace``) reads that ``store.shared``
        namespace's note, in the workspace its index records (its memory files only,
        not its extra paths); None or this agent's id reads this agent's own note.

        Raises:
            PathPolicyError: the path is not a readable memory file, or ``namespace`` is
                not shared with this agent.
            FileReadError: the shared namespace's notes are not reachable from here.
        """
        with observability.span("get", self.agent_id) as sp:
            result = self._get(path, from_line, lines, namespace)
            sp.set(
                get_status=result.status,
                get_lines=result.lines,
                get_total_lines=result.total_lines,
                get_truncated=result.truncated,
                get_chars=len(result.text),
                get_shared=result.namespace is not None,
                **{observability.RECORD_COUNT: 1 if result.status == "ok" else 0},
            )
            return result

    def _get(
        self, path: str, from_line: int | None, lines: int | None, namespace: str | None
    ) -> ReadResult:
        if namespace is not None and namespace != self.agent_id:
            check_agent_id(namespace, "namespace")
            workspace = self._namespace_workspace(namespace)
            rel, abs_path = resolve_read_path(workspace, path)
        else:
            namespace = None
            rel, abs_path = resolve_read_path(self.workspace, path, self.config.extra_paths)
        try:
            if not abs_path.exists():
                return ReadResult(path=rel, text="", status="not_found", namespace=namespace)
            if not abs_path.is_file():
                raise PathPolicyError(f"{rel}: not a regular file")
            text = read_markdown(abs_path)[0]
        except FileReadError as exc:
            raise PathPolicyError(f"{rel}: {exc}") from exc
        except PathPolicyError:
            raise
        except OSError as exc:  # a name too long, a folder in the way: no absolute path shown
            reason = exc.strerror or type(exc).__name__
            raise PathPolicyError(f"{display_path(rel)}: cannot be read ({reason})") from exc
        result = read_window(
            rel,
            text,
            from_line,
            lines,
            max_lines=self.config.read.max_lines,
            max_chars=self.config.read.max_chars,
        )
        return dataclasses.replace(result, namespace=namespace) if namespace else result

    def status(self, deep: bool = False) -> Status:
        """Report files, chunks, freshness and backends of this agent's index.

        Args:
            deep: Also probe the search backends (FTS5 availability, keyword matrix load).
        """
        counts: dict[str, dict[str, int]] = {}
        last_sync: float | None = None
        issues: tuple[FileIssue, ...] = ()
        details: dict[str, Any] = {}
        exists = self.store.exists()
        if exists:
            with self._lock, self._read() as store:
                counts = store.counts()
                raw = store.get_meta("last_sync")
                last_sync = float(raw) if raw else None
                raw_issues = store.get_meta(SCAN_ISSUES_KEY)
                issues = tuple(FileIssue(**i) for i in json.loads(raw_issues or "[]"))
                if deep:
                    details["store"] = {
                        "backend": self.config.store.backend,
                        "location": self.store.location,
                        "namespaces": self.store.namespaces(),
                    }
                    details["fts"] = {
                        "available": self.store.features().get("fts5", False),
                        "tokenizer": self.config.store.fts_tokenizer,
                        "keywordBackend": (
                            "fts5"
                            if self.config.store.keyword_backend == "fts5"
                            else POSTINGS_KEYWORD_BACKEND
                        ),
                    }
                    n_docs, total_terms = store.keyword_stats(self.config.sources)
                    details["keywordMatrix"] = {
                        "state": "stored postings",
                        "chunks": n_docs,
                        "terms": int(total_terms),
                    }
        details.update(self._provider_status(deep))
        details["flush"] = self._flush_status()
        details.update(self._freshness.to_dict())
        return Status(
            agent_id=self.agent_id,
            workspace=str(self.workspace),
            db_path=self.store.location,
            files=sum(c["files"] for c in counts.values()),
            chunks=sum(c["chunks"] for c in counts.values()),
            dirty=not exists or (self._freshness.dirty and self._files_changed()),
            sources=self.config.sources,
            source_counts=counts,
            mode=KEYWORD_ONLY if details["vector"].get("vectors", 0) == 0 else "hybrid",
            provider=details["embedding"].get("provider") or "none",
            model=details["embedding"].get("model") or "fts-only",
            last_sync=last_sync,
            issues=issues,
            details=details,
        )

    def _flush_status(self) -> dict[str, Any]:
        """Messages compacted away although no flush saved them (the flush state file).

        ``unsavedEvictions`` is 0 when every compaction's messages were seen by a flush;
        anything else means a flush failed and the conversation lost them unsaved.
        """
        try:
            raw = json.loads(
                flush_state_path(self.state_dir, self.agent_id).read_text(encoding="utf-8")
            )
        except (OSError, ValueError):
            raw = {}
        sessions = raw.get(FLUSH_SESSIONS_KEY) if isinstance(raw, dict) else None
        total = 0
        last: str | None = None
        hit: list[str] = []
        for sid, entry in (sessions if isinstance(sessions, dict) else {}).items():
            count = entry.get("unsavedEvictions") if isinstance(entry, dict) else None
            if isinstance(count, int) and count > 0:
                total += count
                hit.append(str(sid))
                when = entry.get("lastUnsavedAt")
                if isinstance(when, str) and (last is None or when > last):
                    last = when
        return {"unsavedEvictions": total, "lastUnsavedAt": last, FLUSH_SESSIONS_KEY: sorted(hit)}

    def _files_changed(self) -> bool:
        """True when memory files were added, removed or modified since they were indexed.

        A stat of each file (size and mtime) against the index; no file is read.
        """
        files, _issues = discover(self.workspace, self.config.extra_paths)
        with self._lock, self._read() as store:
            indexed = store.file_records(Source.MEMORY)
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
        embedding["dims"] = self.embeddings.dims
        if isinstance(provider, SwitchingProvider) and provider.fallback_from:
            embedding["fallback_from"] = provider.fallback_from
            embedding["fallback_reason"] = provider.fallback_reason
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
        if self.store.exists():
            with self._lock, self._read() as store:
                stats = store.vector_stats()
                vector["vectors"] = stats.vectors
                vector["pending"] = stats.pending if provider is not None else 0
                cache["entries"] = stats.cache_entries
                vector["bytesBySource"] = {
                    src: {"chunkBytes": tb, "embeddingBytes": eb}
                    for src, (tb, eb) in stats.bytes_by_source.items()
                }
                vector["dims"] = (store.identity() or {}).get("vectorDims")
                stored_error = store.get_meta(EMBEDDING_ERROR_KEY)
                if stored_error and vector["pending"]:
                    # Persisted by whichever process embedded last: a fresh process's
                    # status says why vectors are pending.
                    vector["lastError"] = json.loads(stored_error).get("error")
        if self._backfill_report is not None and self._backfill_report.error:
            vector["lastError"] = self._backfill_report.error
        if self.embeddings.breaker is not None:
            embedding["circuit"] = self.embeddings.breaker.to_dict()
        if deep and provider is not None:
            embedding["probe"] = self.probe_embedding("memmw status probe")
        return {"embedding": embedding, "vector": vector, "cache": cache}

    def probe_embedding(self, text: str = "memmw health probe") -> dict[str, Any]:
        """Embed ``text`` the way a search embeds its query: a bounded health probe.

        Through the breaker (an open circuit, here or in another process of the state
        folder, answers at once) and within the search's deadline
        (``remote.query_timeout_s``), so ``status --deep`` and ``doctor`` never hang
        on a hung provider. Returns ``{ok, dims, ms}`` or ``{ok: False, error}``.
        """
        return self.embeddings.probe(text)

    # -- knowledge graph (issue 13) ----------------------------------------------------
    def facts(
        self,
        query: str,
        max_results: int = FACT_SEARCH_MAX_RESULTS,
        *,
        include_history: bool | None = None,
        include_private: bool = True,
        visible: Callable[[str], bool] | None = None,
    ) -> list[FactHit]:
        """Four-phase fact search over the graph derived from the notes.

        Phases: entities named in the query (names, aliases, fuzzy) with the facts the
        question asks about; the rest of those entities' facts and relations; full-text
        facts; full-text relations. Superseded values come only with ``include_history``
        (default: when the query asks about the past); retracted entries never.
        ``visible`` (a session's privacy gate) limits the search to the rows of the files
        it accepts: names, aliases and facts of other files are never matched or returned.
        """
        return self.graph_engine.facts(
            query,
            max_results=max_results,
            threshold=self.config.active_memory.threshold,
            include_history=include_history,
            include_private=include_private,
            visible=visible,
        )

    def forget(
        self,
        citation: str | None = None,
        *,
        entity: str | None = None,
        key: str | None = None,
        reason: str = "",
        expect: str | None = None,
        embeddings: Literal["wait", "background", "skip"] = "background",
        visible: Callable[[str], bool] | None = None,
    ) -> ForgetResult:
        """Retract an entry in the Markdown (struck through and annotated, never deleted).

        Name it by ``citation`` (``path#L12``) or by ``entity`` and ``key`` (every value
        of that fact). ``expect`` is the entry's text as the caller saw it: the line must
        still contain it. Without ``expect`` the note must still begin with the bytes the
        index read (appends since are fine): a line that an edit moved is refused, never
        a neighbour struck. The index is synced so search and facts skip it at once;
        ``embeddings`` is passed to that sync (one-shot callers such as the CLI skip it).
        ``visible`` (a session's privacy gate) limits it to files that session may read.

        Raises:
            memmw.graph.engine.ForgetError: nothing to retract there, or the cited line
                changed since it was cited.
            PathPolicyError: the path is not a memory file.
        """
        result = self.graph_engine.forget(
            citation, entity=entity, key=key, reason=reason, expect=expect, visible=visible
        )
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

    def backup(self, path: str | os.PathLike[str], *, sync: bool = True) -> BackupReport:
        """Write the workspace's Markdown and its chunk vectors to one checked archive.

        The archive (tar.gz) holds ``manifest.json`` (format, memmw version, provider
        identity, sha256 of every member), every memory file and ``memmw.toml``, and
        the vectors keyed by the sha256 of the chunk text; not the index, which
        :meth:`restore` rebuilds without embedding what the archive holds.

        Args:
            path: The archive to write (replaced atomically).
            sync: Sync and embed first, so every chunk's vector is archived.
        """
        return backup_archive(self, path, sync=sync)

    @staticmethod
    def restore(
        path: str | os.PathLike[str],
        workspace: str | os.PathLike[str],
        state_dir: str | os.PathLike[str] | None = None,
        *,
        force: bool = False,
        agent_id: str = "main",
        config: MemoryConfig | None = None,
    ) -> RestoreReport:
        """Restore a :meth:`backup` archive into ``workspace`` and index it.

        The whole archive is verified first (sha256 of every member): a damaged one
        raises ``ArchiveError`` (a ``ConfigError``) and nothing is written. A non-empty
        ``workspace`` is refused unless ``force``. The archived vectors go into the new
        index's embedding cache, so the first sync embeds none of those chunks.
        """
        return restore_archive(
            path, workspace, state_dir, force=force, agent_id=agent_id, config=config
        )

    def stats(self, since: float | None = None) -> dict[str, Any]:
        """Summary of the telemetry log: latency, hit and injection rates (``memmw stats``)."""
        from memmw.graph.telemetry import summarize_telemetry

        return summarize_telemetry(self.graph_engine.telemetry.path, since=since)

    def reset(self) -> None:
        """Delete the derived index (never a Markdown file); the next sync rebuilds it."""
        with self._lock:
            self.store.reset()
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
