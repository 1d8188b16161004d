"""The embedding side of one agent: its provider, breaker, query deadline and fallback.

:class:`Embeddings` is the one object the engine and search ask for vectors: it chooses
the provider (``embeddings/registry``), guards it with the circuit breaker shared by the
processes of the state folder, embeds search queries within ``remote.query_timeout_s``
(:class:`~memmw.embeddings.query.QueryEmbedder`) and reports a fallback switch. What a
provider may also be (switching, closing) is declared on protocols in
:mod:`memmw.embeddings.base`, never probed attribute by attribute.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

from memmw.config import MemoryConfig
from memmw.embeddings.base import ClosingProvider, EmbeddingProvider, SwitchingProvider
from memmw.embeddings.breaker import (
    SHARED_CIRCUIT_FILE,
    BreakerPolicy,
    CircuitBreaker,
    GuardedEmbedder,
    SharedCircuit,
)
from memmw.embeddings.query import QueryEmbedder
from memmw.embeddings.registry import ProviderSelection, create_provider
from memmw.errors import QueryTimeoutError
from memmw.redaction import redact_secrets
from memmw.store.vectors import provider_key

log = logging.getLogger(__name__)


class Embeddings:
    """The embedding provider of one agent and everything that guards it.

    Args:
        config: Memory settings (``provider``, ``fallback``, ``remote``).
        state_dir: The state folder (its ``provider-circuit.json`` is shared by every
            process of the folder).
        stop: Set when the owner closes: the breaker's background probe stops.
    """

    def __init__(self, config: MemoryConfig, state_dir: Path, *, stop: threading.Event) -> None:
        self.config = config
        self.state_dir = state_dir
        self.stop = stop
        #: Fail-fast guard of the provider (read when the breaker is first made).
        self.policy = BreakerPolicy()
        self._selection: ProviderSelection | None = None
        #: The selected provider when it can switch to a fallback (checked once per selection).
        self._switching: SwitchingProvider | None = None
        self._breaker: CircuitBreaker | None = None
        self._query: QueryEmbedder | None = None

    # -- the provider -----------------------------------------------------------------
    @property
    def selection(self) -> ProviderSelection:
        """The provider chosen for this config (resolved on first use).

        Raises:
            ProviderUnavailableError: an explicitly chosen provider cannot start.
        """
        if self._selection is None:
            self.selection = create_provider(self.config)
        assert self._selection is not None
        return self._selection

    @selection.setter
    def selection(self, value: ProviderSelection) -> None:
        provider = value.provider
        # A protocol check costs more than a search's other bookkeeping: once here.
        self._switching = provider if isinstance(provider, SwitchingProvider) else None
        self._selection = value

    @property
    def provider(self) -> EmbeddingProvider | None:
        """The active provider, or None in keyword-only mode."""
        return self.selection.provider

    @property
    def for_vectors(self) -> EmbeddingProvider | None:
        """The provider when the index keeps vectors (``store.vector_enabled``), else None."""
        provider = self.provider
        return provider if provider is not None and self.config.store.vector_enabled else None

    @property
    def generation(self) -> int | None:
        """Fallback switches of the provider so far; None for one that cannot switch."""
        self.selection  # noqa: B018 - resolves the provider (and whether it can switch)
        return self._switching.generation if self._switching is not None else None

    @property
    def fallback(self) -> tuple[str | None, str | None]:
        """``(provider that failed, reason)`` of a fallback at start-up or run time."""
        selection = self.selection
        switched = self._switching
        failed = selection.fallback_from or (switched.fallback_from if switched else None)
        if not failed:
            return None, None
        reason = selection.fallback_reason or (switched.fallback_reason if switched else None)
        return failed, reason

    @property
    def dims(self) -> int | None:
        """The provider's vector size as far as it knows it."""
        return getattr(self.provider, "dims", None)

    # -- the breaker ------------------------------------------------------------------
    @property
    def breaker(self) -> CircuitBreaker | None:
        """The circuit breaker, once a call made it (None before)."""
        return self._breaker

    def breaker_for(self, provider: EmbeddingProvider) -> CircuitBreaker:
        """The circuit breaker of ``provider`` (made on first use, probes it when open)."""
        if self._breaker is None:
            self._breaker = CircuitBreaker(
                lambda: provider.embed_query("memmw health probe"),
                self.policy,
                stop=self.stop,
                # Shared by the processes of this state folder: a new CLI or MCP process
                # fails fast on a provider another one found down.
                shared=SharedCircuit(self.state_dir / SHARED_CIRCUIT_FILE, provider_key(provider)),
            )
        return self._breaker

    def guarded(self, provider: EmbeddingProvider) -> GuardedEmbedder:
        """``provider`` for document batches: through the breaker."""
        return GuardedEmbedder(provider, self.breaker_for(provider))

    # -- query embedding ----------------------------------------------------------------
    def query_embedder(self, provider: EmbeddingProvider) -> QueryEmbedder:
        """Embeds this agent's search queries (breaker, ``remote.query_timeout_s``).

        A search never waits past one request timeout either (no retries): the deadline
        is the smaller of ``query_timeout_s`` and about one ``timeout_s``.
        """
        if self._query is None:
            remote = self.config.remote
            self._query = QueryEmbedder(
                provider,
                self.breaker_for(provider),
                timeout_s=min(remote.query_timeout_s, remote.timeout_s * 1.2 + 0.2),
            )
        return self._query

    def for_search(self, query: str) -> QueryVector | None:
        """The query vector of one search (embedded on first use), or None keyword-only."""
        provider = self.for_vectors
        return None if provider is None else QueryVector(self, provider, query)

    def probe(self, text: str = "memmw health probe") -> dict[str, Any]:
        """Embed ``text`` the way a search embeds its query: a bounded health probe.

        Returns ``{ok, dims, ms}`` or ``{ok: False, error}``.
        """
        provider = self.provider
        if provider is None:
            return {"ok": False, "error": "no embedding provider (keyword-only)"}
        started = time.perf_counter()
        try:
            vector = self.query_embedder(provider).embed(text, reuse_late=False)
        except Exception as exc:
            return {"ok": False, "error": redact_secrets(f"{type(exc).__name__}: {exc}")}
        return {
            "ok": True,
            "dims": len(vector),
            "ms": round((time.perf_counter() - started) * 1000, 1),
        }

    def close(self) -> None:
        """Close the provider's client (an open socket warns when collected)."""
        provider = self._selection.provider if self._selection else None
        if isinstance(provider, ClosingProvider):
            try:
                provider.close()
            except Exception:
                log.debug("closing the embedding provider failed", exc_info=True)


class QueryVector:
    """One search's query embedding, shared by every index the search reads.

    Embedded at most once per (provider, model); a failure is kept too, so the next
    namespace of the same search does not wait out the provider again.
    """

    def __init__(self, embeddings: Embeddings, provider: EmbeddingProvider, query: str) -> None:
        self.embeddings = embeddings
        self.provider = provider
        self.query = query
        self._memo: dict[tuple[str, str], list[float] | Exception] = {}

    @property
    def unswitched_fallback(self) -> bool:
        """True while the provider could still switch to its fallback (none happened yet)."""
        return self.embeddings.generation == 0

    def vector(self) -> list[float]:
        """The query's vector.

        Raises:
            Exception: whatever the provider, its breaker or the deadline raised (kept).
        """
        provider = self.provider
        key = (provider.id, provider.model)
        if key not in self._memo:
            try:
                self._memo[key] = self.embeddings.query_embedder(provider).embed(self.query)
            except Exception as exc:
                self._memo[key] = exc
        found = self._memo[key]
        if isinstance(found, Exception):
            raise found
        return found

    @property
    def timed_out(self) -> bool:
        """True when the vector leg missed the deadline (the search is ``partial``)."""
        return any(isinstance(v, QueryTimeoutError) for v in self._memo.values())
