"""Google Gemini embeddings through the google-genai SDK, with its optional batch API."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from memmw.config import BatchConfig, MemoryConfig
from memmw.embeddings.batchapi import poll_until_done
from memmw.embeddings.batching import (
    DEFAULT_REQUEST_MAX_BYTES,
    combine_pieces,
    embed_with_limits,
    split_for_model,
)
from memmw.embeddings.exceptions import BatchUnavailableError, MissingApiKeyError
from memmw.embeddings.remote import (
    RemoteSettings,
    env_key,
    fingerprint,
    provider_error,
    remote_kwargs,
)
from memmw.embeddings.retry import RetryPolicy
from memmw.errors import ProviderError, ProviderUnavailableError

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "gemini-embedding-001"
QUERY_TASK = "RETRIEVAL_QUERY"
DOCUMENT_TASK = "RETRIEVAL_DOCUMENT"
#: Inline requests per Gemini batch job (keeps each job well under the request size cap).
BATCH_MAX_REQUESTS = 1000
#: The Gemini API takes at most 100 inputs per batchEmbedContents call.
REQUEST_MAX_INPUTS = 100

_PREFIXES = ("models/", "gemini/", "google/")
_KNOWN_DIMS = {"gemini-embedding-001": 3072, "text-embedding-004": 768}
_DONE = {"JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED"}


def normalize_gemini_model(model: str | None) -> str:
    """Strip ``models/``, ``gemini/`` and ``google/`` prefixes; default ``gemini-embedding-001``."""
    name = (model or "").strip()
    changed = True
    while changed:
        changed = False
        for prefix in _PREFIXES:
            if name.lower().startswith(prefix):
                name = name[len(prefix) :]
                changed = True
    return name or DEFAULT_MODEL


def _import_genai() -> tuple[Any, Any]:
    try:
        from google import genai
        from google.genai import types
    except ImportError as exc:
        raise ProviderUnavailableError(
            "the gemini provider needs the google-genai SDK: pip install 'memmw[gemini]'"
        ) from exc
    return genai, types


class GeminiEmbeddingProvider(RemoteSettings):
    """Embeddings from the Gemini API (task types RETRIEVAL_QUERY / RETRIEVAL_DOCUMENT).

    Attributes:
        id: ``gemini``.
        model: Model name without prefixes (default ``gemini-embedding-001``).
        dims: Output dimensionality when known.
        max_input_bytes: Input limit (2048 bytes for gemini-embedding-001).
        batch_guard: Batch-mode state.
    """

    def __init__(
        self,
        *,
        model: str | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        headers: Mapping[str, str] | None = None,
        dimensions: int | None = None,
        timeout_s: float = 60.0,
        concurrency: int = 4,
        batch: BatchConfig | None = None,
        retry: RetryPolicy | None = None,
        client: Any = None,
    ) -> None:
        """Create the provider.

        Args:
            model: Model name; prefixes ``models/``, ``gemini/``, ``google/`` are stripped.
            api_key: Key; default ``GEMINI_API_KEY``, then ``GOOGLE_API_KEY``.
            base_url: Endpoint override (the SDK adds ``/v1beta/...``).
            headers: Extra HTTP headers.
            dimensions: ``output_dimensionality`` (passed only when set).
            timeout_s: Request timeout.
            concurrency: Plain requests in flight at once.
            batch: Batch API settings (off by default).
            retry: Retry policy for every HTTP call (default ``retry.DEFAULT_RETRY``).
            client: A ready ``google.genai.Client`` (tests, custom transports).

        Raises:
            ProviderUnavailableError: The SDK is missing.
            MissingApiKeyError: No key.
        """
        self._init_remote(
            provider_id="gemini",
            model=normalize_gemini_model(model),
            known_dims=_KNOWN_DIMS,
            dimensions=dimensions,
            base_url=base_url,
            headers=headers,
            concurrency=concurrency,
            batch=batch,
            retry=retry,
        )
        _genai, self._types = _import_genai()
        if client is not None:
            self._client = client
            return
        key = api_key or env_key("GEMINI_API_KEY", "GOOGLE_API_KEY")
        if not key:
            raise MissingApiKeyError(
                "the gemini provider needs an API key: set GEMINI_API_KEY (or GOOGLE_API_KEY) "
                "or remote.api_key"
            )
        options = self._types.HttpOptions(
            base_url=self._base_url,
            api_version="v1beta",
            headers=self._headers or None,
            timeout=int(timeout_s * 1000),
        )
        self._client = _genai.Client(api_key=key, http_options=options)

    def close(self) -> None:
        """Close the SDK client's HTTP connections (``Memory.close`` calls this)."""
        close = getattr(self._client, "close", None)
        if callable(close):
            close()

    @classmethod
    def from_config(cls, config: MemoryConfig) -> GeminiEmbeddingProvider:
        """Build the provider from ``config.model`` and ``config.remote``."""
        return cls(**remote_kwargs(config))

    def _config(self, task: str) -> Any:
        return self._types.EmbedContentConfig(
            task_type=task, output_dimensionality=self._dimensions
        )

    def _request(self, texts: list[str], task: str) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), REQUEST_MAX_INPUTS):
            part = texts[start : start + REQUEST_MAX_INPUTS]
            try:
                response = self._retry.call(
                    lambda part=part: self._client.models.embed_content(  # type: ignore[misc]
                        model=self.model, contents=part, config=self._config(task)
                    ),
                    what="gemini embed_content",
                    liveness=self._liveness,
                )
            except Exception as exc:
                raise provider_error("gemini", exc) from exc
            embeddings = response.embeddings or []
            vectors.extend([float(x) for x in (e.values or [])] for e in embeddings)
        if len(vectors) != len(texts):
            raise ProviderError(f"gemini returned {len(vectors)} vectors for {len(texts)} inputs")
        if vectors and self.dims is None:
            self.dims = len(vectors[0])
        return vectors

    def embed_query(self, text: str) -> list[float]:
        """Embed a search query (task type RETRIEVAL_QUERY)."""
        return embed_with_limits(
            [text],
            lambda batch: self._request(batch, QUERY_TASK),
            max_input_bytes=self.max_input_bytes,
        )[0]

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed document chunks (RETRIEVAL_DOCUMENT), through the batch API when enabled."""
        if not texts:
            return []
        if self.batch_guard.active:
            pieces, owner, sizes = split_for_model(texts, self.max_input_bytes)
            vectors = self.batch_guard.run(lambda: self._batch_embed(pieces))
            if vectors is not None:
                return combine_pieces(vectors, owner, sizes, len(texts))
        return embed_with_limits(
            texts,
            lambda batch: self._request(batch, DOCUMENT_TASK),
            max_input_bytes=self.max_input_bytes,
            max_request_bytes=DEFAULT_REQUEST_MAX_BYTES,
            concurrency=self._concurrency,
        )

    def _call(self, fn: Any, what: str) -> Any:
        try:
            return self._retry.call(fn, what=f"gemini {what}")
        except Exception as exc:
            raise provider_error("gemini", exc, what) from exc

    def _batch_embed(self, pieces: list[str]) -> list[list[float]]:
        out: list[list[float]] = []
        for start in range(0, len(pieces), BATCH_MAX_REQUESTS):
            out.extend(self._run_batch(pieces[start : start + BATCH_MAX_REQUESTS]))
        return out

    def _create_job(self, pieces: list[str]) -> Any:
        types = self._types
        src = types.EmbeddingsBatchJobSource(
            inlined_requests=types.EmbedContentBatch(
                contents=pieces, config=self._config(DOCUMENT_TASK)
            )
        )
        with warnings.catch_warnings():
            # The SDK marks create_embeddings as experimental with a warning on every call.
            warnings.filterwarnings("ignore", message=r".*experimental.*")
            return self._client.batches.create_embeddings(model=self.model, src=src)

    def _run_batch(self, pieces: list[str]) -> list[list[float]]:
        job = self._call(lambda: self._create_job(pieces), "batch create")
        logger.info("gemini batch %s submitted (%d inputs)", job.name, len(pieces))
        try:
            final = poll_until_done(
                lambda: self._call(lambda: self._client.batches.get(name=job.name), "batch poll"),
                lambda j: _state(j) in _DONE,
                interval_s=self._batch.poll_interval_ms / 1000.0,
                timeout_s=self._batch.timeout_minutes * 60.0,
                sleep=self._retry.sleep,
            )
        except BatchUnavailableError:
            try:
                self._client.batches.cancel(name=job.name)
            except Exception as exc:  # best effort
                logger.debug("gemini batch cancel failed: %s", exc)
            raise
        state = _state(final)
        if state != "JOB_STATE_SUCCEEDED":
            raise BatchUnavailableError(f"gemini batch {job.name} ended with state {state}")
        responses = getattr(getattr(final, "dest", None), "inlined_embed_content_responses", None)
        responses = responses or []
        if len(responses) != len(pieces):
            raise BatchUnavailableError(
                f"gemini batch returned {len(responses)} responses for {len(pieces)} inputs"
            )
        vectors: list[list[float]] = []
        for item in responses:
            error = getattr(item, "error", None)
            embedding = getattr(getattr(item, "response", None), "embedding", None)
            values = getattr(embedding, "values", None)
            if error is not None or not values:
                raise BatchUnavailableError(f"gemini batch item failed: {error or 'no embedding'}")
            vectors.append([float(x) for x in values])
        if vectors and self.dims is None:
            self.dims = len(vectors[0])
        return vectors

    def cache_key_data(self) -> dict[str, object]:
        """Endpoint identity for the cache key: base URL, model, dimensions, hashed headers."""
        return {
            "provider": self.id,
            "base_url": self._base_url or "https://generativelanguage.googleapis.com",
            "model": self.model,
            "dimensions": self._dimensions,
            "headers": fingerprint(self._headers),
        }


def _state(job: Any) -> str:
    state = getattr(job, "state", None)
    return str(getattr(state, "value", state) or "")
