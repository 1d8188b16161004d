"""Embedding providers: protocol, registry, cache and the bundled backends."""

from memmw.embeddings.base import EmbeddingProvider

__all__ = ["EmbeddingProvider"]
