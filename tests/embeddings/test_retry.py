"""Which errors are retried, and how long the policy waits."""

from __future__ import annotations

import pytest

from memmw.embeddings.retry import RetryPolicy, is_quota_error, is_retryable
from memmw.errors import ProviderError


class StatusError(Exception):
    def __init__(self, message: str, status_code: int) -> None:
        super().__init__(message)
        self.status_code = status_code


class APIConnectionError(Exception):
    pass


@pytest.mark.parametrize(
    "exc",
    [
        ProviderError("Rate limit reached for requests"),
        ProviderError("rate_limit_exceeded"),
        ProviderError("429 Too Many Requests"),
        ProviderError("Resource has been exhausted (e.g. check quota)."),
        ProviderError("Error code: 503 - service unavailable"),
        ProviderError("upstream returned status 502"),
        ProviderError("Cloudflare: origin unreachable"),
        ProviderError("You have exceeded tokens per day"),
        StatusError("boom", 500),
        StatusError("slow down", 429),
        TimeoutError("read timed out"),
        ConnectionResetError("reset by peer"),
        APIConnectionError("Connection error."),
    ],
)
def test_retryable(exc: Exception) -> None:
    assert is_retryable(exc)


@pytest.mark.parametrize(
    "exc",
    [
        ProviderError("invalid input: maximum context length is 8192 tokens, you sent 9000"),
        ProviderError("input longer than 512 tokens"),
        StatusError("bad request", 400),
        StatusError("unauthorized", 401),
        ValueError("nope"),
        StatusError("Error code: 429 - You exceeded your current quota (insufficient_quota)", 429),
    ],
)
def test_not_retryable(exc: Exception) -> None:
    assert not is_retryable(exc)


def test_quota_detection() -> None:
    assert is_quota_error(ProviderError("{'code': 'insufficient_quota'}"))
    err = StatusError("quota", 429)
    err.code = "insufficient_quota"  # type: ignore[attr-defined]
    assert is_quota_error(err)
    assert not is_quota_error(ProviderError("rate limit"))


def test_delays_double_with_cap_and_jitter() -> None:
    policy = RetryPolicy(rng=lambda: 1.0)
    assert [round(policy.delay(n), 3) for n in range(1, 7)] == [0.6, 1.2, 2.4, 4.8, 9.6, 9.6]
    no_jitter = RetryPolicy(rng=lambda: 0.0)
    assert [no_jitter.delay(n) for n in (1, 2, 3)] == [0.5, 1.0, 2.0]


def test_call_retries_then_succeeds() -> None:
    sleeps: list[float] = []
    attempts = iter([ProviderError("429"), ProviderError("503 status"), None])

    def fn() -> str:
        err = next(attempts)
        if err:
            raise err
        return "ok"

    assert RetryPolicy(sleep=sleeps.append, rng=lambda: 0.0).call(fn) == "ok"
    assert sleeps == [0.5, 1.0]


def test_call_gives_up_after_three_tries() -> None:
    sleeps: list[float] = []
    count = 0

    def fn() -> None:
        nonlocal count
        count += 1
        raise ProviderError("status 500")

    with pytest.raises(ProviderError):
        RetryPolicy(sleep=sleeps.append).call(fn)
    assert count == 3
    assert len(sleeps) == 2


def test_call_does_not_retry_quota_or_client_errors() -> None:
    for exc in (ProviderError("insufficient_quota (429)"), StatusError("bad", 400)):
        sleeps: list[float] = []
        count = 0

        def fn(exc: Exception = exc) -> None:
            nonlocal count
            count += 1
            raise exc

        with pytest.raises(type(exc)):
            RetryPolicy(sleep=sleeps.append).call(fn)
        assert count == 1
        assert sleeps == []
