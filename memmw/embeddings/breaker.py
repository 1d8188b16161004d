"""A circuit breaker for an embedding provider: fail fast while it is down, probe to recover."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memmw.errors import CircuitOpenError as CircuitOpenError
from memmw.redaction import redact_secrets
from memmw.workspace.files import atomic_write_text
from memmw.workspace.locks import exclusive_lock, lock_path_for

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class BreakerPolicy:
    """When the breaker opens and how often the background probe tries the provider.

    Attributes:
        failure_threshold: Consecutive failed calls (each after its own retries) that
            open the circuit.
        probe_interval_s: First wait before a probe; doubles after each failed probe.
        max_probe_interval_s: Cap on the wait between probes.
        shared_open_s: How long other processes of the same state folder fail fast after
            this one opened the circuit (refreshed by each failed probe of this process;
            a success anywhere ends it).
    """

    failure_threshold: int = 2
    probe_interval_s: float = 15.0
    max_probe_interval_s: float = 300.0
    shared_open_s: float = 60.0


#: Name of the file, in a state folder, that shares breaker state between processes.
SHARED_CIRCUIT_FILE = "provider-circuit.json"
#: How long a process waits for the shared file's lock before giving up on sharing.
_SHARED_LOCK_TIMEOUT_S = 1.0


class SharedCircuit:
    """Breaker state shared by the processes of one state folder: a small JSON file.

    One entry per provider identity (``key``: a hash of provider, model and endpoint):
    the consecutive failures every process saw, ``openUntil`` (wall clock) once a
    breaker opened, the last error (redacted) and the pid that wrote it. A new CLI or
    MCP process reads it before calling the provider and fails fast while it is open,
    instead of paying the timeout again; a success anywhere removes the entry.

    Best effort: a state folder that cannot be written only loses the sharing. Reads
    take no lock (writes replace the file atomically); read-modify-writes take the
    sidecar lock ``<file>.lock``.

    Args:
        path: The JSON file (``<state_dir>/provider-circuit.json``).
        key: The provider identity.
        clock: Wall-clock source (inject one in tests).
    """

    def __init__(self, path: Path, key: str, *, clock: Callable[[], float] = time.time) -> None:
        self.path = Path(path)
        self.key = key
        self.clock = clock
        self._seen: tuple[int, int, int] | None = None
        self._entry: dict[str, Any] | None = None
        self._guard = threading.Lock()

    def entry(self) -> dict[str, Any] | None:
        """This provider's entry, or None (re-read only when the file changed)."""
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        seen = (st.st_ino, st.st_mtime_ns, st.st_size)
        with self._guard:
            if seen == self._seen:
                return self._entry
        entry = self._load().get(self.key)
        entry = entry if isinstance(entry, dict) else None
        with self._guard:
            self._seen, self._entry = seen, entry
        return entry

    def open_until(self) -> float | None:
        """Wall-clock time until which the provider is recorded as down, or None."""
        entry = self.entry()
        until = entry.get("openUntil") if entry else None
        if isinstance(until, (int, float)) and until > self.clock():
            return float(until)
        return None

    def add_failure(self, error: str) -> int | None:
        """Count one more consecutive failure; returns the shared count (None: not shared)."""

        def change(entry: dict[str, Any]) -> None:
            entry["failures"] = int(entry.get("failures") or 0) + 1
            entry["lastError"] = error

        entry = self._update(change)
        return None if entry is None else int(entry["failures"])

    def open(self, error: str, seconds: float) -> bool:
        """Record the circuit open for ``seconds`` from now; False when it could not."""

        def change(entry: dict[str, Any]) -> None:
            entry["openUntil"] = self.clock() + seconds
            entry["lastError"] = error

        return self._update(change) is not None

    def clear(self) -> None:
        """Forget this provider's failures (it answered); a no-op when nothing is recorded."""
        if self.entry() is not None:
            self._update(None)

    def _load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _update(self, change: Callable[[dict[str, Any]], None] | None) -> dict[str, Any] | None:
        """Apply ``change`` to this entry (None deletes it) under the lock; None on failure."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with exclusive_lock(lock_path_for(self.path), timeout=_SHARED_LOCK_TIMEOUT_S):
                data = self._load()
                now = self.clock()
                # Drop entries of other providers that closed long ago (never grows).
                data = {
                    k: v
                    for k, v in data.items()
                    if isinstance(v, dict) and float(v.get("updated") or 0) > now - 86400
                }
                entry: dict[str, Any] | None = None
                if change is None:
                    data.pop(self.key, None)
                else:
                    entry = dict(data.get(self.key) or {})
                    change(entry)
                    entry["pid"] = os.getpid()
                    entry["updated"] = now
                    data[self.key] = entry
                atomic_write_text(self.path, json.dumps(data, indent=1, sort_keys=True))
        except (OSError, TimeoutError, ValueError) as exc:
            log.debug("shared breaker state not written (%s): %s", self.path, exc)
            return None
        return entry if entry is not None else {}


class CircuitBreaker:
    """Counts consecutive provider failures and opens after ``failure_threshold``.

    While open, :meth:`check` raises :class:`CircuitOpenError` at once, so a search
    answers keyword-only without waiting on a hung provider, and a background thread
    runs ``probe`` (a tiny embedding) until it succeeds, which closes the circuit.
    Thread-safe.

    With ``shared``, the failure count and the open state are also kept in a file of
    the state folder, so the other processes of that folder fail fast too (see
    :class:`SharedCircuit`) and a success in any of them closes it for all.

    Args:
        probe: A cheap call to the provider (raises on failure).
        policy: Thresholds and probe timing.
        stop: Set to end the probe thread (``Memory.close`` sets it).
        shared: The state shared with the other processes of the state folder, or None.
    """

    def __init__(
        self,
        probe: Callable[[], Any],
        policy: BreakerPolicy | None = None,
        *,
        stop: threading.Event | None = None,
        clock: Callable[[], float] = time.monotonic,
        shared: SharedCircuit | None = None,
    ) -> None:
        self._probe = probe
        self.policy = policy or BreakerPolicy()
        self._stop = stop or threading.Event()
        self._clock = clock
        self._shared = shared
        self._shared_open = False  # this process recorded the open state in ``shared``
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
        """Raise :class:`CircuitOpenError` when the circuit is open; otherwise return.

        Open means open here, or recorded open in the shared state by another process
        of the same state folder (until its ``openUntil``).
        """
        with self._lock:
            opened_at = self._opened_at
            error = self._last_error
            shared_open = self._shared_open
        shared = self._shared
        if opened_at is not None:
            if shared_open and shared is not None and shared.entry() is None:
                # Another process of this state folder reached the provider: close now
                # rather than at this process's next probe (up to minutes away).
                self.success()
                return
            since = self._clock() - opened_at
            raise CircuitOpenError(
                f"the embedding provider is failing (circuit open for {since:.0f}s after "
                f"{self.policy.failure_threshold} failed calls: {error}); a background probe "
                "closes it when the provider answers again"
            )
        until = shared.open_until() if shared is not None else None
        if until is not None and shared is not None:
            entry = shared.entry() or {}
            left = max(0.0, until - shared.clock())
            raise CircuitOpenError(
                f"the embedding provider is failing (circuit opened by memmw process "
                f"{entry.get('pid')} of this state folder, {left:.0f}s left: "
                f"{entry.get('lastError')})"
            )

    def success(self) -> None:
        """Record a successful call (closes the circuit, here and in the shared state)."""
        with self._lock:
            was_open = self._opened_at is not None
            self._failures = 0
            self._opened_at = None
            self._shared_open = False
        if self._shared is not None:
            self._shared.clear()
        if was_open:
            log.info("embedding provider answers again; circuit closed")

    def failure(self, exc: BaseException) -> None:
        """Record a failed call; opens the circuit at the threshold.

        With shared state the threshold counts the failures of every process of the
        state folder, so two one-shot CLI runs that each time out open it.
        """
        text = redact_secrets(f"{type(exc).__name__}: {exc}")
        shared_count = self._shared.add_failure(text) if self._shared is not None else None
        with self._lock:
            self._failures = max(self._failures + 1, shared_count or 0)
            self._last_error = text
            opening = (
                self._opened_at is None and self._failures >= self.policy.failure_threshold
            )
            if opening:
                self._opened_at = self._clock()
        if opening:
            log.warning("embedding provider failing; circuit open, keyword-only: %s", text)
            self._share_open(self.policy.shared_open_s)
            self._start_probe()

    def _share_open(self, seconds: float) -> None:
        """Tell the other processes of the state folder that the circuit is open."""
        if self._shared is None:
            return
        opened = self._shared.open(self._last_error or "", seconds)
        with self._lock:
            self._shared_open = opened and self._opened_at is not None

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
        until = self._shared.open_until() if self._shared is not None else None
        with self._lock:
            data: dict[str, Any] = {
                "state": "open" if self._opened_at is not None or until else "closed",
                "failures": self._failures,
                "lastError": self._last_error,
                "probes": self.probes,
            }
        if until is not None:
            data["sharedOpenUntil"] = until
        return data

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
                # Still down: keep the other processes failing fast until the next probe.
                self._share_open(max(self.policy.shared_open_s, wait))
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
