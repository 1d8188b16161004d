"""The Gemini provider against a loopback stub: task types, prefixes, dimensions, batch API."""

from __future__ import annotations

import math
from typing import Any

import pytest

from memmw.config import BatchConfig, MemoryConfig, RemoteConfig
from memmw.embeddings.exceptions import MissingApiKeyError
from memmw.embeddings.gemini import GeminiEmbeddingProvider, normalize_gemini_model
from memmw.embeddings.registry import create_provider
from memmw.embeddings.retry import RetryPolicy
from memmw.testing import fake_vector, require_optional

require_optional("google.genai", "gemini")

Stub = Any


def _provider(server: Stub, retry: RetryPolicy, **kwargs: Any) -> GeminiEmbeddingProvider:
    return GeminiEmbeddingProvider(api_key="g-test", base_url=server.url, retry=retry, **kwargs)


def _close(a: list[float], b: list[float]) -> bool:
    return all(math.isclose(x, y, abs_tol=1e-6) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("models/gemini-embedding-001", "gemini-embedding-001"),
        ("gemini/gemini-embedding-001", "gemini-embedding-001"),
        ("google/text-embedding-004", "text-embedding-004"),
        ("gemini-embedding-001", "gemini-embedding-001"),
        (None, "gemini-embedding-001"),
    ],
)
def test_model_prefixes_are_stripped(raw: str | None, clean: str) -> None:
    assert normalize_gemini_model(raw) == clean


def test_plain_embeddings_task_types(gemini_stub: Stub, fast_retry: RetryPolicy) -> None:
    server, _app = gemini_stub
    p = _provider(server, fast_retry, model="models/gemini-embedding-001", headers={"X-A": "1"})
    assert (p.id, p.model, p.max_input_bytes) == ("gemini", "gemini-embedding-001", 2048)
    assert _close(p.embed_query("what is my cat called"), fake_vector("what is my cat called", 8))
    docs = p.embed_documents(["my cat is Miso", "hello"])
    assert _close(docs[0], fake_vector("my cat is Miso", 8))
    query_req, doc_req = server.requests
    assert query_req.path == "/v1beta/models/gemini-embedding-001:batchEmbedContents"
    assert query_req.headers["x-goog-api-key"] == "g-test"
    assert query_req.headers["x-a"] == "1"
    assert query_req.json()["requests"][0]["taskType"] == "RETRIEVAL_QUERY"
    assert {r["taskType"] for r in doc_req.json()["requests"]} == {"RETRIEVAL_DOCUMENT"}
    assert "outputDimensionality" not in doc_req.json()["requests"][0]


def test_output_dimensionality_and_config(
    gemini_stub: Stub, monkeypatch: pytest.MonkeyPatch
) -> None:
    server, _app = gemini_stub
    monkeypatch.setenv("GEMINI_API_KEY", "from-env")
    config = MemoryConfig(
        provider="gemini",
        model="gemini/gemini-embedding-001",
        remote=RemoteConfig(base_url=server.url, dimensions=24),
    )
    p = create_provider(config).provider
    assert p is not None and p.dims == 24
    assert len(p.embed_query("x")) == 24
    req = server.requests[-1]
    assert req.json()["requests"][0]["outputDimensionality"] == 24
    assert req.headers["x-goog-api-key"] == "from-env"


def test_google_api_key_is_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(MissingApiKeyError, match="GEMINI_API_KEY"):
        GeminiEmbeddingProvider()
    monkeypatch.setenv("GOOGLE_API_KEY", "g")
    assert GeminiEmbeddingProvider().model == "gemini-embedding-001"


def test_retry_on_resource_exhausted(
    gemini_stub: Stub, fast_retry: RetryPolicy, sleeps: list[float]
) -> None:
    server, app = gemini_stub
    app.failures = [
        (
            429,
            {
                "error": {
                    "code": 429,
                    "message": "Resource has been exhausted (e.g. check quota).",
                    "status": "RESOURCE_EXHAUSTED",
                }
            },
        )
    ]
    p = _provider(server, fast_retry)
    assert len(p.embed_query("x")) == 8
    assert len(server.requests) == 2
    assert len(sleeps) == 1


def test_long_inputs_split_at_2048_bytes(gemini_stub: Stub, fast_retry: RetryPolicy) -> None:
    server, _app = gemini_stub
    p = _provider(server, fast_retry)
    (vec,) = p.embed_documents(["记忆" * 1000])  # 6000 bytes
    assert math.isclose(math.hypot(*vec), 1.0, rel_tol=1e-6)
    texts = [
        r["content"]["parts"][0]["text"] for q in server.requests for r in q.json()["requests"]
    ]
    assert len(texts) == 3 and all(len(t.encode()) <= 2048 for t in texts)


def test_batch_api_flow(gemini_stub: Stub, fast_retry: RetryPolicy) -> None:
    server, app = gemini_stub
    batch = BatchConfig(enabled=True, poll_interval_ms=1)
    p = _provider(server, fast_retry, batch=batch, dimensions=16)
    vectors = p.embed_documents(["first", "second"])
    assert _close(vectors[1], fake_vector("second", 16))
    assert server.paths() == [
        "/v1beta/models/gemini-embedding-001:asyncBatchEmbedContent",
        "/v1beta/batches/job1",
        "/v1beta/batches/job1",
    ]
    requests = app.jobs["batches/job1"]["requests"]
    assert [r["request"]["taskType"] for r in requests] == ["RETRIEVAL_DOCUMENT"] * 2
    assert requests[0]["request"]["outputDimensionality"] == 16
    p.embed_query("q")  # queries stay on the plain endpoint
    assert server.paths()[-1].endswith(":batchEmbedContents")


def test_batch_unavailable_falls_back_to_plain(gemini_stub: Stub, fast_retry: RetryPolicy) -> None:
    server, app = gemini_stub
    app.batch_mode = "unavailable"
    p = _provider(server, fast_retry, batch=BatchConfig(enabled=True, poll_interval_ms=1))
    assert len(p.embed_documents(["a", "b"])) == 2
    assert not p.batch_guard.active
    assert server.paths()[-1].endswith(":batchEmbedContents")


def test_batch_failures_disable_after_two(gemini_stub: Stub, fast_retry: RetryPolicy) -> None:
    server, app = gemini_stub
    app.batch_mode = "fail"
    p = _provider(server, fast_retry, batch=BatchConfig(enabled=True, poll_interval_ms=1))
    p.embed_documents(["a"])
    assert p.batch_guard.active
    p.embed_documents(["b"])
    assert not p.batch_guard.active
    assert len(app.jobs) == 2
