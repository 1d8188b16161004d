"""The embedding provider protocol every backend implements."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable


@runtime_checkable
class EmbeddingProvider(Protocol):
    """A source of text embeddings.

    Implementations return one vector per input text, each a list of ``dims`` floats.
    Vectors need not be normalised (memmw normalises before storing).

    Attributes:
        id: Registry name (``openai``, ``gemini``, ``local``, ``offline``, ...).
        model: Model name; part of the index identity.
        dims: Vector dimensionality, or None until the first call reveals it.
        max_input_bytes: Largest UTF-8 input the model accepts; longer texts are split.
    """

    id: str
    model: str
    dims: int | None
    max_input_bytes: int

    def embed_query(self, text: str) -> list[float]:
        """Embed a search query."""
        ...

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed document chunks, in order."""
        ...

    def cache_key_data(self) -> dict[str, object]:
        """Identity of the endpoint for the cache key (base URL, model, hashed headers).

        Never include an API key in clear.
        """
        ...


@runtime_checkable
class SwitchingProvider(Protocol):
    """A provider that can switch to a fallback at run time (:class:`FallbackProvider`).

    Attributes:
        generation: Switches so far (0: still the primary).
        fallback_from: Registry name of the provider that failed, or None.
        fallback_reason: Short reason of the switch, or None.
    """

    generation: int
    fallback_from: str | None
    fallback_reason: str | None


@runtime_checkable
class ClosingProvider(Protocol):
    """A provider holding a client to close (an HTTP connection pool, a model)."""

    def close(self) -> None:
        """Release the provider's client."""
        ...
