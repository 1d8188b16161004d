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
