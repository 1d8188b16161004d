"""OpenAI (and OpenAI-compatible) embeddings, with the optional files+batches API."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlparse

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
from memmw.text.lines import split_lines

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "text-embedding-3-small"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
#: Most requests one OpenAI batch may hold.
BATCH_MAX_REQUESTS = 50_000

_KNOWN_DIMS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
_TERMINAL = {"completed", "failed", "expired", "cancelled", "cancelling"}


def _import_openai() -> Any:
    try:
        import openai
    except ImportError as exc:
        raise ProviderUnavailableError(
            "the openai provider needs the OpenAI SDK: pip install 'memmw[openai]'"
        ) from exc
    return openai


class OpenAIEmbeddingProvider(RemoteSettings):
    """Embeddings from the OpenAI API or any OpenAI-compatible endpoint.

    Inputs over the model's byte limit are split and averaged; plain requests hold at most
    8000 UTF-8 bytes and are retried on rate limits, 5xx and network errors; a request
that timed out is retried only if the endpoint answered another request meanwhile (a
hung endpoint costs one ``timeout_s``, not three plus backoff). With
    ``batch.enabled`` document embeddings go through the files + batches API, falling back
    to plain requests when it fails (disabled for the run after two failures).

    Attributes:
        id: ``openai``.
        model: Model name (default ``text-embedding-3-small``).
        dims: Vector length (known for OpenAI v3 models or when ``dimensions`` is set).
        max_input_bytes: Input limit of the model.
        batch_guard: Batch-mode state (``batch_guard.disabled_reason`` explains a switch-off).
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
            model: Model name; default ``text-embedding-3-small``.
            api_key: Key; default ``OPENAI_API_KEY``. Optional for non-OpenAI base URLs.
            base_url: OpenAI-compatible endpoint (``.../v1``); default the OpenAI API.
            headers: Extra HTTP headers sent with every request.
            dimensions: Requested output dimensionality (passed only when set).
            timeout_s: Timeout of every request, queries and documents alike.
            concurrency: Plain requests in flight at once.
            batch: Batch API settings (off by default).
            retry: Retry policy for every HTTP call (default ``retry.DEFAULT_RETRY``).
            client: A ready ``openai.OpenAI`` client (tests, custom transports).

        Raises:
            ProviderUnavailableError: The SDK is missing.
            MissingApiKeyError: No key for the OpenAI API.
        """
        self._init_remote(
            provider_id="openai",
            model=(model or DEFAULT_MODEL).strip(),
            known_dims=_KNOWN_DIMS,
            dimensions=dimensions,
            base_url=base_url,
            headers=headers,
            concurrency=concurrency,
            batch=batch,
            retry=retry,
        )
        self._timeout_s = timeout_s
        if client is not None:
            self._client = client
            return
        openai = _import_openai()
        key = api_key or env_key("OPENAI_API_KEY")
        if not key:
            if self._base_url is None or _is_openai_host(self._base_url):
                raise MissingApiKeyError(
                    "the openai provider needs an API key: set OPENAI_API_KEY or remote.api_key"
                )
            key = "unused"  # local OpenAI-compatible servers often need none
        self._client = openai.OpenAI(
            api_key=key,
            base_url=self._base_url,
            default_headers=self._headers or None,
            timeout=timeout_s,
            max_retries=0,  # memmw's own retry policy applies
        )

    def close(self) -> None:
        """Close the SDK client's HTTP connections (``Memory.close`` calls this)."""
        close = getattr(self._client, "close", None)
        if callable(close):
            close()

    @classmethod
    def from_config(cls, config: MemoryConfig) -> OpenAIEmbeddingProvider:
        """Build the provider from ``config.model`` and ``config.remote``."""
        return cls(**remote_kwargs(config))

    # plain requests

    def _request(self, texts: list[str], timeout_s: float) -> list[list[float]]:
        kwargs: dict[str, Any] = {"model": self.model, "input": texts, "timeout": timeout_s}
        if self._dimensions is not None:
            kwargs["dimensions"] = self._dimensions
        try:
            response = self._retry.call(
                lambda: self._client.embeddings.create(**kwargs),
                what="openai embeddings",
                liveness=self._liveness,
            )
        except Exception as exc:
            raise provider_error("openai", exc) from exc
        items = sorted(response.data, key=lambda d: d.index)
        vectors = [[float(x) for x in item.embedding] for item in items]
        if len(vectors) != len(texts):
            raise ProviderError(f"openai returned {len(vectors)} vectors for {len(texts)} inputs")
        if vectors and self.dims is None:
            self.dims = len(vectors[0])
        return vectors

    def embed_query(self, text: str) -> list[float]:
        """Embed a search query."""
        return embed_with_limits(
            [text],
            lambda batch: self._request(batch, self._timeout_s),
            max_input_bytes=self.max_input_bytes,
        )[0]

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed document chunks, in order (through the batch API when enabled)."""
        if not texts:
            return []
        if self.batch_guard.active:
            pieces, owner, sizes = split_for_model(texts, self.max_input_bytes)
            vectors = self.batch_guard.run(lambda: self._batch_embed(pieces))
            if vectors is not None:
                return combine_pieces(vectors, owner, sizes, len(texts))
        return embed_with_limits(
            texts,
            lambda batch: self._request(batch, self._timeout_s),
            max_input_bytes=self.max_input_bytes,
            max_request_bytes=DEFAULT_REQUEST_MAX_BYTES,
            concurrency=self._concurrency,
        )

    # batch API

    def _batch_embed(self, pieces: list[str]) -> list[list[float]]:
        jobs = [
            pieces[start : start + BATCH_MAX_REQUESTS]
            for start in range(0, len(pieces), BATCH_MAX_REQUESTS)
        ]
        if len(jobs) == 1 or self._batch.concurrency == 1:
            results = [self._run_batch(job) for job in jobs]
        else:
            with ThreadPoolExecutor(max_workers=min(self._batch.concurrency, len(jobs))) as pool:
                results = list(pool.map(self._run_batch, jobs))
        return [vec for result in results for vec in result]

    def _call(self, fn: Any, what: str) -> Any:
        try:
            return self._retry.call(fn, what=f"openai {what}")
        except Exception as exc:
            raise provider_error("openai", exc, what) from exc

    def _run_batch(self, pieces: list[str]) -> list[list[float]]:
        body_extra: dict[str, Any] = {"encoding_format": "float"}
        if self._dimensions is not None:
            body_extra["dimensions"] = self._dimensions
        lines = [
            json.dumps(
                {
                    "custom_id": str(i),
                    "method": "POST",
                    "url": "/v1/embeddings",
                    "body": {"model": self.model, "input": piece, **body_extra},
                },
                ensure_ascii=False,
            )
            for i, piece in enumerate(pieces)
        ]
        payload = ("\n".join(lines) + "\n").encode("utf-8")
        upload = self._call(
            lambda: self._client.files.create(
                file=("memmw-embeddings.jsonl", payload, "application/jsonl"), purpose="batch"
            ),
            "batch file upload",
        )
        batch = self._call(
            lambda: self._client.batches.create(
                input_file_id=upload.id,
                endpoint="/v1/embeddings",
                completion_window="24h",
                metadata={"source": "memmw"},
            ),
            "batch create",
        )
        logger.info("openai batch %s submitted (%d inputs)", batch.id, len(pieces))
        try:
            final = poll_until_done(
                lambda: self._call(lambda: self._client.batches.retrieve(batch.id), "batch poll"),
                lambda b: b.status in _TERMINAL,
                interval_s=self._batch.poll_interval_ms / 1000.0,
                timeout_s=self._batch.timeout_minutes * 60.0,
                sleep=self._retry.sleep,
            )
        except BatchUnavailableError:
            try:
                self._client.batches.cancel(batch.id)
            except Exception as exc:  # best effort: the batch expires on its own anyway
                logger.debug("openai batch cancel failed: %s", exc)
            raise
        if final.status != "completed" or not final.output_file_id:
            raise BatchUnavailableError(
                f"openai batch {batch.id} ended with status {final.status}: {_batch_errors(final)}"
            )
        content = self._call(
            lambda: self._client.files.content(final.output_file_id), "batch download"
        )
        return _parse_batch_output(content.text, len(pieces))

    def cache_key_data(self) -> dict[str, object]:
        """Endpoint identity for the cache key: base URL, model, dimensions, hashed headers."""
        return {
            "provider": self.id,
            "base_url": self._base_url or DEFAULT_BASE_URL,
            "model": self.model,
            "dimensions": self._dimensions,
            "headers": fingerprint(self._headers),
        }


def _is_openai_host(base_url: str) -> bool:
    host = (urlparse(base_url).hostname or "").lower()
    return host == "openai.com" or host.endswith(".openai.com")


def _batch_errors(batch: Any) -> str:
    errors = getattr(batch, "errors", None)
    data = getattr(errors, "data", None) or []
    messages = [str(getattr(e, "message", e)) for e in data]
    return "; ".join(messages) or "no detail"


def _parse_batch_output(text: str, count: int) -> list[list[float]]:
    """Map the output JSONL back to input order by ``custom_id``."""
    found: dict[int, list[float]] = {}
    failures: list[str] = []
    for line in split_lines(text):  # JSONL: a raw U+2028 inside a record is not a break
        if not line.strip():
            continue
        record = json.loads(line)
        idx = int(record.get("custom_id", -1))
        response = record.get("response") or {}
        status = response.get("status_code")
        body = response.get("body") or {}
        if record.get("error") or (status is not None and status != 200):
            failures.append(str(record.get("error") or body.get("error") or status))
            continue
        data = body.get("data") or []
        if not data:
            failures.append(f"no embedding for input {idx}")
            continue
        found[idx] = [float(x) for x in data[0]["embedding"]]
    missing = [i for i in range(count) if i not in found]
    if missing:
        detail = failures[0] if failures else "no output line"
        raise BatchUnavailableError(
            f"openai batch output lacks {len(missing)} of {count} embeddings ({detail})"
        )
    return [found[i] for i in range(count)]
