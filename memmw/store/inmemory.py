"""An in-memory store: the store protocol over Python dicts (tests, ephemeral agents).

It keeps the contract ``tests/store/test_conformance.py`` checks for every store: read
snapshots of one committed generation, atomic write transactions, one writer at a time
naming its holder, staged rebuilds that keep the embedding cache, activation, the chunk
rowid sequence and the generation counter, and agents that never see each other's rows.

A committed state is never changed in place: a writer works on a copy and publishes it,
so a reader's snapshot is simply the state it started with. Keyword search reads the
postings it computes from the chunks' terms; it has no full-text index (the ``fts5``
keyword backend is refused with a clear error). Nothing is persisted.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from memmw.config import Source
from memmw.errors import ConfigError, IndexBusyError
from memmw.store.arena import FRESH, Arena
from memmw.store.graphrows import (
    DAY_S,
    DECAY_PER_DAY,
    INITIAL_ACTIVATION,
    cooccurrence_matcher,
    current_fact_ids,
    note_rows,
)
from memmw.store.protocol import (
    ChunkRow,
    GraphRows,
    LockHolder,
    Postings,
    Store,
    StoreHealth,
    StoreWriter,
    VectorStats,
    chunk_id,
)
from memmw.store.terms import term_counts
from memmw.store.vectors import VectorMatrix, centroid_of
from memmw.store.vectorsearch import VectorCache, VectorIndex, choose_vector_index

if TYPE_CHECKING:
    from memmw.notes.syntax import ParsedNote
    from memmw.text.chunking import Chunk

FileKey = tuple[str, str]  # (source, path)


@dataclass(frozen=True)
class _Chunk:
    row: ChunkRow
    hash: str
    line_map: str | None
    tf: dict[int, int]


@dataclass
class _State:
    """One agent's index; a published state is never mutated (writers copy first)."""

    meta: dict[str, str] = field(default_factory=dict)
    #: ``(source, path) -> [hash, mtime, size, decay_ts]``.
    files: dict[FileKey, list[Any]] = field(default_factory=dict)
    chunks: dict[int, _Chunk] = field(default_factory=dict)
    vectors: dict[int, bytes] = field(default_factory=dict)
    #: ``(provider, model, key, hash) -> (blob, updated_at, order)``.
    cache: dict[tuple[str, str, str, str], tuple[bytes, float, int]] = field(default_factory=dict)
    #: Graph rows by table, in insertion order: ``(file key, row)``.
    graph: dict[str, list[tuple[FileKey, tuple[Any, ...]]]] = field(
        default_factory=lambda: {t: [] for t in ("entities", "aliases", "facts", "relations", "triggers")}
    )
    current: frozenset[int] = frozenset()
    cooccurrences: dict[tuple[str, str], int] = field(default_factory=dict)
    #: ``stable_key -> [activation, hits, last_access, updated_at]``.
    activation: dict[str, list[Any]] = field(default_factory=dict)
    last_rowid: int = 0
    last_fact_id: int = 0
    cache_order: int = 0

    def copy(self) -> _State:
        """A copy a writer may change (chunks and rows are immutable values)."""
        return _State(
            meta=dict(self.meta),
            files={k: list(v) for k, v in self.files.items()},
            chunks=dict(self.chunks),
            vectors=dict(self.vectors),
            cache=dict(self.cache),
            graph={t: list(rows) for t, rows in self.graph.items()},
            current=self.current,
            cooccurrences=dict(self.cooccurrences),
            activation={k: list(v) for k, v in self.activation.items()},
            last_rowid=self.last_rowid,
            last_fact_id=self.last_fact_id,
            cache_order=self.cache_order,
        )


class _Lock:
    """A re-entrant lock that records its holder (pid, host, since, what)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._owner: int | None = None
        self._depth = 0
        self.holder: LockHolder | None = None

    @contextlib.contextmanager
    def hold(self, timeout: float | None, what: str, location: str) -> Iterator[None]:
        me = threading.get_ident()
        with self._cond:
            if self._owner != me:
                deadline = None if timeout is None else time.monotonic() + timeout
                while self._owner is not None:
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        holder = self.holder.describe() if self.holder else "another writer"
                        raise IndexBusyError(f"the index {location} is busy: held by {holder}")
                    self._cond.wait(left)
                self._owner = me
                self.holder = LockHolder(
                    pid=os.getpid(), host=socket.gethostname(), since=time.time(), what=what
                )
            self._depth += 1
        try:
            yield
        finally:
            with self._cond:
                self._depth -= 1
                if self._depth == 0:
                    self._owner = None
                    self.holder = None
                    self._cond.notify_all()


class _Box:
    """Where a state is published: an agent's index, or a rebuild's staging area."""

    def __init__(self, state: _State | None) -> None:
        self.state = state


class InMemoryBackend:
    """The "database" several agents' in-memory stores share (one per test or process)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.boxes: dict[str, _Box] = {}
        self.writer_locks: dict[str, _Lock] = {}
        self.named_locks: dict[tuple[str, str], _Lock] = {}
        self.quarantined: list[tuple[str, str, _State]] = []

    def box(self, agent_id: str) -> _Box:
        with self._lock:
            return self.boxes.setdefault(agent_id, _Box(None))

    def writer_lock(self, agent_id: str) -> _Lock:
        with self._lock:
            return self.writer_locks.setdefault(agent_id, _Lock())

    def named_lock(self, agent_id: str, name: str) -> _Lock:
        with self._lock:
            return self.named_locks.setdefault((agent_id, name), _Lock())


_PROCESS_BACKENDS: dict[str, InMemoryBackend] = {}
_PROCESS_LOCK = threading.Lock()


def process_backend(key: str) -> InMemoryBackend:
    """This process's backend for ``key`` (a state folder): made on first use, kept."""
    with _PROCESS_LOCK:
        return _PROCESS_BACKENDS.setdefault(key, InMemoryBackend())


class InMemoryReader:
    """Reads of one state (a snapshot), and the base of the writer."""

    fts_tokenizer = "unicode61"

    def __init__(self, state: _State) -> None:
        self._state = state

    @property
    def state(self) -> _State:
        return self._state

    # -- meta and identity ---------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        """A meta value, or None."""
        return self.state.meta.get(key)

    def generation(self) -> int:
        """Counter bumped by every sync that changed the index."""
        value = self.state.meta.get("generation")
        return int(value) if value else 0

    def identity(self) -> dict[str, Any] | None:
        """The recorded identity, or None."""
        raw = self.state.meta.get("identity")
        if not raw:
            return None
        data = json.loads(raw)
        return data if isinstance(data, dict) else None

    # -- files and chunks ----------------------------------------------------------------
    def file_records(self, source: str) -> dict[str, tuple[str, float, int]]:
        """``{path: (hash, mtime, size)}`` of ``source``."""
        return {
            path: (str(rec[0]), float(rec[1]), int(rec[2]))
            for (src, path), rec in self.state.files.items()
            if src == source
        }

    def sources_present(self) -> set[str]:
        """Sources with at least one file."""
        return {src for src, _path in self.state.files}

    def chunks(self, ids: Sequence[int]) -> dict[int, ChunkRow]:
        """Chunks by rowid, with their file's decay timestamp."""
        out: dict[int, ChunkRow] = {}
        for rowid in ids:
            found = self.state.chunks.get(int(rowid))
            if found is not None:
                row = found.row
                decay = self.state.files[(row.source, row.path)][3]
                out[row.rowid] = ChunkRow(
                    rowid=row.rowid, id=row.id, path=row.path, source=row.source,
                    start_line=row.start_line, end_line=row.end_line, text=row.text,
                    line_map=row.line_map, importance=row.importance, n_terms=row.n_terms,
                    decay_ts=decay, terms_blob=row.terms_blob,
                )
        return out

    def _rowids(self, sources: Sequence[str]) -> list[int]:
        wanted = set(sources)
        return sorted(r for r, c in self.state.chunks.items() if c.row.source in wanted)

    def chunk_rowids(self, sources: Sequence[str]) -> list[int]:
        """Rowids of every chunk of ``sources``, ascending."""
        return self._rowids(sources)

    def chunk_count(self, sources: Sequence[str]) -> int:
        """Chunks of ``sources``."""
        return len(self._rowids(sources))

    # -- keyword leg ---------------------------------------------------------------------
    def postings(
        self, term_hashes: Sequence[int], sources: Sequence[str], arena: Arena = FRESH
    ) -> dict[int, Postings]:
        """Each term's postings over ``sources``, computed from the chunks' terms."""
        wanted = list(dict.fromkeys(int(h) for h in term_hashes))
        rows = self._rowids(sources)
        out: dict[int, Postings] = {}
        for term in wanted:
            hits = [(r, self.state.chunks[r]) for r in rows if term in self.state.chunks[r].tf]
            if hits:
                out[term] = Postings(
                    np.fromiter((r for r, _ in hits), dtype=np.int64, count=len(hits)),
                    np.fromiter((c.tf[term] for _, c in hits), dtype=np.int32, count=len(hits)),
                    np.fromiter((c.row.n_terms for _, c in hits), dtype=np.int32, count=len(hits)),
                )
        return out

    def keyword_stats(self, sources: Sequence[str]) -> tuple[int, float]:
        """``(chunks, total terms)`` of ``sources``."""
        rows = self._rowids(sources)
        return len(rows), float(sum(self.state.chunks[r].row.n_terms for r in rows))

    def fts_search(
        self, terms: Sequence[str], limit: int, sources: Sequence[str], *, require_all: bool
    ) -> list[tuple[int, float]]:
        """Refused: this store has no full-text index.

        Raises:
            ConfigError: always (use ``store.keyword_backend = "memory"``).
        """
        raise ConfigError(
            "the in-memory store has no full-text index; use store.keyword_backend = 'memory'"
        )

    def substring_counts(
        self, needles: Sequence[str], limit: int, sources: Sequence[str]
    ) -> list[tuple[int, int]]:
        """``(rowid, needles in the text)``, most first, then rowid (case-insensitive)."""
        if not needles or limit <= 0:
            return []
        lowered = [n.lower() for n in needles]
        counted = []
        for rowid in self._rowids(sources):
            text = self.state.chunks[rowid].row.text.lower()
            n = sum(1 for needle in lowered if needle in text)
            if n:
                counted.append((rowid, n))
        counted.sort(key=lambda x: (-x[1], x[0]))
        return counted[:limit]

    # -- vectors ---------------------------------------------------------------------------
    def vector_rows(self, sources: Sequence[str]) -> list[tuple[int, bytes]]:
        """``(rowid, blob)`` of every stored vector of ``sources``, by rowid."""
        return [(r, self.state.vectors[r]) for r in self._rowids(sources) if r in self.state.vectors]

    def vector_matrix(self, sources: Sequence[str], dims: int | None) -> VectorMatrix:
        """Every stored vector of ``sources`` as one matrix."""
        return VectorMatrix(self.vector_rows(sources), dims)

    def vector_centroid(self, sources: Sequence[str]) -> tuple[np.ndarray, int] | None:
        """``(mean, count)`` of the stored vectors of ``sources``."""
        return centroid_of(self.vector_rows(sources))

    def nearest(
        self, vector: Sequence[float], k: int, sources: Sequence[str]
    ) -> list[tuple[int, float]]:
        """The ``k`` nearest stored vectors by cosine (exact), best first."""
        query = np.asarray(vector, dtype=np.float32)
        matrix = self.vector_matrix(sources, len(query))
        norm = float(np.linalg.norm(query))
        if not len(matrix) or norm == 0.0 or k < 1:
            return []
        return matrix.search(query / norm, k)

    def vector_index(
        self, sources: Sequence[str], dims: int | None, cache: VectorCache, *, calibrate: bool
    ) -> VectorIndex | None:
        """The in-process matrix (no KNN or HNSW index here)."""
        return choose_vector_index(
            self, sources, dims, cache, calibrate=calibrate, knn=False, hnsw=False
        )

    def warm_vectors(self, sources: Sequence[str], dims: int | None, cache: VectorCache) -> None:
        """Load the matrix."""
        cache.matrix(self, sources, dims)

    def newest_decay_ts(self) -> float | None:
        """The newest dated memory."""
        dated = [rec[3] for rec in self.state.files.values() if rec[3] is not None]
        return float(max(dated)) if dated else None

    # -- stats -----------------------------------------------------------------------------
    def counts(self) -> dict[str, dict[str, int]]:
        """``{source: {"files": n, "chunks": n}}``."""
        out: dict[str, dict[str, int]] = {}
        for source, _path in self.state.files:
            out.setdefault(source, {"files": 0, "chunks": 0})["files"] += 1
        for chunk in self.state.chunks.values():
            out.setdefault(chunk.row.source, {"files": 0, "chunks": 0})["chunks"] += 1
        return out

    def vector_stats(self) -> VectorStats:
        """Vector, pending and cache figures."""
        by_source: dict[str, tuple[int, int]] = {}
        for rowid, chunk in self.state.chunks.items():
            text, vec = by_source.get(chunk.row.source, (0, 0))
            by_source[chunk.row.source] = (
                text + len(chunk.row.text),
                vec + len(self.state.vectors.get(rowid, b"")),
            )
        return VectorStats(
            vectors=len(self.state.vectors),
            pending=self.pending_count(),
            cache_entries=len(self.state.cache),
            bytes_by_source=by_source,
        )

    def pending_count(self) -> int:
        """Chunks without a vector."""
        return sum(1 for r in self.state.chunks if r not in self.state.vectors)

    def pending_chunks(self, after: int, limit: int) -> list[tuple[int, str, str]]:
        """``(rowid, hash, text)`` of chunks without a vector past ``after``, by rowid."""
        rows = sorted(r for r in self.state.chunks if r > after and r not in self.state.vectors)
        return [(r, self.state.chunks[r].hash, self.state.chunks[r].row.text) for r in rows[:limit]]

    def cached_embeddings(
        self, provider: str, model: str, provider_key: str, hashes: Sequence[str]
    ) -> dict[str, bytes]:
        """Cached vectors by chunk hash."""
        out: dict[str, bytes] = {}
        for h in hashes:
            found = self.state.cache.get((provider, model, provider_key, h))
            if found is not None:
                out[h] = found[0]
        return out

    def cache_count(self) -> int:
        """Rows in the embedding cache."""
        return len(self.state.cache)

    # -- knowledge graph ---------------------------------------------------------------------
    def graph_rows(self) -> GraphRows:
        """Every graph row, ordered as the SQLite store orders them."""
        g = self.state.graph
        current = self.state.current

        def placed(rows: list[tuple[FileKey, tuple[Any, ...]]], at: int) -> list[tuple[Any, ...]]:
            # By path and line (stable: rows of one line keep their order).
            return [r for _k, r in sorted(rows, key=lambda kr: (kr[1][at], kr[1][at + 1]))]

        return GraphRows(
            entities=[(r[2], r[3], r[4], r[0], r[1]) for r in placed(g["entities"], 0)],
            aliases=[(r[2], r[3], r[0]) for r in placed(g["aliases"], 0)],
            facts=[
                (r[0], r[3], r[4], r[5], r[6], r[7], r[1], r[2], r[8], r[9], r[10], r[11],
                 r[12], r[13], r[14], int(r[0] in current), r[16])
                for r in placed(g["facts"], 1)
            ],
            relations=[
                (r[0], r[3], r[4], r[5], r[6], r[7], r[1], r[2], r[8], r[9], r[10], r[12],
                 r[13], r[14])
                for r in placed(g["relations"], 1)
            ],
            triggers=[r for _k, r in g["triggers"]],
            entity_paths=[(r[2], r[0]) for _k, r in g["entities"]]
            + [(r[3], r[1]) for _k, r in g["facts"]],
            cooccurrences=[(a, b, n) for (a, b), n in sorted(self.state.cooccurrences.items())],
            activation=[(k, v[0], v[2]) for k, v in self.state.activation.items()],
        )


class InMemoryWriter(InMemoryReader):
    """Writes to one box's state: each outside a transaction commits on its own."""

    def __init__(self, box: _Box) -> None:
        assert box.state is not None
        super().__init__(box.state)
        self._box = box
        self._work: _State | None = None

    @property
    def state(self) -> _State:
        if self._work is not None:
            return self._work
        assert self._box.state is not None
        return self._box.state

    @contextlib.contextmanager
    def transaction(self) -> Iterator[InMemoryWriter]:
        """One atomic write transaction (a savepoint when one is open)."""
        outer = self._work
        self._work = self.state.copy()
        try:
            yield self
        except BaseException:
            self._work = outer
            raise
        done, self._work = self._work, outer
        if outer is None:
            self._box.state = done
        else:
            self._work = done

    @contextlib.contextmanager
    def _change(self) -> Iterator[_State]:
        with self.transaction():
            yield self.state

    # -- meta ---------------------------------------------------------------------------
    def set_meta(self, key: str, value: str) -> None:
        """Insert or replace a meta value."""
        with self._change() as s:
            s.meta[key] = value

    def delete_meta(self, key: str) -> None:
        """Remove a meta value."""
        with self._change() as s:
            s.meta.pop(key, None)

    def set_identity(self, identity: Mapping[str, Any]) -> None:
        """Record the identity."""
        self.set_meta("identity", json.dumps(dict(identity), sort_keys=True))

    def bump_generation(self) -> int:
        """Increment and return the generation; records ``last_sync``."""
        with self._change() as s:
            gen = self.generation() + 1
            s.meta["generation"] = str(gen)
            s.meta["last_sync"] = repr(time.time())
            return gen

    def bump_vector_generation(self) -> int:
        """Increment and return the vector generation."""
        with self._change() as s:
            value = int(s.meta.get("vector_generation") or 0) + 1
            s.meta["vector_generation"] = str(value)
            return value

    # -- files and chunks -------------------------------------------------------------------
    def _drop_graph(self, s: _State, key: FileKey) -> None:
        s.graph = {t: [(k, r) for k, r in rows if k != key] for t, rows in s.graph.items()}

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
        """Write a file and its chunks; an unchanged chunk keeps its rowid and vector."""
        with self._change() as s:
            key = (source, path)
            old: dict[str, tuple[int, str | None, int | None]] = {}
            if key in s.files:
                self._drop_graph(s, key)
                old = {
                    c.row.id: (r, c.line_map, c.row.importance)
                    for r, c in s.chunks.items()
                    if (c.row.source, c.row.path) == key
                }
            s.files[key] = [file_hash, mtime, size, decay_ts]
            unique: dict[str, Chunk] = {}
            for chunk in chunks:
                unique.setdefault(chunk_id(source, path, chunk, model), chunk)
            line_maps = {
                cid: json.dumps(chunk.line_map) if chunk.line_map else None
                for cid, chunk in unique.items()
            }
            kept = {
                cid: old[cid][0]
                for cid, chunk in unique.items()
                if cid in old and old[cid][1:] == (line_maps[cid], chunk.importance)
            }
            for cid, (rowid, _lm, _imp) in old.items():
                if cid not in kept:
                    s.chunks.pop(rowid, None)
                    s.vectors.pop(rowid, None)
            rowids: list[int] = []
            for cid, chunk in unique.items():
                if cid in kept:
                    rowids.append(kept[cid])
                    continue
                s.last_rowid += 1
                rowid = s.last_rowid
                hashes, tf, n_terms = term_counts(chunk.text)
                row = ChunkRow(
                    rowid=rowid, id=cid, path=path, source=source, start_line=chunk.start_line,
                    end_line=chunk.end_line, text=chunk.text,
                    line_map=tuple(chunk.line_map) if chunk.line_map else None,
                    importance=chunk.importance, n_terms=n_terms, decay_ts=None,
                    terms_blob=np.sort(hashes).astype("<i8").tobytes(),
                )
                counts = {int(h): int(n) for h, n in zip(hashes.tolist(), tf.tolist(), strict=True)}
                s.chunks[rowid] = _Chunk(row, chunk.hash, line_maps[cid], counts)
                rowids.append(rowid)
            return rowids

    def delete_file(self, path: str, source: str) -> None:
        """Remove a file and everything derived from it."""
        with self._change() as s:
            key = (source, path)
            for rowid in [r for r, c in s.chunks.items() if (c.row.source, c.row.path) == key]:
                s.chunks.pop(rowid)
                s.vectors.pop(rowid, None)
            s.files.pop(key, None)
            self._drop_graph(s, key)

    def update_file_stat(self, path: str, source: str, *, mtime: float, size: int) -> None:
        """Record a file's new mtime and size."""
        with self._change() as s:
            rec = s.files.get((source, path))
            if rec is not None:
                rec[1], rec[2] = mtime, size

    # -- vectors and the cache --------------------------------------------------------------
    def put_embeddings(
        self, provider: str, model: str, provider_key: str, vectors: Mapping[str, bytes]
    ) -> None:
        """Cache vectors by chunk hash."""
        now = time.time()
        with self._change() as s:
            for h, blob in vectors.items():
                s.cache_order += 1
                s.cache[(provider, model, provider_key, h)] = (blob, now, s.cache_order)

    def write_vectors(self, rows: Sequence[tuple[int, str, bytes]]) -> int:
        """Store vectors of chunks that still have that hash."""
        written = 0
        with self._change() as s:
            for rowid, digest, blob in rows:
                chunk = s.chunks.get(rowid)
                if chunk is not None and chunk.hash == digest:
                    s.vectors[rowid] = blob
                    written += 1
        return written

    def prune_embedding_cache(self, max_entries: int, batch: int) -> int:
        """Delete up to ``batch`` oldest cache rows above ``max_entries``."""
        with self._change() as s:
            excess = len(s.cache) - max_entries
            if excess <= 0:
                return 0
            oldest = sorted(s.cache, key=lambda k: (s.cache[k][1], s.cache[k][2]))
            for key in oldest[: min(excess, batch)]:
                del s.cache[key]
            return min(excess, batch)

    # -- knowledge graph ---------------------------------------------------------------------
    def replace_note_graph(
        self, *, path: str, source: str, note: ParsedNote | None, fresh: bool = False
    ) -> None:
        """Replace one file's graph rows with ``note`` (None: clear them)."""
        with self._change() as s:
            key = (source, path)
            if key not in s.files:
                return
            if not fresh:
                self._drop_graph(s, key)
            if source != Source.MEMORY or note is None:
                return
            rows = note_rows(path, source, note)
            s.graph["entities"] += [(key, r) for r in rows.entities]
            s.graph["aliases"] += [(key, r) for r in rows.aliases]
            for r in rows.facts:
                s.last_fact_id += 1
                s.graph["facts"].append((key, (s.last_fact_id, *r)))
            for r in rows.relations:
                s.last_fact_id += 1
                s.graph["relations"].append((key, (s.last_fact_id, *r)))
            s.graph["triggers"] += [(key, r) for r in rows.triggers]

    def refresh_graph(self) -> None:
        """Supersession, co-occurrences and seeded activation."""
        with self._change() as s:
            s.current = frozenset(
                current_fact_ids(
                    (r[0], r[15], r[8], r[13], r[1], r[2], r[9]) for _k, r in s.graph["facts"]
                )
            )
            matcher = cooccurrence_matcher(
                ((r[2], r[3]) for _k, r in s.graph["entities"]),
                ((r[2], r[4]) for _k, r in s.graph["aliases"]),
            )
            pairs: set[tuple[int, str, str]] = set()
            for rowid, chunk in s.chunks.items():
                if chunk.row.source == Source.MEMORY:
                    pairs.update((rowid, a, b) for a, b in matcher.pairs(chunk.row.text))
            counted: dict[tuple[str, str], int] = {}
            for _rowid, a, b in pairs:
                counted[(a, b)] = counted.get((a, b), 0) + 1
            s.cooccurrences = counted
            now = time.time()
            seeds = [r[16] for _k, r in s.graph["facts"]] + [r[14] for _k, r in s.graph["relations"]]
            seeds += ["e:" + r[2] for _k, r in s.graph["entities"]]
            for stable in seeds:
                s.activation.setdefault(stable, [INITIAL_ACTIVATION, 0, None, now])

    def decay_activation(self) -> None:
        """The daily activation decay (at most once a day)."""
        now = time.time()
        with self._change() as s:
            last = s.meta.get("graph_decay_at")
            if last is None:
                s.meta["graph_decay_at"] = repr(now)
                return
            days = math.floor((now - float(last)) / DAY_S)
            if days < 1:
                return
            for entry in s.activation.values():
                entry[0] *= DECAY_PER_DAY**days
                entry[3] = now
            s.meta["graph_decay_at"] = repr(float(last) + days * DAY_S)

    def bump_activation(self, keys: Iterable[str], amount: float) -> None:
        """Raise the activation of entries by stable key."""
        now = time.time()
        with self._change() as s:
            for key in set(keys):
                entry = s.activation.get(key)
                if entry is None:
                    s.activation[key] = [INITIAL_ACTIVATION + amount, 1, now, now]
                else:
                    entry[0] += amount
                    entry[1] += 1
                    entry[2] = entry[3] = now


class InMemoryStore:
    """One agent's in-memory index within an :class:`InMemoryBackend`.

    Args:
        backend: The backend shared by the agents of one "database" (default: its own).
        agent_id: The agent.
    """

    def __init__(self, backend: InMemoryBackend | None = None, *, agent_id: str = "main") -> None:
        self.backend = backend or InMemoryBackend()
        self.agent_id = agent_id
        self._box = self.backend.box(agent_id)
        self._lock = self.backend.writer_lock(agent_id)
        self._reads = threading.local()

    @property
    def location(self) -> str:
        """``memory:<agent>`` (nothing on disk)."""
        return f"memory:{self.agent_id}"

    def exists(self) -> bool:
        """True once written."""
        return self._box.state is not None

    def published(self) -> bool:
        """True once an identity is recorded."""
        state = self._box.state
        return state is not None and bool(state.meta.get("identity"))

    def read_only(self) -> bool:
        """False."""
        return False

    def features(self) -> dict[str, bool]:
        """Stored postings; no full-text index."""
        return {"fts5": False, "postings": True}

    def folder_cache(self) -> bool:
        """False: nothing lives in the state folder."""
        return False

    def open(self) -> bool:
        """Nothing to (re)connect."""
        return False

    @contextlib.contextmanager
    def read(self) -> Iterator[InMemoryReader]:
        """A snapshot of the committed state (nested reads in a thread share it)."""
        outer: InMemoryReader | None = getattr(self._reads, "reader", None)
        if outer is not None:
            yield outer
            return
        self._reads.reader = InMemoryReader(self._box.state or _State())
        try:
            yield self._reads.reader
        finally:
            self._reads.reader = None

    @contextlib.contextmanager
    def write(
        self, *, timeout: float | None = None, what: str = "write", exclusive: bool = True
    ) -> Iterator[InMemoryWriter]:
        """Hold the writer lock and yield a writer (small writes take it too)."""
        with self._lock.hold(timeout, what, self.location):
            if self._box.state is None:
                self._box.state = _State()
            yield InMemoryWriter(self._box)

    def writer_lock(
        self, *, timeout: float | None = None, what: str = "write"
    ) -> contextlib.AbstractContextManager[None]:
        """Hold the writer lock without a writer."""
        return self._lock.hold(timeout, what, self.location)

    def named_lock(
        self, name: str, *, timeout: float | None = None
    ) -> contextlib.AbstractContextManager[None]:
        """A lock of this agent's index for one job."""
        return self.backend.named_lock(self.agent_id, name).hold(timeout, name, self.location)

    def lock_holder(self) -> LockHolder | None:
        """Who holds the writer lock, or None."""
        return self._lock.holder

    @contextlib.contextmanager
    def rebuild(self, writer: StoreWriter) -> Iterator[InMemoryWriter]:
        """Stage a rebuild; swapped in when the block exits cleanly."""
        if not isinstance(writer, InMemoryWriter):
            raise ConfigError("rebuild needs this store's own writer")
        live = writer.state
        staged = _State(
            meta={"generation": str(writer.generation()), "epoch": uuid.uuid4().hex},
            cache=dict(live.cache),
            activation={k: list(v) for k, v in live.activation.items()},
            last_rowid=live.last_rowid,
            last_fact_id=live.last_fact_id,
            cache_order=live.cache_order,
        )
        if "graph_decay_at" in live.meta:
            staged.meta["graph_decay_at"] = live.meta["graph_decay_at"]
        box = _Box(staged)
        yield InMemoryWriter(box)
        self._box.state = box.state

    def quarantine(self, reason: str) -> str:
        """Set the index aside (kept in the backend); the next write starts a new one."""
        where = f"{self.location} (quarantined: {reason})"
        if self._box.state is not None:
            self.backend.quarantined.append((self.agent_id, reason, self._box.state))
        self._box.state = None
        return where

    def reset(self) -> None:
        """Delete this agent's index."""
        self._box.state = None

    def health(self) -> StoreHealth:
        """Always consistent (no storage to damage)."""
        state = self._box.state or _State()
        return StoreHealth(
            ok=True, detail="ok", chunks=len(state.chunks), location=self.location,
            features=self.features(),
        )

    def namespaces(self) -> list[dict[str, Any]]:
        """The agents of the backend with their sizes."""
        out = []
        for name, box in sorted(self.backend.boxes.items()):
            if box.state is None:
                continue
            out.append(
                {
                    "namespace": name,
                    "files": len(box.state.files),
                    "chunks": len(box.state.chunks),
                    "vectors": len(box.state.vectors),
                    "textBytes": sum(len(c.row.text) for c in box.state.chunks.values()),
                }
            )
        return out

    def close(self) -> None:
        """Nothing to release."""


def _conforms(store: InMemoryStore) -> Store:
    """Type check only: the in-memory store is a :class:`Store`."""
    return store
