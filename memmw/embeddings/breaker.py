"""A circuit breaker for an embedding provider: fail fast while it is down, probe to recover."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from memmw.errors import ProviderError
from memmw.redaction import redact_secrets

log = logging.getLogger(__name__)


class CircuitOpenError(ProviderError):
    """The provider failed repeatedly; calls fail at once until a probe succeeds."""


@dataclass(frozen=True, kw_only=True)
class BreakerPolicy:
    """When the breaker opens and how often the background probe tries the provider.

    Attributes:
        failure_threshold: Consecutive failed calls (each after its own retries) that
            open the circuit.
        probe_interval_s: First wait before a probe; doubles after each failed probe.
        max_probe_interval_s: Cap on the wait between probes.
    """

    failure_threshold: int = 2
    probe_interval_s: float = 15.0
    max_probe_interval_s: float = 300.0


class CircuitBreaker:
    """Counts consecutive provider failures and opens after ``failure_threshold``.

    While open, :meth:`check` raises :class:`CircuitOpenError` at once, so a search
    answers keyword-only without waiting on a hung provider, and a background thread
    runs ``probe`` (a tiny embedding) until it succeeds, which closes the circuit.
    Thread-safe.

    Args:
        probe: A cheap call to the provider (raises on failure).
        policy: Thresholds and probe timing.
        stop: Set to end the probe thread (``Memory.close`` sets it).
    """

    def __init__(
        self,
        probe: Callable[[], Any],
        policy: BreakerPolicy | None = None,
        *,
        stop: threading.Event | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._probe = probe
        self.policy = policy or BreakerPolicy()
        self._stop = stop or threading.Event()
        self._clock = clock
        self._lock = threading.Lock()
        self._failures = 0
        self._opened_at: float | None = None
        self._last_error: str | None = None
        self._thread: threading.Thread | None = None
        self.probes = 0

    @property
    def is_open(self) -> bool:
        """True while calls fail fast."""
        with self._lock:
            return self._opened_at is not None

    @property
    def last_error(self) -> str | None:
        """The error that last counted as a failure (secrets redacted)."""
        return self._last_error

    def check(self) -> None:
        """Raise :class:`CircuitOpenError` when the circuit is open; otherwise return."""
        with self._lock:
            if self._opened_at is None:
                return
            since = self._clock() - self._opened_at
            error = self._last_error
        raise CircuitOpenError(
            f"the embedding provider is failing (circuit open for {since:.0f}s after "
            f"{self.policy.failure_threshold} failed calls: {error}); a background probe "
            "closes it when the provider answers again"
        )

    def success(self) -> None:
        """Record a successful call (closes the circuit)."""
        with self._lock:
            was_open = self._opened_at is not None
            self._failures = 0
            self._opened_at = None
        if was_open:
            log.info("embedding provider answers again; circuit closed")

    def failure(self, exc: BaseException) -> None:
        """Record a failed call; opens the circuit at the threshold."""
        text = redact_secrets(f"{type(exc).__name__}: {exc}")
        with self._lock:
            self._failures += 1
            self._last_error = text
            opening = (
                self._opened_at is None and self._failures >= self.policy.failure_threshold
            )
            if opening:
                self._opened_at = self._clock()
        if opening:
            log.warning("embedding provider failing; circuit open, keyword-only: %s", text)
            self._start_probe()

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` through the breaker (fail fast when open, count the outcome)."""
        self.check()
        try:
            result = fn()
        except Exception as exc:
            self.failure(exc)
            raise
        self.success()
        return result

    def to_dict(self) -> dict[str, Any]:
        """State for ``status``."""
        with self._lock:
            return {
                "state": "open" if self._opened_at is not None else "closed",
                "failures": self._failures,
                "lastError": self._last_error,
                "probes": self.probes,
            }

    def _start_probe(self) -> None:
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return
            self._thread = threading.Thread(
                target=self._probe_loop, name="memmw-breaker-probe", daemon=True
            )
            self._thread.start()

    def _probe_loop(self) -> None:
        wait = self.policy.probe_interval_s
        while self.is_open and not self._stop.wait(wait):
            self.probes += 1
            try:
                self._probe()
            except Exception as exc:
                with self._lock:
                    self._last_error = redact_secrets(f"{type(exc).__name__}: {exc}")
                wait = min(wait * 2, self.policy.max_probe_interval_s)
                continue
            self.success()




class GuardedEmbedder:
    """A provider seen through a breaker: document calls fail fast while it is open.

    Forwards the identity the index needs (``id``, ``model``, ``cache_key_data``).
    """

    def __init__(self, provider: Any, breaker: CircuitBreaker) -> None:
        self._provider = provider
        self._breaker = breaker

    @property
    def id(self) -> str:
        """The wrapped provider's id."""
        return str(self._provider.id)

    @property
    def model(self) -> str:
        """The wrapped provider's model."""
        return str(self._provider.model)

    def embed_documents(self, texts: Any) -> list[list[float]]:
        """Embed through the breaker."""
        result: list[list[float]] = self._breaker.call(
            lambda: self._provider.embed_documents(texts)
        )
        return result

    def cache_key_data(self) -> dict[str, object]:
        """The wrapped provider's cache identity."""
        data: dict[str, object] = self._provider.cache_key_data()
        return data
