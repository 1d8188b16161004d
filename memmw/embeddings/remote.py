"""Helpers shared by the remote (HTTP API) providers: keys, endpoint identity, error text."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping

from memmw.errors import ProviderError


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
        exc: The underlying error (its text never contains the key).
        what: What was being done.
    """
    status = getattr(exc, "status_code", None) or getattr(exc, "code", None)
    status_text = f" (status {status})" if isinstance(status, int) else ""
    return ProviderError(f"{provider} {what} failed{status_text}: {type(exc).__name__}: {exc}")


__all__ = ["env_key", "fingerprint", "provider_error"]
