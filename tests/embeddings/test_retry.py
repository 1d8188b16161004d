"""Which errors are retried, and how long the policy waits."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memmw.embeddings.retry import (
    Liveness,
    RetryPolicy,
    is_quota_error,
    is_retryable,
    is_timeout,
)
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


# -- a hung provider costs one timeout: timeouts are retried only when it answered meanwhile --


class APITimeoutError(Exception):
    """Named like the OpenAI SDK's: a request that got no answer within its timeout."""


class GatewayTimeoutError(Exception):
    """A 504: the server answered (with an error), so it is not hung."""

    status_code = 504


def test_timeouts_are_told_apart_from_answers() -> None:
    assert is_timeout(APITimeoutError("Request timed out."))
    assert is_timeout(TimeoutError())
    assert not is_timeout(APIConnectionError("Connection error."))
    assert not is_timeout(StatusError("boom", 500))


# One try of the call: what it does, and whether another request of the same provider
# (another thread) got an answer while it was out.
_STEPS = ["ok", "timeout_alone", "timeout_while_others_answer", "status_500", "timeout_504"]


@settings(max_examples=200, deadline=None)
@given(script=st.lists(st.sampled_from(_STEPS), min_size=1, max_size=6),
       attempts=st.integers(1, 4))
def test_a_timeout_is_retried_only_if_the_provider_answered_meanwhile(
    script: list[str], attempts: int
) -> None:
    """Invariant: the call stops at the first try that timed out while the provider
    answered nothing (it is hung: another try would wait another whole timeout); other
    retryable failures keep their tries; an answer of any kind counts as life."""
    liveness = Liveness()
    sleeps: list[float] = []
    policy = RetryPolicy(attempts=attempts, sleep=sleeps.append, rng=lambda: 0.0)
    tries: list[str] = []

    def fn() -> str:
        step = script[len(tries)] if len(tries) < len(script) else "ok"
        tries.append(step)
        if step == "timeout_alone":
            raise APITimeoutError("Request timed out.")
        if step == "timeout_while_others_answer":
            liveness.answered()  # another thread's request came back meanwhile
            raise APITimeoutError("Request timed out.")
        if step == "status_500":
            raise StatusError("boom", 500)
        if step == "timeout_504":
            raise GatewayTimeoutError("Gateway Timeout")
        return "vector"

    # The model: try until success, a lone timeout, or the attempts run out.
    expected: list[str] = []
    for step in [*script, *["ok"] * attempts][:attempts]:
        expected.append(step)
        if step in ("ok", "timeout_alone"):
            break
    try:
        result = policy.call(fn, liveness=liveness)
    except (APITimeoutError, StatusError, GatewayTimeoutError):
        assert expected[-1] != "ok"
    else:
        assert result == "vector" and expected[-1] == "ok"
    assert tries == expected
    assert len(sleeps) == len(tries) - 1  # a wait before each retry, none after the last
    if "timeout_alone" in tries:
        assert tries[-1] == "timeout_alone"  # never a try after a lone timeout


def test_without_liveness_timeouts_keep_their_retries() -> None:
    sleeps: list[float] = []
    tries: list[int] = []

    def fn() -> None:
        tries.append(1)
        raise APITimeoutError("Request timed out.")

    with pytest.raises(APITimeoutError):
        RetryPolicy(sleep=sleeps.append).call(fn)
    assert len(tries) == 3
