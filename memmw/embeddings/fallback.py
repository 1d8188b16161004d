"""A provider wrapper that switches to a fallback provider when the primary fails at run time."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import NoReturn, TypeVar

from memmw.embeddings.base import EmbeddingProvider
from memmw.errors import ProviderError
from memmw.redaction import redact_secrets

logger = logging.getLogger(__name__)

T = TypeVar("T")

FallbackSource = EmbeddingProvider | Callable[[], EmbeddingProvider | None] | None


class FallbackProvider:
    """Wrap a primary provider; on a run-time failure (after its retries) use the fallback.

    The switch is sticky for the life of the object: vectors from two providers live in
    different spaces, so the index must re-embed with the fallback. ``id``, ``model``,
    ``dims`` and ``max_input_bytes`` always describe the provider currently in use, and
    ``generation`` grows by one at each switch so callers can notice the identity change
    (``on_switch`` is also called).

    With no fallback (``fallback=None``), a failure is reported as keyword-only: the call
    raises :class:`ProviderError`, ``keyword_only`` becomes True and ``fallback_reason``
    says why; the next call tries the primary again and clears the flag on success.

    Attributes:
        primary: The configured provider.
        active: The provider in use (the primary until a switch).
        fallback_from: Registry name of the provider that failed, or None.
        fallback_reason: Short reason of the switch (error type and message), or None.
        keyword_only: True when the last call failed with no fallback to switch to.
        generation: Number of switches so far.
    """

    def __init__(
        self,
        primary: EmbeddingProvider,
        fallback: FallbackSource,
        *,
        fallback_name: str | None = None,
        on_switch: Callable[[FallbackProvider], None] | None = None,
    ) -> None:
        """Create the wrapper.

        Args:
            primary: Provider to use first.
            fallback: A provider, a zero-argument factory (called once, at the first
                failure; it may return None for keyword-only), or None.
            fallback_name: Name of the fallback for messages before it is built.
            on_switch: Called after the switch to the fallback.
        """
        self.primary = primary
        self.active: EmbeddingProvider = primary
        self._fallback = fallback
        self._fallback_name = fallback_name or getattr(fallback, "id", None)
        self._on_switch = on_switch
        self._lock = threading.Lock()
        self.fallback_from: str | None = None
        self.fallback_reason: str | None = None
        self.keyword_only = False
        self.generation = 0
        self.id: str = primary.id
        self.model: str = primary.model
        self.dims: int | None = primary.dims
        self.max_input_bytes: int = primary.max_input_bytes

    def close(self) -> None:
        """Close the primary's and the fallback's clients (those that have ``close``)."""
        for provider in dict.fromkeys((self.primary, self.active)):
            close = getattr(provider, "close", None)
            if callable(close):
                close()

    def _sync(self) -> None:
        self.id = self.active.id
        self.model = self.active.model
        self.dims = self.active.dims
        self.max_input_bytes = self.active.max_input_bytes

    def _call(self, op: Callable[[EmbeddingProvider], T]) -> T:
        provider = self.active
        try:
            result = op(provider)
        except Exception as exc:
            if provider is not self.primary or not self._switch(provider, exc):
                _reraise(exc)
            try:
                result = op(self.active)
            except Exception as exc2:
                _reraise(exc2)
        else:
            if provider is self.primary and self.keyword_only:
                self.keyword_only = False
        self._sync()
        return result

    def _switch(self, failed: EmbeddingProvider, exc: BaseException) -> bool:
        """Switch to the fallback; False when there is none (keyword-only)."""
        reason = f"{type(exc).__name__}: {exc}"
        with self._lock:
            if self.active is not failed:
                return True  # another thread switched already
            self.fallback_from = failed.id
            self.fallback_reason = reason
            replacement: EmbeddingProvider | None
            if self._fallback is None or isinstance(self._fallback, EmbeddingProvider):
                replacement = self._fallback
            else:
                try:
                    replacement = self._fallback()
                except Exception as build_exc:
                    logger.warning(
                        "fallback provider %s could not start: %s",
                        self._fallback_name,
                        build_exc,
                    )
                    replacement = None
            if replacement is None:
                self.keyword_only = True
                logger.warning(
                    "embedding provider %s failed (%s); no fallback, keyword-only",
                    failed.id,
                    type(exc).__name__,
                )
                return False
            self.active = replacement
            self.keyword_only = False
            self.generation += 1
            self._sync()
        logger.warning(
            "embedding provider %s failed (%s); switched to fallback %s",
            failed.id,
            type(exc).__name__,
            replacement.id,
        )
        if self._on_switch is not None:
            self._on_switch(self)
        return True

    def embed_query(self, text: str) -> list[float]:
        """Embed a search query with the active provider (switching on failure)."""
        return self._call(lambda p: p.embed_query(text))

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed document chunks with the active provider (switching on failure)."""
        return self._call(lambda p: p.embed_documents(texts))

    def cache_key_data(self) -> dict[str, object]:
        """Cache identity of the active provider."""
        return self.active.cache_key_data()

    def status(self) -> dict[str, object]:
        """Plain data for ``status()``: active provider and any fallback that happened."""
        return {
            "provider": self.active.id,
            "model": self.active.model,
            "primary": self.primary.id,
            "fallback_from": self.fallback_from,
            "fallback_reason": self.fallback_reason,
            "keyword_only": self.keyword_only,
        }


def _reraise(exc: Exception) -> NoReturn:
    if isinstance(exc, ProviderError):
        raise exc
    raise ProviderError(redact_secrets(f"{type(exc).__name__}: {exc}")) from exc
