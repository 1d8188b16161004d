"""The ``fake`` provider: deterministic, network-free hashed embeddings (tests and demos)."""

from __future__ import annotations

import hashlib
import math
import re
import threading
from collections.abc import Sequence

from memmw.errors import ConfigError, ProviderError

_WORD = re.compile(r"\w+", re.UNICODE)


def _bucket(feature: str, dims: int) -> tuple[int, float]:
    digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
    value = int.from_bytes(digest, "little")
    return value % dims, (1.0 if (value >> 63) & 1 else -1.0)


def fake_vector(text: str, dims: int) -> list[float]:
    """Hash words and character trigrams of ``text`` into ``dims`` signed buckets.

    Texts sharing words or word fragments get similar vectors; the result is
    L2-normalised (all zeros for text without word characters).

    Args:
        text: Input text.
        dims: Vector length.
    """
    vec = [0.0] * dims
    for word in _WORD.findall(text.lower()):
        idx, sign = _bucket("w:" + word, dims)
        vec[idx] += sign
        padded = f"<{word}>"
        for k in range(len(padded) - 2):
            idx, sign = _bucket("g:" + padded[k : k + 3], dims)
            vec[idx] += 0.5 * sign
    norm = math.sqrt(sum(x * x for x in vec))
    return [x / norm for x in vec] if norm else vec


class FakeEmbeddingProvider:
    """A deterministic embedding provider for tests (registered as ``fake``).

    Similar texts get similar vectors (hashed words and character trigrams). It can be
    told to fail, to exercise retries and fallbacks, and it counts its calls.

    Example:
        >>> p = FakeEmbeddingProvider(dims=32)
        >>> len(p.embed_query("hello"))
        32

    Attributes:
        id: Registry name (``fake`` unless given).
        model: Model name reported for the index identity.
        dims: Vector length.
        max_input_bytes: Input limit reported to callers.
        calls: Number of embed calls (queries and document batches), failed ones included.
        query_calls: Number of ``embed_query`` calls.
        document_calls: Number of ``embed_documents`` calls.
        texts_embedded: Number of texts embedded successfully.
    """

    def __init__(
        self,
        *,
        dims: int = 64,
        model: str = "fake-hash-v1",
        provider_id: str = "fake",
        max_input_bytes: int = 8192,
        fail_times: int = 0,
        fail_forever: bool = False,
        error: Exception | None = None,
    ) -> None:
        """Create a fake provider.

        Args:
            dims: Vector length.
            model: Model name.
            provider_id: Registry name to report (``fake`` by default).
            max_input_bytes: Input limit to report.
            fail_times: Fail this many calls before succeeding.
            fail_forever: Fail every call.
            error: Exception to raise when failing (default: a ProviderError mentioning 500).
        """
        if dims < 1:
            raise ConfigError("dims must be positive")
        self.id = provider_id
        self.model = model
        self.dims: int | None = dims
        self._dims = dims
        self.max_input_bytes = max_input_bytes
        self.calls = 0
        self.query_calls = 0
        self.document_calls = 0
        self.texts_embedded = 0
        self._fail_left = fail_times
        self._fail_forever = fail_forever
        self._error = error
        self._lock = threading.Lock()

    def fail(self, times: int | None = None, error: Exception | None = None) -> None:
        """Make the next ``times`` calls fail (every call when ``times`` is None).

        Args:
            times: Number of failing calls, or None for all of them.
            error: Exception to raise (default: a ProviderError mentioning status 500).
        """
        with self._lock:
            self._fail_forever = times is None
            self._fail_left = times or 0
            if error is not None:
                self._error = error

    def recover(self) -> None:
        """Stop failing."""
        with self._lock:
            self._fail_forever = False
            self._fail_left = 0

    def _enter(self) -> None:
        with self._lock:
            self.calls += 1
            failing = self._fail_forever or self._fail_left > 0
            if self._fail_left > 0:
                self._fail_left -= 1
        if failing:
            raise self._error or ProviderError("fake provider failure (status 500)")

    def embed_query(self, text: str) -> list[float]:
        """Embed a search query."""
        self.query_calls += 1
        self._enter()
        self.texts_embedded += 1
        return fake_vector(text, self._dims)

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed document chunks, in order."""
        self.document_calls += 1
        self._enter()
        self.texts_embedded += len(texts)
        return [fake_vector(t, self._dims) for t in texts]

    def cache_key_data(self) -> dict[str, object]:
        """Identity for the embedding cache."""
        return {"provider": self.id, "model": self.model, "dims": self._dims}
