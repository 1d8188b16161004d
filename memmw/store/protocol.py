"""The store protocol: what the engine, search, graph and CLI need of an index backend."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from memmw.store.arena import FRESH, Arena

if TYPE_CHECKING:
    from memmw.notes.syntax import ParsedNote
    from memmw.store.vectorsearch import VectorCache, VectorIndex
    from memmw.text.chunking import Chunk

# -- values -------------------------------------------------------------------------------
# Store-neutral: plain Python and numpy, never a driver type, so a networked backend
# (PostgreSQL) returns the same objects as the SQLite file.


@dataclass(frozen=True, kw_only=True)
class ChunkRow:
    """A chunk as stored, with what ranking and snippets need.

    ``rowid`` is the store's integer chunk id: never reused within one agent's index
    (not even across a rebuild), so caches keyed by it stay valid.
    """

    rowid: int
    id: str
    path: str
    source: str
    start_line: int
    end_line: int
    text: str
    line_map: tuple[int, ...] | None
    importance: int | None
    n_terms: int
    decay_ts: float | None
    #: The chunk's distinct term hashes, little-endian int64.
    terms_blob: bytes = b""

    def term_hashes(self) -> np.ndarray:
        """The chunk's distinct term hashes (int64, read-only; for similarity between chunks)."""
        hashes = np.frombuffer(self.terms_blob, dtype="<i8")
        # Read-only view of the bytes where int64 is little-endian (no copy), else a copy.
        return hashes if hashes.dtype == np.int64 else hashes.astype(np.int64)

    def piece_lines(self) -> list[int]:
        """Line number of each ``\\n``-separated piece of ``text``."""
        if self.line_map is not None:
            return list(self.line_map)
        return list(range(self.start_line, self.start_line + self.text.count("\n") + 1))


def chunk_id(source: str, path: str, chunk: Chunk, model: str) -> str:
    """Stable chunk id: sha256 of ``source:path:start:end:hash:model``."""
    key = f"{source}:{path}:{chunk.start_line}:{chunk.end_line}:{chunk.hash}:{model}"
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Postings:
    """One query term's live postings, rowid ascending.

    Attributes:
        rowids: int64 chunk ids.
        tf: int32 term frequency in each chunk.
        doc_len: int32 number of terms in each chunk (BM25 length norm).
    """

    rowids: np.ndarray
    tf: np.ndarray
    doc_len: np.ndarray

    def __len__(self) -> int:
        return len(self.rowids)

    @property
    def last(self) -> int:
        """The largest rowid (-1 when there is none)."""
        return int(self.rowids[-1]) if len(self.rowids) else -1

    def lookup(self, rowids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(present, tf, doc_len)`` at each of ``rowids`` (ascending); 0 where absent."""
        return lookup_sorted(self.rowids, self.tf, self.doc_len, rowids)


def find_sorted(ordered: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(found, at)``: whether each of ``values`` is in ``ordered`` (ascending), and its
    index there where it is (a binary search each; ``at`` is 0 when ``ordered`` is
    empty)."""
    if not len(ordered):
        return np.zeros(len(values), dtype=bool), np.zeros(len(values), dtype=np.intp)
    at = np.minimum(np.searchsorted(ordered, values), len(ordered) - 1)
    found: np.ndarray = ordered[at] == values
    return found, at


def first_of_runs(ordered: np.ndarray) -> np.ndarray:
    """Where each run of equal values of ``ordered`` (ascending) starts: the mask that
    keeps each value once."""
    first = np.empty(len(ordered), dtype=bool)
    first[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    return first


def lookup_sorted(
    rows: np.ndarray, tf: np.ndarray, dl: np.ndarray, wanted: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(present, tf, doc_len)`` of ``wanted`` in postings sorted by rowid; 0 where absent."""
    if not len(rows):
        zero = np.zeros(len(wanted), dtype=np.int32)
        return np.zeros(len(wanted), dtype=bool), zero, zero
    has, at = find_sorted(rows, wanted)
    return has, np.where(has, tf[at], 0), np.where(has, dl[at], 0)


class TermPostings(Protocol):
    """One query term's live postings as the keyword leg reads them: ``len`` is the
    term's document frequency; the arrays (rowid ascending) may be decoded only when first
    read, and ``lookup`` may answer for a few chunks without decoding them all."""

    def __len__(self) -> int: ...

    @property
    def rowids(self) -> np.ndarray: ...

    @property
    def tf(self) -> np.ndarray: ...

    @property
    def doc_len(self) -> np.ndarray: ...

    @property
    def last(self) -> int:
        """The largest rowid (at least that of every live posting; -1 when none)."""
        ...

    def lookup(self, rowids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(present, tf, doc_len)`` at each of ``rowids`` (ascending); 0 where absent."""
        ...


#: No postings (a term absent from the index).
EMPTY_POSTINGS = Postings(
    np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int32)
)


#: ``{path: (content sha256, mtime, size)}`` of one source's indexed files.
FileRecords = dict[str, tuple[str, float, int]]


@dataclass(frozen=True, kw_only=True)
class VectorStats:
    """Vector and cache figures for ``status``.

    Attributes:
        vectors: Chunks that have a stored vector.
        pending: Chunks that have none yet.
        cache_entries: Rows in the embedding cache.
        bytes_by_source: ``{source: (bytes of chunk text, bytes of stored vectors)}``.
    """

    vectors: int
    pending: int
    cache_entries: int
    bytes_by_source: dict[str, tuple[int, int]] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class StoreHealth:
    """What ``memmw doctor`` reports of a store.

    Attributes:
        ok: The backend's integrity check passed.
        detail: What the check said (``ok`` or the problem), or why it could not open.
        chunks: Chunks in the index.
        location: Where the index lives (a file, a database and schema), for messages.
        features: Backend capabilities by name (for SQLite ``{"fts5": True}``).
    """

    ok: bool
    detail: str
    chunks: int
    location: str
    features: dict[str, bool] = field(default_factory=dict)
    #: False when the index could not even be opened (``detail`` says why).
    opened: bool = True


@dataclass(frozen=True, kw_only=True)
class LockHolder:
    """Who holds an index's writer lock (as far as the holder recorded it)."""

    pid: int | None = None
    host: str = ""
    since: float | None = None
    what: str = ""

    def describe(self) -> str:
        """``pid 123 on host (sync, 4 s)``-style text for an error message."""
        import time

        parts = []
        if self.pid is not None:
            parts.append(f"pid {self.pid}")
        if self.host:
            parts.append(f"on {self.host}")
        extra = [w for w in (self.what,) if w]
        if self.since is not None:
            extra.append(f"for {max(0.0, time.time() - self.since):.0f} s")
        text = " ".join(parts) or "another process"
        return f"{text} ({', '.join(extra)})" if extra else text


@dataclass(frozen=True, kw_only=True)
class GraphRows:
    """The knowledge-graph rows a store holds, ready for ``memmw.graph.model.load_graph``.

    Every list is ordered as noted; tuples are plain values.

    Attributes:
        entities: ``(entity_key, name, kind, path, line)`` by path, line.
        aliases: ``(entity_key, alias, path)`` by path, line.
        facts: ``(id, entity_key, entity, key, key_norm, value, path, line, valid_from,
            retracted, importance, origin, session_kind, observed_at, private, current,
            stable_key)`` by path, line.
        relations: ``(id, subject_key, subject, predicate, object_key, object, path, line,
            retracted, importance, origin, observed_at, private, stable_key)`` by path, line.
        triggers: ``(path, line, phrases joined by "; ", text, importance, origin, private)``.
        entity_paths: ``(entity_key, path)`` of every entity and fact row.
        cooccurrences: ``(a_key, b_key, chunks naming both)``.
        activation: ``(stable_key, activation, last_access or None)``.
    """

    entities: list[tuple[Any, ...]] = field(default_factory=list)
    aliases: list[tuple[Any, ...]] = field(default_factory=list)
    facts: list[tuple[Any, ...]] = field(default_factory=list)
    relations: list[tuple[Any, ...]] = field(default_factory=list)
    triggers: list[tuple[Any, ...]] = field(default_factory=list)
    entity_paths: list[tuple[Any, ...]] = field(default_factory=list)
    cooccurrences: list[tuple[Any, ...]] = field(default_factory=list)
    activation: list[tuple[Any, ...]] = field(default_factory=list)


# -- protocols ----------------------------------------------------------------------------


@runtime_checkable
class StoreReader(Protocol):
    """Reads of one agent's index inside one consistent snapshot.

    Obtained from :meth:`Store.read` (a read snapshot: every call sees one committed
    generation) or as the writer itself (which reads its own uncommitted writes).
    """

    #: Keyword tokenizer of the index's full-text table (``unicode61`` or ``trigram``).
    fts_tokenizer: str

    # meta and identity
    def get_meta(self, key: str) -> str | None:
        """A meta value, or None."""
        ...

    def generation(self) -> int:
        """Counter bumped by every sync that changed the index (0 for a new one)."""
        ...

    def identity(self) -> dict[str, Any] | None:
        """The index identity (provider, model, dims, chunking...), None before the first build."""
        ...

    # files
    def file_records(self, source: str) -> FileRecords:
        """``{path: (hash, mtime, size)}`` of the indexed files of ``source``."""
        ...

    # chunks and the search legs
    def chunks(self, ids: Sequence[int]) -> dict[int, ChunkRow]:
        """Chunks by rowid (missing ids are absent from the result)."""
        ...

    def chunk_rowids(self, sources: Sequence[str]) -> list[int]:
        """Rowids of every chunk of ``sources``, ascending."""
        ...

    def postings(
        self, term_hashes: Sequence[int], sources: Sequence[str], arena: Arena = FRESH
    ) -> Mapping[int, TermPostings]:
        """Live postings of each term hash present in ``sources`` (absent terms left out).

        The arrays may live in ``arena``'s memory (valid until its owner resets it); a
        store may also ignore it and return arrays of its own.
        """
        ...

    def keyword_stats(self, sources: Sequence[str]) -> tuple[int, float]:
        """``(live chunks, total terms)`` of ``sources`` (BM25's N and average length)."""
        ...

    def fts_search(
        self, terms: Sequence[str], limit: int, sources: Sequence[str], *, require_all: bool
    ) -> list[tuple[int, float]]:
        """``(rowid, rank)`` of the chunks holding every one of ``terms`` (``require_all``)
        or any of them, best (lowest rank) first; rank is negative BM25.

        Terms are plain strings: each store builds its own query from them (SQLite an
        FTS5 expression of quoted terms), so no query dialect crosses this seam.
        """
        ...

    def substring_counts(
        self, needles: Sequence[str], limit: int, sources: Sequence[str]
    ) -> list[tuple[int, int]]:
        """``(rowid, how many needles occur in the text)``, most first, then rowid."""
        ...

    def vector_rows(self, sources: Sequence[str]) -> list[tuple[int, bytes]]:
        """``(rowid, unit float32 little-endian vector)`` of every stored vector, by rowid."""
        ...

    def vector_index(
        self, sources: Sequence[str], dims: int | None, cache: VectorCache, *, calibrate: bool
    ) -> VectorIndex | None:
        """The one vector-search capability: the path that answers this index's vector leg
        (HNSW, the store's own KNN or the in-process matrix, chosen by the store; see
        :mod:`memmw.store.vectorsearch`), or None when there are no vectors to search.

        Called before the query is embedded; ``cache`` keeps the matrix between searches.
        """
        ...

    def warm_vectors(self, sources: Sequence[str], dims: int | None, cache: VectorCache) -> None:
        """Load what the vector leg reads into ``cache`` now (nothing for a server-side
        index), so the first search does not pay for it."""
        ...

    def newest_decay_ts(self) -> float | None:
        """The newest dated memory (epoch seconds), the reference age for decay."""
        ...

    # stats
    def counts(self) -> dict[str, dict[str, int]]:
        """``{source: {"files": n, "chunks": n}}``."""
        ...

    def vector_stats(self) -> VectorStats:
        """Vector, pending and cache figures for ``status``."""
        ...

    def pending_count(self) -> int:
        """Chunks that have no vector yet."""
        ...

    # embedding
    def pending_chunks(self, after: int, limit: int) -> list[tuple[int, str, str]]:
        """``(rowid, chunk hash, text)`` of chunks without a vector past ``after``, by rowid."""
        ...

    def cached_embeddings(
        self, provider: str, model: str, provider_key: str, hashes: Sequence[str]
    ) -> dict[str, bytes]:
        """``{chunk hash: vector blob}`` found in the embedding cache."""
        ...

    def cache_count(self) -> int:
        """Rows in the embedding cache."""
        ...

    # knowledge graph
    def graph_rows(self) -> GraphRows:
        """Every graph row (call inside one snapshot for a consistent view)."""
        ...


@runtime_checkable
class StoreWriter(StoreReader, Protocol):
    """Writes to one agent's index; a writer holds the index's single writer lock.

    Writes made inside :meth:`transaction` commit together or not at all.
    """

    def transaction(self) -> AbstractContextManager[StoreWriter]:
        """One atomic write transaction (rolled back when the block raises)."""
        ...

    # meta and identity
    def set_meta(self, key: str, value: str) -> None:
        """Insert or replace a meta value."""
        ...

    def delete_meta(self, key: str) -> None:
        """Remove a meta value (no error when absent)."""
        ...

    def set_identity(self, identity: Mapping[str, Any]) -> None:
        """Record the index identity (JSON-serialisable)."""
        ...

    def bump_generation(self) -> int:
        """Increment and return the generation; records ``last_sync``."""
        ...

    def bump_vector_generation(self) -> int:
        """Increment and return the vector generation (vectors were written)."""
        ...

    # files and chunks
    def replace_file(
        self,
        *,
        path: str,
        source: str,
        file_hash: str,
        mtime: float,
        size: int,
        decay_ts: float | None,
        chunks: Sequence[Chunk],
        model: str,
    ) -> list[int]:
        """Write a file's record and chunks, replacing what it had; returns the chunk rowids.

        The file's graph rows go, and the vectors and postings of its old chunks. A store
        may keep the row (and rowid, vector) of a chunk the file still has unchanged.
        """
        ...

    def delete_file(self, path: str, source: str) -> None:
        """Remove a file and everything derived from it."""
        ...

    def update_file_stat(self, path: str, source: str, *, mtime: float, size: int) -> None:
        """Record a file's new mtime and size when its content did not change."""
        ...

    # vectors and the embedding cache
    def put_embeddings(
        self, provider: str, model: str, provider_key: str, vectors: Mapping[str, bytes]
    ) -> None:
        """Cache ``{chunk hash: vector blob}`` for this provider, model and endpoint."""
        ...

    def write_vectors(self, rows: Sequence[tuple[int, str, bytes]]) -> int:
        """Store ``(rowid, chunk hash, blob)``; only where the chunk still has that hash.

        Returns how many were written (a sync may have replaced chunks meanwhile).
        """
        ...

    def prune_embedding_cache(self, max_entries: int, batch: int) -> int:
        """Delete up to ``batch`` oldest cache rows above ``max_entries``; returns how many."""
        ...

    # knowledge graph
    def replace_note_graph(
        self, *, path: str, source: str, note: ParsedNote | None, fresh: bool = False
    ) -> None:
        """Replace the graph rows of one indexed file with ``note`` (None: just clear them).

        Every store keeps the rows ``memmw.store.graphrows.note_rows`` derives (stable
        keys, provenance); ``refresh_graph`` uses the same module for supersession and
        co-occurrences, so all stores answer fact searches alike.

        ``fresh``: the file row was just written by :meth:`replace_file` (nothing to clear).
        """
        ...

    def refresh_graph(self) -> None:
        """Recompute what spans files: supersession, co-occurrences, seeded activation."""
        ...

    def decay_activation(self) -> None:
        """Apply the daily activation decay (at most once a day)."""
        ...

    def bump_activation(self, keys: Iterable[str], amount: float) -> None:
        """Raise the activation of entries by stable key and record the access."""
        ...


@runtime_checkable
class Store(Protocol):
    """One agent's index in a backend (a SQLite file, a PostgreSQL schema...).

    A store is namespaced to one agent: two stores of different agents never see each
    other's rows, whether the backend keeps them in two files or one database.
    Implementations are built per agent (``SqliteStore(db_path, agent_id=...)``; a
    networked backend takes its DSN and the agent id) and create or migrate their
    schema on the first :meth:`write` (or :meth:`read` when they may write).
    Backend errors that mean the index is damaged surface as
    :class:`memmw.errors.IndexCorruptError`, a busy writer lock as
    :class:`memmw.errors.IndexBusyError`; no driver exception crosses the protocol.
    """

    #: The agent whose index this is.
    agent_id: str

    @property
    def location(self) -> str:
        """Where the index lives, for messages (a path, or a redacted DSN and namespace)."""
        ...

    def exists(self) -> bool:
        """True when the backend holds an index for this agent (possibly empty)."""
        ...

    def published(self) -> bool:
        """True once an index has been built (its identity is recorded)."""
        ...

    def read_only(self) -> bool:
        """True when this process can search but never write the index."""
        ...

    def features(self) -> dict[str, bool]:
        """Backend capabilities by name (cheap; for ``status --deep``)."""
        ...

    def folder_cache(self) -> bool:
        """True when the embedding cache lives in the state folder (a SQLite file): a moved
        workspace's new folder may then find its vectors in the other folders' caches."""
        ...

    def open(self) -> bool:
        """Connect, or reconnect when the backend's index was replaced under this process.

        Returns:
            True when a new connection was made (callers re-check what they cached).

        Raises:
            memmw.errors.IndexCorruptError: the index is damaged.
        """
        ...

    def read(self) -> AbstractContextManager[StoreReader]:
        """A read snapshot for the block (one committed generation throughout).

        Usable from any thread; nested reads in one thread share the outer snapshot.
        """
        ...

    def write(
        self, *, timeout: float | None = None, what: str = "write", exclusive: bool = True
    ) -> AbstractContextManager[StoreWriter]:
        """Hold the single writer lock for the block and yield the writer.

        Re-entrant within one thread (a nested ``write`` joins the held lock).

        Args:
            timeout: Seconds to wait for another writer (None: wait; 0: try once).
            what: Recorded as what the holder is doing (shown to a waiting writer).
            exclusive: False for small independent writes (activation bumps) that need
                not wait for a sync; they wait at most ``timeout`` for row locks.

        Raises:
            memmw.errors.IndexBusyError: the lock is held elsewhere past ``timeout``;
                the message names the holder.
        """
        ...

    def writer_lock(
        self, *, timeout: float | None = None, what: str = "write"
    ) -> AbstractContextManager[None]:
        """Hold the single writer lock without opening a writer (a sync spans several).

        Re-entrant within one thread; :meth:`write` inside it joins the held lock.

        Raises:
            memmw.errors.IndexBusyError: held elsewhere past ``timeout``; names the holder.
        """
        ...

    def named_lock(
        self, name: str, *, timeout: float | None = None
    ) -> AbstractContextManager[None]:
        """A cross-process lock of this agent's index for one job (``embed``).

        Raises:
            memmw.errors.IndexBusyError: held elsewhere past ``timeout``.
        """
        ...

    def lock_holder(self) -> LockHolder | None:
        """Who holds the writer lock now, or None when it is free."""
        ...

    def rebuild(self, writer: StoreWriter) -> AbstractContextManager[StoreWriter]:
        """Stage a full rebuild; swapped in atomically when the block exits cleanly.

        Call with the writer of the lock held. The staged index starts empty apart from
        what is kept across rebuilds (embedding cache, activation, the chunk id sequence
        and the generation counter); a block that raises discards it and the old rows stay
        searchable.
        """
        ...

    def quarantine(self, reason: str) -> str:
        """Move a damaged index aside (kept for inspection); the next write starts a new one.

        Call with the writer lock held (outside any nested writer). Returns where the
        damaged index went.

        Raises:
            memmw.errors.IndexCorruptError: it could not be moved aside.
        """
        ...

    def reset(self) -> None:
        """Delete this agent's index (never a Markdown file); the next sync rebuilds it."""
        ...

    def health(self) -> StoreHealth:
        """Run the backend's integrity check (``memmw doctor``)."""
        ...

    def namespaces(self) -> list[dict[str, Any]]:
        """The agents this backend holds, with their sizes (``memmw status --deep``).

        One dict per namespace: ``namespace``, ``files``, ``chunks``, ``vectors`` and
        ``textBytes``. A SQLite file holds one agent; a database holds many.
        """
        ...

    def close(self) -> None:
        """Release connections (idempotent)."""
        ...
