"""Search owns the query: one retriever per index, and one agent's fan-out over its indexes.

A search's whole walk below the engine happens here: the count and threshold are resolved
once (:meth:`AgentSearch.resolve`), a session's :class:`Visibility` decides which hits it
is shown (the search fetches more to make up for the ones it hides), the query is embedded
once through the embedding service (:class:`~memmw.embeddings.service.QueryVector`), each
index answers through its :class:`Retriever` (the store picks how its vectors are searched,
the :class:`~memmw.search.searcher.Searcher` ranks), the ``store.shared`` namespaces are
read beside the agent's own index, and the answer comes back as a value.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterator

import numpy as np

from memmw.config import MemoryConfig
from memmw.embeddings.service import Embeddings, QueryVector
from memmw.errors import CircuitOpenError, MemmwError, QueryTimeoutError
from memmw.redaction import redact_secrets
from memmw.search.expansion import AliasIndex
from memmw.search.searcher import Searcher, SearchOutcome
from memmw.store.protocol import Store, StoreReader
from memmw.store.vectorsearch import VectorCache, VectorLeg
from memmw.text import lexicon
from memmw.types import SearchHit, SearchResult

log = logging.getLogger(__name__)

#: A search for a session that may not see every hit first asks for this many times the
#: results it returns, at most :data:`OVERFETCH_MAX`, then once more for
#: :data:`OVERFETCH_MAX` when too few hits were left.
OVERFETCH_FACTOR = 4
OVERFETCH_MAX = 200


@dataclasses.dataclass(frozen=True)
class Visibility:
    """What one session is shown of a search's hits (its privacy gate, a corpus).

    Attributes:
        see: The hit as the session is shown it (marked ``untrusted``, say), or None for
            a hit it may not see (:meth:`memmw.workspace.access.SessionAccess.shown`).
        hides: Whether ``see`` may return None: then the search fetches more hits than
            it returns (:data:`OVERFETCH_FACTOR`), so hidden hits do not cost the session
            results it may see.
    """

    see: Callable[[SearchHit], SearchHit | None]
    hides: bool = True

    def asks(self, limit: int) -> list[int]:
        """How many hits to ask for, in turn, to return ``limit`` the session may see."""
        if not self.hides:
            return [limit]
        return [min(limit * OVERFETCH_FACTOR, OVERFETCH_MAX), OVERFETCH_MAX]


@dataclasses.dataclass(frozen=True)
class SearchRun:
    """What one search found and how: hits, mode, why the vector leg was skipped, partial.

    ``limit`` is the resolved result count; ``report`` the full :class:`SearchResult`
    (provider, model, fallback) when the caller asked for it.
    """

    hits: list[SearchHit]
    mode: str
    warning: str | None
    partial: bool = False
    limit: int = 0
    report: SearchResult | None = None
    #: The agent's index had no identity in the snapshot searched: reset since the
    #: caller checked (by another process), so the caller rebuilds and searches again.
    unpublished: bool = False


def keyword_only_warning(exc: Exception) -> str:
    """Why this search's vector leg was skipped (the search answers keyword-only)."""
    if isinstance(exc, CircuitOpenError):
        # Fail fast: a hung provider must not stall every search for its retry budget.
        return (
            "the embedding provider is failing (circuit open); keyword-only results"
            " until a background probe succeeds"
        )
    log.warning("query embedding failed; keyword-only results: %s", redact_secrets(str(exc)))
    if isinstance(exc, QueryTimeoutError):
        return f"the vector leg timed out ({redact_secrets(str(exc))}); keyword-only results"
    return f"embedding provider failed ({type(exc).__name__}); keyword-only results"


class Retriever:
    """Answers a query from one index: its store, its ranking and its cached vectors.

    Args:
        config: Memory settings.
        store: The index.
        vectors: The cache of its vectors (give the one the store invalidates when it
            reopens a replaced file); default a new one.
    """

    def __init__(
        self, config: MemoryConfig, store: Store, *, vectors: VectorCache | None = None
    ) -> None:
        self.config = config
        self.store = store
        self.searcher = Searcher(config)
        #: The vectors kept between searches (dropped when the store reopens its file).
        self.vectors = vectors if vectors is not None else VectorCache()

    def invalidate(self) -> None:
        """Forget the cached vectors and entity names (the index file was replaced or its
        WAL lost)."""
        self.vectors.invalidate()
        self.searcher.invalidate()

    def warm(self, reader: StoreReader) -> None:
        """Load what the vector leg reads now (a server start-up)."""
        dims = (reader.identity() or {}).get("vectorDims")
        reader.warm_vectors(self.config.sources, dims, self.vectors)

    def vector_leg(
        self, reader: StoreReader, query: QueryVector | None
    ) -> tuple[VectorLeg | None, str | None]:
        """The vector leg for ``query``, or None (keyword only) with a warning if it failed."""
        if query is None:
            return None, None
        provider = query.provider
        identity = reader.identity() or {}
        early: list[float] | None = None
        if (
            identity.get("provider") not in (None, provider.id)
            and query.unswitched_fallback
            and identity.get("vectorDims")
        ):
            # The index may have been embedded by the fallback after the primary failed
            # in an earlier process: embedding the query tries the primary and switches.
            try:
                early = query.vector()
            except Exception as exc:
                return None, keyword_only_warning(exc)
        if identity.get("model") != provider.model or identity.get("provider") != provider.id:
            # The provider switched (fallback) since the index was built: never mix two
            # models' vectors; the next sync rebuilds.
            return (
                None,
                "the embedding provider changed; vectors are rebuilt on the next sync",
            )
        index = reader.vector_index(
            self.config.sources,
            identity.get("vectorDims"),
            self.vectors,
            calibrate=self.config.query.hybrid.calibrate_vectors,
        )
        if index is None:
            return None, None
        try:
            qvec = np.asarray(early if early is not None else query.vector(), dtype=np.float32)
        except Exception as exc:  # a dead, hung or failing provider degrades to keyword search
            return None, keyword_only_warning(exc)
        qvec = np.where(np.isfinite(qvec), qvec, 0.0)
        norm = float(np.linalg.norm(qvec))
        if norm == 0.0:
            return None, None
        return index.leg(qvec / norm), None

    def search(
        self,
        reader: StoreReader,
        text: str,
        query: QueryVector | None,
        *,
        limit: int,
        min_score: float | None,
        aliases: AliasIndex | None = None,
    ) -> tuple[SearchOutcome, str | None]:
        """This index's hits for ``text`` (``reader`` is one read snapshot of the store;
        ``aliases``, its entity names if already read for this search)."""
        vector_leg, warning = self.vector_leg(reader, query)
        outcome = self.searcher.search(
            reader,
            text,
            max_results=limit,
            min_score=min_score,
            vector_leg=vector_leg,
            aliases=aliases,
        )
        return outcome, warning


class AgentSearch:
    """One agent's search: its own index plus each ``store.shared`` namespace (read only).

    Args:
        config: Memory settings.
        agent_id: The agent (its hits carry it as ``namespace`` beside shared ones).
        own: The retriever of the agent's own index.
        embeddings: The embedding service (query vectors, provider and fallback report).
        open_namespace: Opens the store of a shared namespace (called once per name).
    """

    def __init__(
        self,
        config: MemoryConfig,
        agent_id: str,
        own: Retriever,
        embeddings: Embeddings,
        open_namespace: Callable[[str], Store],
    ) -> None:
        self.config = config
        self.agent_id = agent_id
        self.own = own
        self.embeddings = embeddings
        self._open_namespace = open_namespace
        self._shared: dict[str, Retriever] = {}

    def resolve(self, max_results: int | None, min_score: float | None) -> tuple[int, float | None]:
        """The one resolution of a search's count and threshold (defaulted and checked).

        Raises:
            ConfigError: ``max_results`` below 1 or ``min_score`` outside 0..1.
        """
        query = self.config.query
        return query.results_wanted(max_results), query.check_min_score(min_score)

    def shared(self, name: str) -> Retriever:
        """The retriever of the ``store.shared`` namespace ``name`` (opened once)."""
        if name not in self._shared:
            self._shared[name] = Retriever(self.config, self._open_namespace(name))
        return self._shared[name]

    def prepare(self) -> None:
        """Wait for what a first search would otherwise read on its way (the Chinese <->
        English dictionary of query expansion, read in the background since the searcher
        was made): a sync calls this, so a turn with a deadline does not pay for it."""
        lexicon.wait()

    def close(self) -> None:
        """Close the shared namespaces' stores (the agent's own store is its owner's)."""
        for retriever in self._shared.values():
            retriever.store.close()
        self._shared.clear()

    def run(
        self,
        text: str,
        max_results: int | None,
        min_score: float | None,
        *,
        report: bool = False,
        visible: Visibility | None = None,
    ) -> SearchRun:
        """Search the agent's index and the shared namespaces; the best hits.

        Resolves the count and threshold (:meth:`resolve`), embeds the query once, reads
        every index, merges; with ``report`` also says how (:meth:`result`). The caller
        made the agent's store current (opened, rebuilt if damaged).

        ``visible`` is what the searching session is shown: each hit passes through its
        ``see`` and, when it ``hides`` hits, the search asks the indexes for more
        (:meth:`Visibility.asks`) and, when too few visible ones are left, once more,
        wider. The result holds at most the resolved count of hits ``see`` returned.

        Raises:
            ConfigError: ``max_results`` below 1 or ``min_score`` outside 0..1.
        """
        limit, min_score = self.resolve(max_results, min_score)
        asks = [limit] if visible is None else visible.asks(limit)
        query: QueryVector | None = None
        for n, ask in enumerate(asks):
            run, query = self._run_once(text, ask, min_score, query)
            if visible is None:
                break
            fetched = len(run.hits)
            shown = [seen for seen in map(visible.see, run.hits) if seen is not None]
            run = dataclasses.replace(run, hits=shown[:limit])
            if len(shown) >= limit or fetched < ask or n + 1 == len(asks) or ask >= asks[-1]:
                break
        run = dataclasses.replace(run, limit=limit)
        return dataclasses.replace(run, report=self.result(run)) if report else run

    def _run_once(
        self, text: str, limit: int, min_score: float | None, query: QueryVector | None
    ) -> tuple[SearchRun, QueryVector | None]:
        """One pass over every index for ``limit`` hits (``query``: the query vector of an
        earlier pass of this search, embedded at most once)."""
        # One query embedding per search, shared by this agent's index and every
        # store.shared namespace (same provider and model by the identity check).
        with self.own.store.read() as reader:
            # The vector leg embeds the question with the other names of what it names.
            vector_text, aliases = (
                (text, None)
                if self.embeddings.for_vectors is None
                else self.own.searcher.vector_text(reader, text)
            )
            if query is None:
                query = self.embeddings.for_search(vector_text)
            outcome, warning = self.own.search(
                reader, text, query, limit=limit, min_score=min_score, aliases=aliases
            )
            unpublished = reader.get_meta("identity") is None  # as published() checks
        hits = outcome.hits
        # The vector leg timed out: keyword-only hits, said so (``partial``).
        partial = query is not None and query.timed_out
        if self.config.store.shared:
            hits = [dataclasses.replace(h, namespace=self.agent_id) for h in outcome.hits]
            for name, hits_of in self._search_shared(text, query, limit, min_score):
                hits.extend(dataclasses.replace(h, namespace=name) for h in hits_of)
            hits.sort(key=lambda h: (-h.score, h.namespace or "", h.path, h.start_line))
            hits = hits[:limit]
            partial = partial or (query is not None and query.timed_out)
        return SearchRun(hits, outcome.mode, warning, partial, limit, unpublished=unpublished), query

    def _search_shared(
        self, text: str, query: QueryVector | None, limit: int, min_score: float | None
    ) -> Iterator[tuple[str, list[SearchHit]]]:
        """Hits from each ``store.shared`` namespace (read only; one never built is skipped)."""
        for name in self.config.store.shared:
            if name == self.agent_id:
                continue
            retriever = self.shared(name)
            try:
                if not retriever.store.published():
                    continue
                with retriever.store.read() as reader:
                    outcome, _warning = retriever.search(
                        reader, text, query, limit=limit, min_score=min_score
                    )
            except MemmwError as exc:  # a shared namespace never fails this agent's search
                log.warning("shared namespace %s could not be searched: %s", name, exc)
                continue
            yield name, outcome.hits

    def result(self, run: SearchRun) -> SearchResult:
        """``run`` with how it was found: provider, model, fallback (``search_result``)."""
        provider = self.embeddings.provider
        failed, reason = self.embeddings.fallback
        return SearchResult(
            hits=run.hits,
            mode=run.mode,
            provider=provider.id if provider is not None else "none",
            model=provider.model if provider is not None else "fts-only",
            fallback_from=failed,
            fallback_reason=reason,
            warning=run.warning,
            partial=run.partial,
        )
