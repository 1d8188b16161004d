"""Retries for remote embedding calls: exponential backoff with jitter on retryable errors only."""

from __future__ import annotations

import datetime
import email.utils
import logging
import math
import random
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")

_RETRYABLE_TEXT = re.compile(
    r"rate[ _]limit|too many requests|\b429\b|resource has been exhausted|resource_exhausted"
    r"|(?:status|code|error|http)\D{0,12}\b5\d\d\b|^\s*5\d\d\b|internal server error|bad gateway"
    r"|service unavailable|gateway time-?out|cloudflare|tokens per day|timed? ?out|timeout"
    r"|connection (?:error|reset|refused|aborted)",
    re.IGNORECASE,
)
_QUOTA_TEXT = re.compile(
    r"insufficient_quota|exceeded your current quota|billing hard limit", re.IGNORECASE
)
_RETRYABLE_TYPE_WORDS = ("timeout", "connection", "connecterror", "readerror", "remoteprotocol")


def is_timeout(exc: BaseException) -> bool:
    """True when the call got no answer at all within its timeout (read or connect).

    ``TimeoutError`` and SDK classes named like one (``APITimeoutError``,
    ``httpx.ReadTimeout``, ``ConnectTimeout``).

    Args:
        exc: The error raised by a provider call.
    """
    if isinstance(exc, TimeoutError):
        return True
    return any("timeout" in cls.__name__.lower() for cls in type(exc).__mro__)


class Liveness:
    """Whether a provider answered anything lately: a count of its answers (thread-safe).

    An answer is any HTTP response, success or error status. A request that timed out
    is retried only if the count grew while it waited (:meth:`RetryPolicy.call`): the
    provider is alive and that request was unlucky. A provider that answered nothing
    during a whole request timeout is hung; trying again would only wait another full
    timeout, so the error surfaces at once (after one ``timeout_s``, not ``attempts``
    of them plus backoff).
    """

    def __init__(self) -> None:
        self._answers = 0
        self._lock = threading.Lock()

    @property
    def answers(self) -> int:
        """Answers seen so far."""
        with self._lock:
            return self._answers

    def answered(self) -> None:
        """Count one answer."""
        with self._lock:
            self._answers += 1


def _status_of(exc: BaseException) -> int | None:
    for attr in ("status_code", "code", "status"):
        value = getattr(exc, attr, None)
        if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
            return value
    response = getattr(exc, "response", None)
    value = getattr(response, "status_code", None)
    if isinstance(value, int) and 100 <= value <= 599:
        return value
    return None


def is_quota_error(exc: BaseException) -> bool:
    """True for quota-exhausted errors, which must never be retried (they only storm).

    Args:
        exc: The error raised by a provider call.
    """
    if getattr(exc, "code", None) == "insufficient_quota":
        return True
    body = getattr(exc, "body", None)
    if isinstance(body, dict) and body.get("code") == "insufficient_quota":
        return True
    return bool(_QUOTA_TEXT.search(str(exc)))


def is_retryable(exc: BaseException) -> bool:
    """True when a failed call is worth another try.

    Retryable: rate limits (429, "rate limit", "too many requests", "resource has been
    exhausted", "tokens per day"), 5xx statuses, Cloudflare errors, timeouts and connection
    errors. Quota exhaustion (``insufficient_quota``) is never retryable.

    Args:
        exc: The error raised by a provider call.
    """
    if is_quota_error(exc):
        return False
    if isinstance(exc, (TimeoutError, ConnectionError)):
        return True
    for cls in type(exc).__mro__:
        name = cls.__name__.lower()
        if any(word in name for word in _RETRYABLE_TYPE_WORDS):
            return True
    status = _status_of(exc)
    if status is not None and (status == 429 or status >= 500):
        return True
    return bool(_RETRYABLE_TEXT.search(str(exc)))


def retry_after_s(exc: BaseException) -> float | None:
    """Seconds the server asked to wait (``Retry-After``/``retry-after-ms``), or None.

    Reads the headers of the HTTP response attached to SDK errors (``exc.response``) or
    to the error itself; accepts delta-seconds and HTTP dates.
    """
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if headers is None:
        headers = getattr(exc, "headers", None)
    if headers is None or not hasattr(headers, "get"):
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return max(0.0, float(ms) / 1000.0)
        value = headers.get("retry-after")
    except Exception:  # an odd headers object: no hint
        return None
    if value is None:
        return None
    text = str(value).strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=datetime.timezone.utc)
        seconds = (when - datetime.datetime.now(datetime.timezone.utc)).total_seconds()
    return max(0.0, seconds) if math.isfinite(seconds) else None


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """How often and how patiently to retry a provider call.

    Attributes:
        attempts: Total tries, the first included.
        base_delay_s: Delay before the second try; it doubles after each failure.
        max_delay_s: Cap on the delay before jitter.
        jitter: Extra random share of the delay (0.2 = up to +20%).
        max_retry_after_s: Longest ``Retry-After`` honoured; a server asking for more is
            not retried (the error surfaces at once instead of stalling the caller).
        sleep: Sleep function (inject a fake one in tests).
        rng: Source of uniform random numbers in [0, 1) for the jitter.
    """

    attempts: int = 3
    base_delay_s: float = 0.5
    max_delay_s: float = 8.0
    jitter: float = 0.2
    max_retry_after_s: float = 30.0
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)
    rng: Callable[[], float] = field(default=random.random, repr=False)

    def delay(self, failures: int) -> float:
        """Seconds to wait after ``failures`` consecutive failures (1-based), jitter included."""
        base = min(self.base_delay_s * (2.0 ** max(failures - 1, 0)), self.max_delay_s)
        return base * (1.0 + self.jitter * self.rng())

    def call(
        self,
        fn: Callable[[], T],
        *,
        what: str = "embedding request",
        liveness: Liveness | None = None,
    ) -> T:
        """Run ``fn``, retrying retryable errors; the last error is re-raised unchanged.

        With ``liveness`` (the provider's), a timed-out try is retried only when the
        provider answered some other request while this one waited; otherwise the
        provider is hung and the timeout is raised at once.

        Args:
            fn: The call to make.
            what: Short description for log messages (never the texts themselves).
            liveness: The provider's answer count (success and error responses).
        """
        failures = 0
        while True:
            seen = liveness.answers if liveness is not None else 0
            try:
                result = fn()
            except Exception as exc:
                failures += 1
                answered = _status_of(exc) is not None  # an error status is an answer too
                timed_out = is_timeout(exc) and not answered
                if liveness is not None and answered:
                    liveness.answered()
                if failures >= self.attempts or not is_retryable(exc):
                    raise
                if timed_out and liveness is not None and liveness.answers == seen:
                    logger.warning(
                        "%s: no answer within the request timeout and none to any other "
                        "request meanwhile; not retried (the provider looks hung)",
                        what,
                    )
                    raise
                wait = self.delay(failures)
                asked = retry_after_s(exc)
                if asked is not None:
                    if asked > self.max_retry_after_s:
                        logger.warning(
                            "%s: server asks to retry in %.0fs (cap %.0fs); giving up",
                            what,
                            asked,
                            self.max_retry_after_s,
                        )
                        raise
                    wait = max(wait, asked)
                logger.warning(
                    "%s failed (%s), retry %d/%d in %.2fs",
                    what,
                    type(exc).__name__,
                    failures,
                    self.attempts - 1,
                    wait,
                )
                self.sleep(wait)
                continue
            if liveness is not None:
                liveness.answered()
            return result


DEFAULT_RETRY = RetryPolicy()
