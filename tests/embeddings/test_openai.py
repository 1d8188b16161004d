"""The OpenAI provider against a loopback stub: plain, compatible endpoints, retries, batches."""

from __future__ import annotations

import json
import math
import time
from typing import Any

import pytest

from memmw.config import BatchConfig, MemoryConfig, RemoteConfig
from memmw.embeddings import retry as retry_mod
from memmw.embeddings.exceptions import MissingApiKeyError
from memmw.embeddings.fallback import FallbackProvider
from memmw.embeddings.openai import OpenAIEmbeddingProvider
from memmw.embeddings.registry import create_provider
from memmw.embeddings.retry import RetryPolicy
from memmw.errors import ProviderError
from memmw.testing import FakeEmbeddingProvider, fake_vector, require_optional

require_optional("openai", "openai")

Stub = Any


def _provider(server: Stub, retry: RetryPolicy, **kwargs: Any) -> OpenAIEmbeddingProvider:
    return OpenAIEmbeddingProvider(
        api_key="sk-test", base_url=server.url + "/v1", retry=retry, **kwargs
    )


def _close(a: list[float], b: list[float]) -> bool:
    return all(math.isclose(x, y, abs_tol=1e-6) for x, y in zip(a, b, strict=True))


def test_plain_embeddings_base64_and_order(openai_stub: Stub, fast_retry: RetryPolicy) -> None:
    server, _app = openai_stub
    p = _provider(server, fast_retry)
    assert (p.id, p.model, p.dims) == ("openai", "text-embedding-3-small", 1536)
    docs = p.embed_documents(["alpha beta", "gamma"])
    assert _close(docs[0], fake_vector("alpha beta", 8))
    assert _close(docs[1], fake_vector("gamma", 8))
    assert _close(p.embed_query("alpha"), fake_vector("alpha", 8))
    body = server.requests[0].json()
    assert body["model"] == "text-embedding-3-small"
    assert body["encoding_format"] == "base64"  # the SDK default; the stub answered in kind
    assert "dimensions" not in body
    assert server.requests[0].headers["authorization"] == "Bearer sk-test"


def test_compatible_endpoint_headers_dimensions_no_key(
    openai_stub: Stub, fast_retry: RetryPolicy
) -> None:
    server, _app = openai_stub
    config = MemoryConfig(
        provider="openai",
        model="my-local-embedder",
        remote=RemoteConfig(
            base_url=server.url + "/v1",
            headers={"X-Tenant": "acme", "X-Trace": "t1"},
            dimensions=16,
        ),
    )
    selection = create_provider(config)
    p = selection.provider
    assert p is not None
    assert (p.model, p.dims) == ("my-local-embedder", 16)
    assert len(p.embed_query("hello")) == 16
    req = server.requests[-1]
    assert req.path == "/v1/embeddings"
    assert req.headers["x-tenant"] == "acme"
    assert req.headers["x-trace"] == "t1"
    assert req.json()["dimensions"] == 16
    key_data = p.cache_key_data()
    assert key_data["base_url"] == server.url + "/v1"
    assert "acme" not in json.dumps(key_data)  # headers are fingerprinted only
    assert p.max_input_bytes == 8192


def test_missing_key_for_openai_host(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(MissingApiKeyError, match="OPENAI_API_KEY"):
        OpenAIEmbeddingProvider()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    assert OpenAIEmbeddingProvider().model == "text-embedding-3-small"


def test_requests_are_grouped_by_bytes(openai_stub: Stub, fast_retry: RetryPolicy) -> None:
    server, _app = openai_stub
    p = _provider(server, fast_retry, concurrency=1)
    texts = [f"doc {i} " + "w " * 1500 for i in range(6)]  # ~3 kB each
    vectors = p.embed_documents(texts)
    assert len(vectors) == 6
    bodies = [r.json() for r in server.requests]
    assert len(bodies) == 3
    for body in bodies:
        assert sum(len(t.encode()) for t in body["input"]) <= 8000


def test_long_input_is_split_and_averaged(openai_stub: Stub, fast_retry: RetryPolicy) -> None:
    server, _app = openai_stub
    p = _provider(server, fast_retry)
    (vec,) = p.embed_documents(["long " * 4000])  # 20 kB > 8192
    assert math.isclose(math.hypot(*vec), 1.0, rel_tol=1e-6)
    sent = [t for r in server.requests for t in r.json()["input"]]
    assert len(sent) == 3
    assert all(len(t.encode()) <= 8192 for t in sent)


def test_429_then_success_is_retried(
    openai_stub: Stub, fast_retry: RetryPolicy, sleeps: list[float]
) -> None:
    server, app = openai_stub
    app.failures = [
        (429, {"error": {"message": "Rate limit reached", "type": "requests", "code": None}}),
        (503, {"error": {"message": "overloaded", "type": "server_error", "code": None}}),
    ]
    p = _provider(server, fast_retry)
    assert len(p.embed_query("hi")) == 8
    assert len(server.requests) == 3
    assert sleeps == [pytest.approx(0.6), pytest.approx(1.2)]  # 0.5 s doubling, +20% jitter


def test_quota_error_is_not_retried(
    openai_stub: Stub, fast_retry: RetryPolicy, sleeps: list[float]
) -> None:
    server, app = openai_stub
    app.always_fail = (
        429,
        {
            "error": {
                "message": "You exceeded your current quota, please check your plan.",
                "type": "insufficient_quota",
                "code": "insufficient_quota",
            }
        },
    )
    p = _provider(server, fast_retry)
    with pytest.raises(ProviderError, match="quota"):
        p.embed_query("hi")
    assert len(server.requests) == 1
    assert sleeps == []


def test_permanent_500_switches_to_fallback(
    openai_stub: Stub, fast_retry: RetryPolicy, sleeps: list[float]
) -> None:
    server, app = openai_stub
    app.always_fail = (500, {"error": {"message": "internal", "type": "server_error"}})
    fake = FakeEmbeddingProvider(dims=12)
    switched: list[str] = []
    wrapped = FallbackProvider(
        _provider(server, fast_retry), fake, on_switch=lambda fp: switched.append(fp.id)
    )
    vec = wrapped.embed_documents(["hello world"])[0]
    assert len(server.requests) == 3  # three tries, then the fallback
    assert len(sleeps) == 2
    assert vec == fake_vector("hello world", 12)
    assert (wrapped.id, wrapped.model, wrapped.dims) == ("fake", "fake-hash-v1", 12)
    assert wrapped.fallback_from == "openai"
    assert wrapped.fallback_reason is not None and "500" in wrapped.fallback_reason
    assert wrapped.generation == 1 and switched == ["fake"]
    assert wrapped.status()["fallback_from"] == "openai"
    wrapped.embed_query("again")  # sticky: the failed primary is not asked again
    assert len(server.requests) == 3


def test_permanent_500_without_fallback_reports_keyword_only(
    openai_stub: Stub, fast_retry: RetryPolicy
) -> None:
    server, app = openai_stub
    app.always_fail = (500, {"error": {"message": "internal", "type": "server_error"}})
    wrapped = FallbackProvider(_provider(server, fast_retry), None)
    with pytest.raises(ProviderError, match="500"):
        wrapped.embed_query("hello")
    assert wrapped.keyword_only
    assert wrapped.status()["keyword_only"] is True
    assert wrapped.fallback_from == "openai"
    app.always_fail = None  # the service recovers: vectors are back
    assert len(wrapped.embed_query("hello")) == 8
    assert not wrapped.keyword_only


def test_create_provider_wraps_with_configured_fallback(
    openai_stub: Stub, monkeypatch: pytest.MonkeyPatch, sleeps: list[float]
) -> None:
    server, app = openai_stub
    monkeypatch.setattr(retry_mod, "DEFAULT_RETRY", RetryPolicy(sleep=sleeps.append))
    app.always_fail = (502, {"error": {"message": "bad gateway", "type": "server_error"}})
    config = MemoryConfig(
        provider="openai",
        fallback="fake",
        remote=RemoteConfig(base_url=server.url + "/v1", api_key="sk-x"),
    )
    selection = create_provider(config)
    provider = selection.provider
    assert isinstance(provider, FallbackProvider)
    assert provider.id == "openai"
    provider.embed_documents(["x"])
    assert provider.id == "fake"
    assert provider.fallback_from == "openai"
    assert "sk-x" not in json.dumps(provider.status())


# Batch API


def _batch_provider(server: Stub, retry: RetryPolicy, **kwargs: Any) -> OpenAIEmbeddingProvider:
    batch = BatchConfig(enabled=True, poll_interval_ms=1, **kwargs)
    return _provider(server, retry, batch=batch)


def test_batch_api_flow(openai_stub: Stub, fast_retry: RetryPolicy) -> None:
    server, app = openai_stub
    p = _batch_provider(server, fast_retry)
    texts = ["first memory", "second memory", "third " * 3000]
    vectors = p.embed_documents(texts)
    assert _close(vectors[0], fake_vector("first memory", 8))
    assert _close(vectors[1], fake_vector("second memory", 8))
    assert math.isclose(math.hypot(*vectors[2]), 1.0, rel_tol=1e-6)  # split piece average
    assert server.paths() == [
        "/v1/files",
        "/v1/batches",
        "/v1/batches/batch_1",
        "/v1/batches/batch_1",
        "/v1/files/batch_1-out/content",
    ]
    lines = [json.loads(x) for x in app.files["file-1"].splitlines()]
    assert [line["custom_id"] for line in lines] == ["0", "1", "2", "3", "4"]
    assert lines[0]["url"] == "/v1/embeddings"
    assert lines[0]["body"] == {
        "model": "text-embedding-3-small",
        "input": "first memory",
        "encoding_format": "float",
    }
    create = next(r for r in server.requests if r.path == "/v1/batches").json()
    assert create["endpoint"] == "/v1/embeddings"
    assert create["completion_window"] == "24h"
    # queries never go through the batch API
    p.embed_query("q")
    assert server.paths()[-1] == "/v1/embeddings"


def test_batch_failures_fall_back_then_disable(openai_stub: Stub, fast_retry: RetryPolicy) -> None:
    server, app = openai_stub
    app.batch_mode = "fail"
    p = _batch_provider(server, fast_retry)
    assert len(p.embed_documents(["a"])) == 1  # failed batch -> plain request
    assert p.batch_guard.active and p.batch_guard.failures == 1
    assert server.paths()[-1] == "/v1/embeddings"
    p.embed_documents(["b"])
    assert not p.batch_guard.active
    assert "2 times" in (p.batch_guard.disabled_reason or "")
    before = len(server.requests)
    p.embed_documents(["c"])
    assert server.paths()[before:] == ["/v1/embeddings"]


def test_batch_not_available_disables_at_once(openai_stub: Stub, fast_retry: RetryPolicy) -> None:
    server, app = openai_stub
    app.batch_mode = "unavailable"
    p = _batch_provider(server, fast_retry)
    assert len(p.embed_documents(["a", "b"])) == 2
    assert not p.batch_guard.active
    assert p.batch_guard.failures == 1
    assert "not available" in (p.batch_guard.disabled_reason or "")


def test_batch_timeout_is_retried_once(openai_stub: Stub, fast_retry: RetryPolicy) -> None:
    server, app = openai_stub
    app.batch_mode = "never"
    p = _batch_provider(server, fast_retry, timeout_minutes=0.0)
    assert len(p.embed_documents(["a"])) == 1
    creates = [r for r in server.requests if r.method == "POST" and r.path == "/v1/batches"]
    cancels = [r for r in server.requests if r.path.endswith("/cancel")]
    assert len(creates) == 2  # the timed-out batch was resubmitted once
    assert len(cancels) == 2
    assert p.batch_guard.failures == 1  # the pair counts as one failure
    assert server.paths()[-1] == "/v1/embeddings"


# -- bounded waiting (issue 9, item 5) ---------------------------------------------------


def test_retry_after_is_honoured(
    openai_stub: Stub, fast_retry: RetryPolicy, sleeps: list[float]
) -> None:
    server, app = openai_stub
    limited = {"error": {"message": "Rate limit reached", "type": "requests", "code": None}}
    app.failures = [(429, limited, {"Retry-After": "20"})]
    p = _provider(server, fast_retry)
    assert len(p.embed_query("hi")) == 8
    assert sleeps == [20.0]  # not the 0.6 s backoff


def test_retry_after_beyond_the_cap_fails_at_once(
    openai_stub: Stub, fast_retry: RetryPolicy, sleeps: list[float]
) -> None:
    server, app = openai_stub
    limited = {"error": {"message": "Rate limit reached", "type": "requests", "code": None}}
    app.failures = [(429, limited, {"Retry-After": "3600"})]
    p = _provider(server, fast_retry)
    with pytest.raises(ProviderError, match="429"):
        p.embed_query("hi")
    assert sleeps == [] and len(server.requests) == 1


def test_document_requests_honour_timeout_s(hanging_url: str) -> None:
    retry = RetryPolicy(attempts=2, base_delay_s=0.05, jitter=0.0)
    p = OpenAIEmbeddingProvider(
        api_key="sk-test", base_url=hanging_url + "/v1", retry=retry, timeout_s=0.3
    )
    started = time.monotonic()
    with pytest.raises(ProviderError):
        p.embed_documents(["a note"])
    elapsed = time.monotonic() - started
    assert elapsed < 0.3 * 2 + 0.05 + 1.0  # timeout_s x tries + backoff + slack, not 120 s


def test_an_error_body_that_echoes_the_key_is_redacted(
    openai_stub: Stub, fast_retry: RetryPolicy
) -> None:
    server, app = openai_stub
    key = "sk-proj-Zyxwvutsrqponmlkjihgfedcba0123456789"
    app.always_fail = (
        401,
        {"error": {"message": f"Incorrect API key provided: {key}", "type": "auth", "code": None}},
    )
    p = _provider(server, fast_retry)
    with pytest.raises(ProviderError) as info:
        p.embed_query("hi")
    assert key not in str(info.value) and "401" in str(info.value)


def test_batch_output_lines_are_jsonl_lines_not_unicode_line_breaks() -> None:
    from memmw.embeddings.openai import _parse_batch_output

    def record(i: int, vector: list[float], note: str) -> str:
        body = {"data": [{"embedding": vector}], "note": note}
        return json.dumps({"custom_id": str(i), "response": {"status_code": 200, "body": body}},
                          ensure_ascii=False)

    text = record(0, [1.0, 0.0], "a\u2028b") + "\r\n" + record(1, [0.0, 1.0], "c\x85d") + "\n"
    assert _parse_batch_output(text, 2) == [[1.0, 0.0], [0.0, 1.0]]
