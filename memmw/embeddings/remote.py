"""Helpers shared by the remote (HTTP API) providers: keys, endpoint identity, error text."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from typing import Any

from memmw.config import BatchConfig, MemoryConfig
from memmw.embeddings import retry as retry_mod
from memmw.embeddings.batchapi import BatchGuard
from memmw.embeddings.batching import max_input_bytes_for
from memmw.embeddings.retry import Liveness, RetryPolicy
from memmw.errors import ProviderError
from memmw.redaction import redact_secrets


def env_key(*names: str) -> str | None:
    """The first non-empty environment variable among ``names``, or None."""
    for name in names:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    return None


def fingerprint(data: Mapping[str, str] | str | None) -> str | None:
    """A short SHA-256 fingerprint (headers or keys go into cache keys only this way)."""
    if not data:
        return None
    text = data if isinstance(data, str) else json.dumps(dict(sorted(data.items())))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def provider_error(
    provider: str, exc: BaseException, what: str = "embedding request"
) -> ProviderError:
    """Wrap an SDK error in a :class:`ProviderError` that says what failed.

    Args:
        provider: Registry name for the message.
        exc: The underlying error (secrets in its text are redacted).
        what: What was being done.
    """
    status = getattr(exc, "status_code", None) or getattr(exc, "code", None)
    status_text = f" (status {status})" if isinstance(status, int) else ""
    # Some servers echo the request (and its key) in their error body: redact it here,
    # before the text reaches logs, stored errors or the agent.
    detail = redact_secrets(f"{type(exc).__name__}: {exc}")
    return ProviderError(f"{provider} {what} failed{status_text}: {detail}")


def remote_kwargs(config: MemoryConfig) -> dict[str, Any]:
    """Constructor arguments of a remote provider from ``config.model`` and ``config.remote``."""
    remote = config.remote
    return {
        "model": config.model,
        "api_key": remote.api_key,
        "base_url": remote.base_url,
        "headers": remote.headers,
        "dimensions": remote.dimensions,
        "timeout_s": remote.timeout_s,
        "concurrency": remote.non_batch_concurrency,
        "batch": remote.batch,
    }


class RemoteSettings:
    """The settings every remote (HTTP API) provider keeps: identity, limits, batching."""

    id: str
    model: str
    dims: int | None
    max_input_bytes: int

    def _init_remote(
        self,
        *,
        provider_id: str,
        model: str,
        known_dims: Mapping[str, int],
        dimensions: int | None,
        base_url: str | None,
        headers: Mapping[str, str] | None,
        concurrency: int,
        batch: BatchConfig | None,
        retry: RetryPolicy | None,
    ) -> None:
        self.id = provider_id
        self.model = model
        self.dims = dimensions or known_dims.get(model)
        self.max_input_bytes = max_input_bytes_for(provider_id, model)
        self._dimensions = dimensions
        self._base_url = (base_url or "").rstrip("/") or None
        self._headers = dict(headers or {})
        self._concurrency = max(1, concurrency)
        self._batch = batch or BatchConfig()
        self._retry = retry if retry is not None else retry_mod.DEFAULT_RETRY
        # Answers of this provider: a request that timed out is retried only if the
        # provider answered another one meanwhile (a hung provider costs one timeout_s).
        self._liveness = Liveness()
        self.batch_guard = BatchGuard(self._batch.enabled, provider=provider_id)
