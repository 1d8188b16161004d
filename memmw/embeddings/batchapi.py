"""Failure policy shared by the provider batch APIs (OpenAI files+batches, Gemini batches)."""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from memmw.embeddings.exceptions import BatchUnavailableError

logger = logging.getLogger(__name__)

T = TypeVar("T")

_NOT_AVAILABLE = re.compile(
    r"not available|not supported|unsupported|not found|not implemented|\b404\b|\b405\b|\b501\b",
    re.IGNORECASE,
)


def looks_not_available(exc: BaseException) -> bool:
    """True when an error says the batch endpoint does not exist or is not offered."""
    if isinstance(exc, BatchUnavailableError) and exc.not_available:
        return True
    status = getattr(exc, "status_code", None) or getattr(exc, "code", None)
    if status in (404, 405, 501):
        return True
    return bool(_NOT_AVAILABLE.search(str(exc)))


class BatchGuard:
    """Decides whether to use a batch API and disables it after repeated failures.

    Policy (as the reference): a timed-out batch is retried once; a "not available" error
    disables batch mode at once; after ``max_failures`` failures batch mode is disabled for
    the rest of the run. Whenever a batch attempt fails, :meth:`run` returns None and the
    caller embeds the same inputs with plain requests.

    Attributes:
        failures: Batch failures so far.
        disabled_reason: Why batch mode was turned off, or None while it is usable.
    """

    def __init__(self, enabled: bool, *, max_failures: int = 2, provider: str = "provider"):
        """Create a guard.

        Args:
            enabled: Whether batch mode is configured at all.
            max_failures: Failures after which batch mode is disabled.
            provider: Name used in log messages.
        """
        self._configured = enabled
        self._max_failures = max_failures
        self._provider = provider
        self._lock = threading.Lock()
        self.failures = 0
        self.disabled_reason: str | None = None

    @property
    def active(self) -> bool:
        """True when the next call should try the batch API."""
        return self._configured and self.disabled_reason is None

    def _record_failure(self, exc: BaseException) -> None:
        with self._lock:
            self.failures += 1
            if looks_not_available(exc):
                self.disabled_reason = f"batch API not available: {type(exc).__name__}"
            elif self.failures >= self._max_failures:
                self.disabled_reason = f"batch API failed {self.failures} times"
        if self.disabled_reason:
            logger.warning(
                "%s batch mode disabled for this run (%s); using plain requests",
                self._provider,
                self.disabled_reason,
            )
        else:
            logger.warning(
                "%s batch failed (%s); using plain requests for these inputs",
                self._provider,
                type(exc).__name__,
            )
        logger.debug("%s batch failure detail: %s", self._provider, exc)

    def run(self, job: Callable[[], T]) -> T | None:
        """Run one batch job under the policy.

        Args:
            job: Submits the batch, waits for it and returns its result; raises on failure
                (a :class:`BatchUnavailableError` with ``timed_out=True`` for time-outs).

        Returns:
            The job's result, or None when the caller must fall back to plain requests.
        """
        if not self.active:
            return None
        timeouts = 0
        while True:
            try:
                return job()
            except Exception as exc:
                if isinstance(exc, BatchUnavailableError) and exc.timed_out and timeouts == 0:
                    timeouts += 1
                    logger.warning("%s batch timed out; retrying it once", self._provider)
                    continue
                self._record_failure(exc)
                return None


def poll_until_done(
    fetch: Callable[[], T],
    is_done: Callable[[T], bool],
    *,
    interval_s: float,
    timeout_s: float,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """Call ``fetch`` until ``is_done`` says so; raise a timed-out BatchUnavailableError.

    Args:
        fetch: Returns the job's current state.
        is_done: True for a terminal state (success or failure).
        interval_s: Pause between polls.
        timeout_s: Total time allowed.
        sleep: Sleep function (injectable for tests).
        clock: Monotonic clock (injectable for tests).
    """
    deadline = clock() + timeout_s
    while True:
        state = fetch()
        if is_done(state):
            return state
        if clock() >= deadline:
            raise BatchUnavailableError(
                f"batch did not finish within {timeout_s:.0f}s", timed_out=True
            )
        sleep(interval_s)
