"""Embedding providers: protocol, registry, cache and the bundled backends."""

from memmw.embeddings.base import EmbeddingProvider
from memmw.embeddings.exceptions import BatchUnavailableError, MissingApiKeyError
from memmw.embeddings.fallback import FallbackProvider
from memmw.embeddings.registry import (
    ProviderFactory,
    ProviderSelection,
    available_providers,
    create_provider,
    get_provider_factory,
    register_provider,
    unregister_provider,
)
from memmw.embeddings.retry import RetryPolicy, is_retryable

__all__ = [
    "BatchUnavailableError",
    "EmbeddingProvider",
    "FallbackProvider",
    "MissingApiKeyError",
    "ProviderFactory",
    "ProviderSelection",
    "RetryPolicy",
    "available_providers",
    "create_provider",
    "get_provider_factory",
    "is_retryable",
    "register_provider",
    "unregister_provider",
]
