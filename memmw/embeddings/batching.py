"""Request grouping, input splitting on UTF-8 boundaries, and vector averaging/normalising."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

#: Largest request body (sum of UTF-8 input bytes) sent in one plain embedding call.
DEFAULT_REQUEST_MAX_BYTES = 8000
#: Input limit for models we know nothing about.
DEFAULT_INPUT_MAX_BYTES = 8192
#: Input limit of local GGUF models (their context is usually 2048 tokens or less).
LOCAL_INPUT_MAX_BYTES = 2048

_MODEL_LIMITS: dict[str, int] = {
    "text-embedding-3-small": 8192,
    "text-embedding-3-large": 8192,
    "text-embedding-ada-002": 8191,
    "text-embedding-004": 2048,
    "gemini-embedding-001": 2048,
    "gemini-embedding-2-preview": 8192,
    "voyage-3": 32000,
    "voyage-code-3": 32000,
    "voyage-3-lite": 16000,
}

EmbedBatch = Callable[[list[str]], list[list[float]]]


def max_input_bytes_for(provider_id: str, model: str) -> int:
    """The largest UTF-8 input, in bytes, a model accepts before memmw splits it.

    Args:
        provider_id: Registry name of the provider (``openai``, ``gemini``, ``local``, ...).
        model: Model name, with or without a ``models/`` style prefix.
    """
    name = model.rsplit("/", 1)[-1].strip().lower()
    if name in _MODEL_LIMITS:
        return _MODEL_LIMITS[name]
    if provider_id == "local":
        return LOCAL_INPUT_MAX_BYTES
    if provider_id == "gemini":
        return 2048
    return DEFAULT_INPUT_MAX_BYTES


def utf8_len(text: str) -> int:
    """Length of ``text`` in UTF-8 bytes."""
    return len(text.encode("utf-8"))


def split_utf8(text: str, max_bytes: int) -> list[str]:
    """Split ``text`` into pieces of at most ``max_bytes`` UTF-8 bytes.

    Cuts never fall inside a character; within the last quarter of a window a cut
    prefers a line break, then a space, so words stay whole where possible.

    Args:
        text: Text to split.
        max_bytes: Byte budget per piece (at least 4, the longest UTF-8 character).

    Returns:
        The pieces, in order; ``[text]`` when it already fits. Joined, they equal ``text``.
    """
    if max_bytes < 4:
        raise ValueError("max_bytes must be at least 4")
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return [text]
    pieces: list[str] = []
    start = 0
    while len(data) - start > max_bytes:
        end = start + max_bytes
        # Step back to a character start (continuation bytes are 0b10xxxxxx).
        while end > start and (data[end] & 0xC0) == 0x80:
            end -= 1
        floor = start + (max_bytes * 3) // 4
        for sep in (b"\n", b" "):
            cut = data.rfind(sep, floor, end)
            if cut != -1:
                end = cut + 1
                break
        pieces.append(data[start:end].decode("utf-8"))
        start = end
    pieces.append(data[start:].decode("utf-8"))
    return pieces


def group_by_bytes(
    texts: Sequence[str], max_bytes: int = DEFAULT_REQUEST_MAX_BYTES
) -> list[list[int]]:
    """Group text indices into requests whose UTF-8 sizes add up to at most ``max_bytes``.

    Order is kept; a text larger than ``max_bytes`` on its own goes alone in its group.

    Args:
        texts: Inputs, each already within the model's input limit.
        max_bytes: Request budget.
    """
    groups: list[list[int]] = []
    current: list[int] = []
    used = 0
    for i, text in enumerate(texts):
        size = utf8_len(text)
        if current and used + size > max_bytes:
            groups.append(current)
            current, used = [], 0
        current.append(i)
        used += size
    if current:
        groups.append(current)
    return groups


def sanitize(vector: Sequence[float]) -> list[float]:
    """Replace non-finite components (NaN, inf) by 0.0."""
    return [float(x) if math.isfinite(x) else 0.0 for x in vector]


def normalize(vector: Sequence[float]) -> list[float]:
    """Sanitise and L2-normalise a vector; an all-zero vector is returned unchanged."""
    clean = sanitize(vector)
    norm = math.sqrt(math.fsum(x * x for x in clean))
    if norm == 0.0:
        return clean
    return [x / norm for x in clean]


def mean_vector(
    vectors: Sequence[Sequence[float]], weights: Sequence[float] | None = None
) -> list[float]:
    """Weighted mean of equal-length vectors (each normalised first), then L2-normalised.

    Args:
        vectors: Piece vectors of one input.
        weights: Optional weights (for example the pieces' byte lengths).
    """
    if not vectors:
        raise ValueError("mean_vector needs at least one vector")
    dims = len(vectors[0])
    if any(len(v) != dims for v in vectors):
        raise ValueError("mean_vector needs vectors of equal length")
    ws = list(weights) if weights is not None else [1.0] * len(vectors)
    total = [0.0] * dims
    for vec, w in zip(vectors, ws, strict=True):
        for j, x in enumerate(normalize(vec)):
            total[j] += w * x
    return normalize(total)


class _Dropped(Exception):
    """A request not sent because another request of the same call failed."""


def embed_with_limits(
    texts: Sequence[str],
    embed_batch: EmbedBatch,
    *,
    max_input_bytes: int,
    max_request_bytes: int = DEFAULT_REQUEST_MAX_BYTES,
    concurrency: int = 1,
) -> list[list[float]]:
    """Embed texts in byte-bounded requests, splitting over-long inputs and averaging pieces.

    Each text over ``max_input_bytes`` is split on UTF-8 boundaries; its pieces are embedded
    and averaged (weighted by byte length, then normalised), so every input still yields
    one vector. Single-piece inputs keep the vector exactly as ``embed_batch`` returned it.

    Args:
        texts: Inputs, in order.
        embed_batch: Embeds one request's texts and returns one vector per text, in order.
        max_input_bytes: The model's input limit.
        max_request_bytes: Budget per request (an oversize piece goes alone).
        concurrency: Requests in flight at once (threads); once one fails, the requests
            not yet sent are dropped and the error is raised.

    Returns:
        One vector per input text, in order.
    """
    pieces, owner, sizes = split_for_model(texts, max_input_bytes)
    if not pieces:
        return []
    groups = group_by_bytes(pieces, max_request_bytes)

    failed = threading.Event()

    def run(group: list[int]) -> list[list[float]]:
        if failed.is_set():
            # A request of this call failed: the ones not yet sent are dropped, so a
            # provider that just timed out is not sent a second wave (the caller
            # retries later, whole).
            raise _Dropped
        try:
            vectors = embed_batch([pieces[k] for k in group])
        except BaseException:
            failed.set()
            raise
        if len(vectors) != len(group):
            raise ValueError(f"provider returned {len(vectors)} vectors for {len(group)} inputs")
        return vectors

    if concurrency > 1 and len(groups) > 1:
        with ThreadPoolExecutor(max_workers=min(concurrency, len(groups))) as pool:
            futures = [pool.submit(run, g) for g in groups]
            results = []
            error: BaseException | None = None
            for future in futures:
                try:
                    results.append(future.result())
                except _Dropped:
                    continue
                except BaseException as exc:  # the first real failure is raised
                    error = error or exc
            if error is not None:
                raise error
    else:
        results = [run(g) for g in groups]
    piece_vectors: list[list[float]] = [[] for _ in pieces]
    for group, vectors in zip(groups, results, strict=True):
        for k, vec in zip(group, vectors, strict=True):
            piece_vectors[k] = vec
    return combine_pieces(piece_vectors, owner, sizes, len(texts))


def combine_pieces(
    piece_vectors: Sequence[list[float]],
    owner: Sequence[int],
    sizes: Sequence[int],
    count: int,
) -> list[list[float]]:
    """Fold piece vectors back into one vector per input.

    Args:
        piece_vectors: One vector per piece.
        owner: For each piece, the index of the input it came from.
        sizes: Byte length of each piece (the averaging weights).
        count: Number of inputs.
    """
    by_input: list[list[int]] = [[] for _ in range(count)]
    for k, i in enumerate(owner):
        by_input[i].append(k)
    out: list[list[float]] = []
    for ks in by_input:
        if len(ks) == 1:
            out.append(list(piece_vectors[ks[0]]))
        else:
            out.append(mean_vector([piece_vectors[k] for k in ks], [float(sizes[k]) for k in ks]))
    return out


def split_for_model(
    texts: Sequence[str], max_input_bytes: int
) -> tuple[list[str], list[int], list[int]]:
    """Split inputs for a model: returns ``(pieces, owner, sizes)`` for :func:`combine_pieces`.

    Args:
        texts: Inputs, in order.
        max_input_bytes: The model's input limit.
    """
    pieces: list[str] = []
    owner: list[int] = []
    for i, text in enumerate(texts):
        # Endpoints reject empty inputs; a single space embeds as "nothing" everywhere.
        for piece in split_utf8(text or " ", max_input_bytes):
            pieces.append(piece)
            owner.append(i)
    return pieces, owner, [utf8_len(p) for p in pieces]
