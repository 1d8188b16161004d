"""Query embedding for search: through the breaker, within a short deadline, late answers kept."""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from memmw.embeddings.base import EmbeddingProvider
from memmw.embeddings.breaker import CircuitBreaker
from memmw.errors import ProviderError
from memmw.errors import QueryTimeoutError as QueryTimeoutError
from memmw.redaction import redact_secrets

log = logging.getLogger(__name__)

#: Providers reached over the network: a search waits for them at most its deadline.
REMOTE_PROVIDERS = frozenset({"openai", "gemini"})
#: Late query embeddings kept for the next identical query.
LATE_CACHE_SIZE = 64


def is_remote(provider: Any) -> bool:
    """True for a provider reached over the network (one that can hang)."""
    return getattr(provider, "id", None) in REMOTE_PROVIDERS


@dataclass
class _Call:
    """One query embedding running in its own thread."""

    started: float
    event: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    done: bool = False
    late: bool = False
    vector: list[float] | None = None
    error: BaseException | None = None


class QueryEmbedder:
    """Embeds search queries for one provider without ever holding the search up.

    * The breaker is checked first (here, or open in another process of the state
      folder): an open circuit fails at once with ``CircuitOpenError``.
    * A remote provider's call runs in a helper thread and the search waits at most
      ``timeout_s`` (``remote.query_timeout_s``), never the provider's request timeout
      times its retries; past it :class:`QueryTimeoutError` is raised and counted as a
      breaker failure.
    * While a call is still out past its deadline, the next searches do not start
      another one: they fail at once with :class:`QueryTimeoutError`, and each counts
      as a failure (the provider still has not answered), so the breaker opens after
      ``failure_threshold`` searches without any of them waiting again.
    * A late answer closes the breaker (the provider works) and is kept for the next
      identical query; a late failure was already counted.

    In-process providers (``local``, ``offline``, ``fake`` ...) are called directly
    through the breaker: they cannot hang on a network.

    Args:
        provider: The provider (possibly a fallback wrapper).
        breaker: Its circuit breaker.
        timeout_s: The search's deadline for a remote provider.
    """

    def __init__(
        self, provider: EmbeddingProvider, breaker: CircuitBreaker, *, timeout_s: float
    ) -> None:
        self.provider = provider
        self.breaker = breaker
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._late: _Call | None = None
        self._answers: OrderedDict[tuple[str, str, str], list[float]] = OrderedDict()

    def embed(self, query: str, *, reuse_late: bool = True) -> list[float]:
        """The query's vector, or an error at once or after ``timeout_s`` at most.

        ``reuse_late=False`` always asks the provider (a health probe must not be
        answered by a kept late answer).

        Raises:
            CircuitOpenError: the breaker is open (here or in another process).
            QueryTimeoutError: no answer within the deadline, or an earlier call is
                still out past its own.
            ProviderError: the provider failed.
        """
        kept = self._kept(query) if reuse_late else None
        if kept is not None:
            return kept
        provider = self.provider
        self.breaker.check()
        if not is_remote(provider):
            result: list[float] = self.breaker.call(lambda: provider.embed_query(query))
            return result
        with self._lock:
            late = self._late
        if late is not None:
            waited = time.monotonic() - late.started
            error = QueryTimeoutError(
                f"the embedding provider has not answered a query embedding for {waited:.1f}s"
                f" (remote.query_timeout_s is {self.timeout_s:g}s)"
            )
            self.breaker.failure(error)
            raise error
        call = _Call(started=time.monotonic())
        threading.Thread(
            target=self._run, args=(call, query), name="memmw-query-embed", daemon=True
        ).start()
        finished = call.event.wait(self.timeout_s)
        with call.lock:
            if not finished and not call.done:
                call.late = True
        if call.late:
            with self._lock:
                if self._late is None:
                    self._late = call
            error = QueryTimeoutError(
                f"the embedding provider did not answer within remote.query_timeout_s "
                f"({self.timeout_s:g}s)"
            )
            self.breaker.failure(error)
            raise error
        if call.error is not None:
            self.breaker.failure(call.error)
            raise call.error
        if call.vector is None:  # pragma: no cover - the thread sets one or the other
            raise ProviderError("the query embedding returned nothing")
        self.breaker.success()
        return call.vector

    def _run(self, call: _Call, query: str) -> None:
        vector: list[float] | None = None
        error: BaseException | None = None
        try:
            vector = self.provider.embed_query(query)
        except BaseException as exc:  # handed to the waiting search, or logged when late
            error = exc
        with call.lock:
            call.vector, call.error, call.done = vector, error, True
            late = call.late
        call.event.set()
        if not late:
            return
        with self._lock:
            if self._late is call:
                self._late = None
        if vector is not None:
            self._keep(query, vector)
            self.breaker.success()  # it answers after all: close the circuit
            log.info(
                "late query embedding arrived after %.1fs; kept for the next identical query",
                time.monotonic() - call.started,
            )
        else:  # counted when the deadline passed
            log.debug(
                "late query embedding failed: %s",
                redact_secrets(f"{type(error).__name__}: {error}"),
            )

    def _key(self, query: str) -> tuple[str, str, str]:
        return (str(self.provider.id), str(self.provider.model), query)

    def _kept(self, query: str) -> list[float] | None:
        with self._lock:
            return self._answers.get(self._key(query))

    def _keep(self, query: str, vector: list[float]) -> None:
        with self._lock:
            self._answers[self._key(query)] = vector
            while len(self._answers) > LATE_CACHE_SIZE:
                self._answers.popitem(last=False)
