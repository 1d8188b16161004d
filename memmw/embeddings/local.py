"""Local GGUF embedding models run by llama.cpp (``llama-cpp-python``, the ``local`` extra)."""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memmw.config import MemoryConfig
from memmw.embeddings.batching import (
    LOCAL_INPUT_MAX_BYTES,
    combine_pieces,
    normalize,
    split_for_model,
)
from memmw.errors import ConfigError, ProviderError, ProviderUnavailableError

logger = logging.getLogger(__name__)

#: The reference default: EmbeddingGemma-300M, QAT Q8_0, fetched through the HF cache.
DEFAULT_MODEL_REF = (
    "hf:ggml-org/embeddinggemma-300m-qat-q8_0-GGUF/embeddinggemma-300m-qat-Q8_0.gguf"
)
#: Texts per llama.cpp call.
BATCH_SIZE = 16


def parse_hf_ref(ref: str) -> tuple[str, str]:
    """Split ``hf:owner/repo/path/to/file.gguf`` into ``("owner/repo", "path/to/file.gguf")``.

    Raises:
        ConfigError: The reference is not of that form.
    """
    body = ref.strip()[3:].strip("/")
    parts = body.split("/")
    if len(parts) < 3 or not all(parts):
        raise ConfigError(f"local.model_path {ref!r} must look like hf:owner/repo/file.gguf")
    return "/".join(parts[:2]), "/".join(parts[2:])


def resolve_model_path(ref: str, cache_dir: str | None = None) -> Path:
    """Turn ``local.model_path`` into an existing file path.

    Plain paths must exist. ``hf:owner/repo/file.gguf`` is looked up in the Hugging Face
    cache first and downloaded when ``huggingface_hub`` is installed and the hub reachable.

    Args:
        ref: A file path or ``hf:`` reference.
        cache_dir: Hugging Face cache directory override (``local.model_cache_dir``).

    Raises:
        ProviderUnavailableError: The file is missing and cannot be fetched.
    """
    text = ref.strip()
    lowered = text.lower()
    if lowered.startswith(("http://", "https://")):
        raise ProviderUnavailableError(
            f"local.model_path {text!r} is a URL: download the GGUF file and set "
            "local.model_path to its path (or use hf:owner/repo/file.gguf)"
        )
    if not lowered.startswith("hf:"):
        path = Path(text).expanduser()
        if not path.is_file():
            raise ProviderUnavailableError(
                f"local embedding model not found: {path} (set local.model_path to a GGUF file)"
            )
        return path
    repo_id, filename = parse_hf_ref(text)
    try:
        hf_hub_download = importlib.import_module("huggingface_hub").hf_hub_download
    except ImportError as exc:
        raise ProviderUnavailableError(
            f"{text} needs huggingface_hub to download (pip install huggingface_hub), "
            "or download the file yourself and set local.model_path to it"
        ) from exc
    try:
        return Path(hf_hub_download(repo_id, filename, cache_dir=cache_dir, local_files_only=True))
    except Exception:
        logger.info("local model %s/%s not cached; downloading", repo_id, filename)
    try:
        return Path(hf_hub_download(repo_id, filename, cache_dir=cache_dir))
    except Exception as exc:
        raise ProviderUnavailableError(
            f"cannot fetch {text} from Hugging Face ({type(exc).__name__}); offline? Download "
            "the GGUF file elsewhere and set local.model_path to its path"
        ) from exc


#: Instruction prefixes (query, document) that known embedding model families expect.
_PROMPTS: tuple[tuple[str, tuple[str, str]], ...] = (
    ("embeddinggemma", ("task: search result | query: ", "title: none | text: ")),
    ("nomic-embed", ("search_query: ", "search_document: ")),
    ("e5", ("query: ", "passage: ")),
)


def prompt_prefixes(model: str) -> tuple[str, str]:
    """The (query, document) prefixes a model family expects; empty strings when unknown.

    Args:
        model: Model file name or ``hf:`` reference.
    """
    name = model.rsplit("/", 1)[-1].lower()
    for marker, prefixes in _PROMPTS:
        if marker in name:
            return prefixes
    return "", ""


def _import_llama() -> Any:
    try:
        import llama_cpp
    except ImportError as exc:
        raise ProviderUnavailableError(
            "the local provider needs llama.cpp bindings: pip install 'memmw[local]' "
            "(llama-cpp-python compiles from source; it needs a C++ compiler and CMake)"
        ) from exc
    return llama_cpp


class LocalEmbeddingProvider:
    """A GGUF embedding model run in process by llama.cpp (registry name ``local``).

    Vectors are sanitised (non-finite -> 0) and L2-normalised. Inputs over 2048 UTF-8
    bytes are split and the piece vectors averaged.

    Attributes:
        id: ``local``.
        model: File name of the GGUF model (or its ``hf:`` reference).
        dims: Embedding size read from the model.
        max_input_bytes: 2048.
        path: Resolved model file.
    """

    def __init__(
        self,
        model_path: str | None = None,
        *,
        model_cache_dir: str | None = None,
        n_ctx: int = 2048,
        n_threads: int | None = None,
        prefixes: tuple[str, str] | None = None,
        llama: Any = None,
    ) -> None:
        """Load the model.

        Args:
            model_path: GGUF file or ``hf:owner/repo/file.gguf`` (default EmbeddingGemma-300M).
            model_cache_dir: Hugging Face cache directory for ``hf:`` references.
            n_ctx: Context size in tokens.
            n_threads: CPU threads (None: llama.cpp's default).
            prefixes: (query, document) prefixes; default from the model name (E5,
                EmbeddingGemma and nomic-embed families get their documented prompts).
            llama: A ready ``llama_cpp.Llama`` created with ``embedding=True`` (tests).

        Raises:
            ProviderUnavailableError: llama-cpp-python is missing or the model cannot load.
        """
        ref = model_path or DEFAULT_MODEL_REF
        self.id = "local"
        self.model = ref if ref.lower().startswith("hf:") else Path(ref).name
        self.max_input_bytes = LOCAL_INPUT_MAX_BYTES
        self._lock = threading.Lock()
        self._query_prefix, self._doc_prefix = (
            prefixes if prefixes is not None else prompt_prefixes(ref)
        )
        if llama is not None:
            self.path = Path(getattr(llama, "model_path", ref))
            self._llama = llama
        else:
            llama_cpp = _import_llama()
            self.path = resolve_model_path(ref, model_cache_dir)
            try:
                self._llama = llama_cpp.Llama(
                    model_path=str(self.path),
                    embedding=True,
                    n_ctx=n_ctx,
                    n_threads=n_threads,
                    verbose=False,
                )
            except Exception as exc:
                raise ProviderUnavailableError(
                    f"llama.cpp could not load {self.path}: {exc}"
                ) from exc
        n_embd = getattr(self._llama, "n_embd", None)
        self.dims: int | None = int(n_embd()) if callable(n_embd) else None

    @classmethod
    def from_config(cls, config: MemoryConfig) -> LocalEmbeddingProvider:
        """Build from ``config.local`` (``config.model`` is used when no path is set)."""
        local = config.local
        return cls(
            local.model_path or config.model,
            model_cache_dir=local.model_cache_dir,
            n_ctx=local.n_ctx,
            n_threads=local.n_threads,
        )

    def _embed(self, texts: list[str]) -> list[list[float]]:
        try:
            with self._lock:  # a Llama context must not be used from two threads at once
                raw = self._llama.embed(texts, truncate=True)
        except Exception as exc:
            raise ProviderError(f"local embedding failed: {type(exc).__name__}: {exc}") from exc
        vectors = [normalize(_pool(item)) for item in raw]
        if vectors and self.dims is None:
            self.dims = len(vectors[0])
        return vectors

    def _embed_all(self, texts: Sequence[str], prefix: str) -> list[list[float]]:
        pieces, owner, sizes = split_for_model(texts, self.max_input_bytes)
        vectors: list[list[float]] = []
        for start in range(0, len(pieces), BATCH_SIZE):
            vectors.extend(self._embed([prefix + p for p in pieces[start : start + BATCH_SIZE]]))
        return combine_pieces(vectors, owner, sizes, len(texts))

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed document chunks, in order (with the model's document prefix, if any)."""
        if not texts:
            return []
        return self._embed_all(texts, self._doc_prefix)

    def embed_query(self, text: str) -> list[float]:
        """Embed a search query (with the model's query prefix, if any)."""
        return self._embed_all([text], self._query_prefix)[0]

    def cache_key_data(self) -> dict[str, object]:
        """Identity for the cache: model reference, file size and modification time."""
        try:
            stat = self.path.stat()
            file_id: object = [stat.st_size, int(stat.st_mtime)]
        except OSError:
            file_id = None
        return {
            "provider": self.id,
            "model": self.model,
            "file": file_id,
            "prefixes": [self._query_prefix, self._doc_prefix],
        }


def _pool(item: Any) -> list[float]:
    """One vector per input: mean-pool when the model returned per-token vectors."""
    if item and isinstance(item[0], (list, tuple)):
        count = len(item)
        dims = len(item[0])
        return [sum(float(tok[j]) for tok in item) / count for j in range(dims)]
    return [float(x) for x in item]
