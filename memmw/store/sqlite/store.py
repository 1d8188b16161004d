"""Row-level operations on one index database (the store of record for search)."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from memmw.store.arena import FRESH, Arena
from memmw.store.protocol import ChunkRow, GraphRows, TermPostings, VectorStats, chunk_id
from memmw.store.segments import FLUSH_AT, PostingsBuffer
from memmw.store.sqlite import graph
from memmw.store.sqlite import vectors as vsql
from memmw.store.sqlite.db import savepoint, transaction
from memmw.store.sqlite.postings import SqliteSegments, read_postings, read_stats
from memmw.store.terms import term_counts
from memmw.store.vectors import VectorMatrix, centroid_of
from memmw.store.vectorsearch import VectorCache, VectorIndex, choose_vector_index
from memmw.text.analysis import terms
from memmw.text.chunking import Chunk

if TYPE_CHECKING:
    from memmw.notes.syntax import ParsedNote
    from memmw.store.sqlite.sqlitevec import SqliteVecIndex


_CHUNK_COLUMNS = (
    "c.rowid, c.id, c.path, c.source, c.start_line, c.end_line, c.text, c.line_map, "
    "c.importance, c.n_terms, f.decay_ts, t.hashes"
)


def _chunk_row(row: Sequence[Any]) -> ChunkRow:
    return ChunkRow(
        rowid=row[0],
        id=row[1],
        path=row[2],
        source=row[3],
        start_line=row[4],
        end_line=row[5],
        text=row[6],
        line_map=tuple(json.loads(row[7])) if row[7] else None,
        importance=row[8],
        n_terms=row[9],
        decay_ts=row[10],
        terms_blob=row[11] or b"",
    )


def _line_map_json(chunk: Chunk) -> str | None:
    return json.dumps(chunk.line_map) if chunk.line_map else None


def fts_body(text: str, tokenizer: str) -> str:
    """What the FTS5 column holds: memmw's terms (unicode61) or the raw text (trigram)."""
    return text if tokenizer == "trigram" else " ".join(terms(text))


def fts_quote(term: str) -> str:
    """Quote one term for an FTS5 MATCH expression (no user input can break the syntax)."""
    return '"' + term.replace('"', '""') + '"'


class IndexStore:
    """Reads and writes of one index database through one connection.

    The store knows nothing of ranking; a second backend (for example PostgreSQL) would
    implement the same methods.
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        *,
        fts_tokenizer: str = "unicode61",
        fts: bool = True,
        vec0: Callable[[], SqliteVecIndex] | None = None,
    ) -> None:
        """Wrap one connection.

        Args:
            conn: The index database.
            fts_tokenizer: Tokenizer of ``chunks_fts``.
            fts: Keep ``chunks_fts`` filled on writes (only the ``fts5`` keyword backend
                reads it; the postings are always kept).
            vec0: KNN through sqlite-vec (``store.vector_backend = "sqlite-vec"``), else numpy.
        """
        self.conn = conn
        self.fts_tokenizer = fts_tokenizer
        self.fts = fts
        self.vec0 = vec0
        #: Postings changes of the current write transaction (see ``flush_postings``).
        self.postings_buffer = PostingsBuffer()
        #: Set when a write removed indexed text (a deleted or changed note): the writer
        #: then scrubs it from the file (:func:`memmw.store.sqlite.db.scrub_deleted`).
        self.removed_text = False

    # -- meta ------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        """A meta value, or None."""
        row = self.conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        """Insert or replace a meta value."""
        self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    def generation(self) -> int:
        """Counter bumped by every sync that changed the index."""
        value = self.get_meta("generation")
        return int(value) if value else 0

    def bump_generation(self) -> int:
        """Increment and return the generation (inside the caller's transaction)."""
        gen = self.generation() + 1
        self.set_meta("generation", str(gen))
        self.set_meta("last_sync", repr(time.time()))
        return gen

    # -- files -----------------------------------------------------------------------
    def file_records(self, source: str) -> dict[str, tuple[str, float, int]]:
        """``{path: (hash, mtime, size)}`` of the indexed files of ``source``."""
        rows = self.conn.execute(
            "SELECT path, hash, mtime, size FROM files WHERE source=?", (source,)
        )
        return {path: (h, float(mtime), int(size)) for path, h, mtime, size in rows}

    def update_file_stat(self, path: str, source: str, *, mtime: float, size: int) -> None:
        """Record a file's new mtime and size when its indexed content did not change."""
        self.conn.execute(
            "UPDATE files SET mtime=?, size=? WHERE path=? AND source=?",
            (mtime, size, path, source),
        )

    def delete_file(self, path: str, source: str) -> None:
        """Remove a file and everything derived from it."""
        self.removed_text = True
        self._delete_chunks(
            [
                r
                for (r,) in self.conn.execute(
                    "SELECT c.rowid FROM chunks c JOIN files f ON f.id=c.file_id"
                    " WHERE f.path=? AND f.source=?",
                    (path, source),
                )
            ],
            source,
        )
        self.conn.execute("DELETE FROM files WHERE path=? AND source=?", (path, source))

    def _delete_chunks(self, rowids: Sequence[int], source: str) -> None:
        """Delete chunks of ``source`` with their postings, FTS rows and (by cascade) the rest."""
        if rowids:
            self.removed_text = True
        for start in range(0, len(rowids), 500):
            part = rowids[start : start + 500]
            marks = ",".join("?" * len(part))
            for rowid, blob, length in self.conn.execute(
                "SELECT c.rowid, t.hashes, c.n_terms FROM chunks c"
                f" JOIN chunk_terms t ON t.chunk_rowid=c.rowid WHERE c.rowid IN ({marks})",
                part,
            ):
                # The chunk's distinct terms name the postings it is in.
                self.postings_buffer.remove(
                    source, rowid, np.frombuffer(blob, dtype="<i8"), length
                )
            if self.fts:
                self.conn.execute(f"DELETE FROM chunks_fts WHERE rowid IN ({marks})", part)
            self.conn.execute(f"DELETE FROM chunks WHERE rowid IN ({marks})", part)

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
        """Write a file's record and chunks, replacing what it had. Returns the chunk rowids.

        A chunk the file already had (same id, so same lines and text, and the same line
        map and importance) keeps its row, rowid and vector: a note that grew by a line
        rewrites its last chunks, not all of them (nor the postings of all their terms).
        """
        row = self.conn.execute(
            "SELECT id FROM files WHERE path=? AND source=?", (path, source)
        ).fetchone()
        old: dict[str, tuple[int, str | None, int | None]] = {}
        if row is None:
            cur = self.conn.execute(
                "INSERT INTO files(path, source, hash, mtime, size, decay_ts)"
                " VALUES (?,?,?,?,?,?)",
                (path, source, file_hash, mtime, size, decay_ts),
            )
            file_id = cur.lastrowid
        else:
            file_id = int(row[0])
            self.conn.execute(
                "UPDATE files SET hash=?, mtime=?, size=?, decay_ts=? WHERE id=?",
                (file_hash, mtime, size, decay_ts, file_id),
            )
            # The graph rows go with the old content (the caller writes the new ones).
            graph.clear_file(self.conn, file_id)
            old = {
                cid: (rowid, line_map, importance)
                for rowid, cid, line_map, importance in self.conn.execute(
                    "SELECT rowid, id, line_map, importance FROM chunks WHERE file_id=?",
                    (file_id,),
                )
            }
        # Pieces of one long line with the same text share lines and hash, hence the id;
        # one copy serves search equally well (the reference upserts).
        unique: dict[str, Chunk] = {}
        for chunk in chunks:
            unique.setdefault(chunk_id(source, path, chunk, model), chunk)
        kept = {
            cid: old[cid][0]
            for cid, chunk in unique.items()
            if cid in old and old[cid][1:] == (_line_map_json(chunk), chunk.importance)
        }
        self._delete_chunks([r for cid, (r, _, _) in old.items() if cid not in kept], source)
        now = time.time()
        # The rowids AUTOINCREMENT would hand out, given up front so the rows of the whole
        # file go in by one executemany each (chunk rowids are never reused: the next
        # one follows the largest ever handed out).
        (last,) = self.conn.execute(
            "SELECT MAX(COALESCE((SELECT seq FROM sqlite_sequence WHERE name='chunks'), 0),"
            " COALESCE((SELECT MAX(rowid) FROM chunks), 0))"
        ).fetchone()
        rowids: list[int] = []
        new = 0
        chunk_rows: list[tuple[Any, ...]] = []
        term_rows: list[tuple[int, bytes]] = []
        fts_rows: list[tuple[int, str]] = []
        for cid, chunk in unique.items():
            if cid in kept:
                rowids.append(kept[cid])
                continue
            new += 1
            rowid = last + new
            hashes, tf, n_terms = term_counts(chunk.text)
            rowids.append(rowid)
            chunk_rows.append(
                (
                    rowid,
                    cid,
                    file_id,
                    path,
                    source,
                    chunk.start_line,
                    chunk.end_line,
                    chunk.hash,
                    model,
                    chunk.text,
                    _line_map_json(chunk),
                    chunk.importance,
                    b"",  # the hashes live in chunk_terms (see schema migration 3)
                    n_terms,
                    now,
                )
            )
            term_rows.append((rowid, np.sort(hashes).astype("<i8").tobytes()))
            self.postings_buffer.add(source, rowid, hashes, tf, n_terms)
            if self.fts:
                fts_rows.append((rowid, fts_body(chunk.text, self.fts_tokenizer)))
        self.conn.executemany(
            "INSERT INTO chunks(rowid, id, file_id, path, source, start_line, end_line, hash,"
            " model, text, line_map, importance, terms, n_terms, updated_at)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            chunk_rows,
        )
        self.conn.executemany(
            "INSERT INTO chunk_terms(chunk_rowid, hashes) VALUES (?, ?)", term_rows
        )
        if fts_rows:
            self.conn.executemany("INSERT INTO chunks_fts(rowid, body) VALUES (?, ?)", fts_rows)
        if self.postings_buffer.size >= FLUSH_AT:
            # Bounds the memory: a rebuild's buffer holds back each term's short tail.
            self.postings_buffer.flush(SqliteSegments(self.conn), carry=True)
        return rowids

    def flush_postings(self) -> None:
        """Write the buffered postings changes (before the write transaction commits)."""
        self.postings_buffer.flush(SqliteSegments(self.conn))

    # -- reads -----------------------------------------------------------------------
    def chunks(self, rowids: Sequence[int]) -> dict[int, ChunkRow]:
        """Chunks by rowid (missing ids are absent from the result)."""
        out: dict[int, ChunkRow] = {}
        ids = list(rowids)
        for start in range(0, len(ids), 500):
            part = ids[start : start + 500]
            marks = ",".join("?" * len(part))
            for row in self.conn.execute(
                f"SELECT {_CHUNK_COLUMNS} FROM chunks c JOIN files f ON f.id=c.file_id"
                f" LEFT JOIN chunk_terms t ON t.chunk_rowid=c.rowid WHERE c.rowid IN ({marks})",
                part,
            ):
                out[row[0]] = _chunk_row(row)
        return out

    def postings(
        self, term_hashes: Sequence[int], sources: Sequence[str], arena: Arena = FRESH
    ) -> dict[int, TermPostings]:
        """Each term's live postings over ``sources``, rowid ascending (absent: none),
        decoded into ``arena``'s memory."""
        if self.postings_buffer.pending:
            self.flush_postings()  # a writer reading its own transaction
        return read_postings(self.conn, term_hashes, sources, arena)

    def keyword_stats(self, sources: Sequence[str]) -> tuple[int, float]:
        """``(live chunks, total terms)`` of ``sources``: the BM25 collection statistics."""
        if self.postings_buffer.pending:
            self.flush_postings()
        chunks, length = read_stats(self.conn, sources)
        return chunks, float(length)

    def chunk_rowids(self, sources: Sequence[str]) -> list[int]:
        """Rowids of every chunk of ``sources``, ascending."""
        marks = ",".join("?" * len(sources))
        return [
            r[0]
            for r in self.conn.execute(
                f"SELECT rowid FROM chunks WHERE source IN ({marks}) ORDER BY rowid",
                tuple(sources),
            )
        ]

    def chunk_count(self, sources: Sequence[str]) -> int:
        """Chunks of ``sources``."""
        marks = ",".join("?" * len(sources))
        row = self.conn.execute(
            f"SELECT COUNT(*) FROM chunks WHERE source IN ({marks})", tuple(sources)
        ).fetchone()
        return int(row[0])

    def fts_search(
        self, terms: Sequence[str], limit: int, sources: Sequence[str], *, require_all: bool
    ) -> list[tuple[int, float]]:
        """``(rowid, bm25 rank)`` of an FTS5 MATCH of the quoted terms, best first."""
        match = (" AND " if require_all else " OR ").join(fts_quote(t) for t in terms)
        marks = ",".join("?" * len(sources))
        return self.conn.execute(
            "SELECT f.rowid, bm25(chunks_fts) AS rank FROM chunks_fts f"
            " JOIN chunks c ON c.rowid=f.rowid"
            f" WHERE chunks_fts MATCH ? AND c.source IN ({marks}) ORDER BY rank LIMIT ?",
            (match, *sources, limit),
        ).fetchall()

    def substring_counts(
        self, needles: Sequence[str], limit: int, sources: Sequence[str]
    ) -> list[tuple[int, int]]:
        """``(rowid, how many of needles occur in the text)``, most first (a full scan).

        For what the trigram tokenizer cannot MATCH: strings under three characters.
        """
        if not needles:
            return []
        patterns = [
            "%" + n.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            for n in needles
        ]
        found = " + ".join("(c.text LIKE ? ESCAPE '\\')" for _ in patterns)
        marks = ",".join("?" * len(sources))
        return self.conn.execute(
            f"SELECT rowid, n FROM (SELECT c.rowid AS rowid, {found} AS n FROM chunks c"
            f" WHERE c.source IN ({marks})) WHERE n > 0 ORDER BY n DESC, rowid LIMIT ?",
            (*patterns, *sources, limit),
        ).fetchall()

    def newest_decay_ts(self) -> float | None:
        """The newest dated memory (epoch seconds), the reference age for decay."""
        row = self.conn.execute("SELECT MAX(decay_ts) FROM files").fetchone()
        return None if row is None or row[0] is None else float(row[0])

    def counts(self) -> dict[str, dict[str, int]]:
        """``{source: {"files": n, "chunks": n}}``."""
        out: dict[str, dict[str, int]] = {}
        for source, n in self.conn.execute("SELECT source, COUNT(*) FROM files GROUP BY source"):
            out.setdefault(source, {"files": 0, "chunks": 0})["files"] = n
        for source, n in self.conn.execute("SELECT source, COUNT(*) FROM chunks GROUP BY source"):
            out.setdefault(source, {"files": 0, "chunks": 0})["chunks"] = n
        return out

    # -- protocol: meta, identity, files ---------------------------------------------
    # (StoreReader / StoreWriter of memmw.store.protocol over this connection.)
    def identity(self) -> dict[str, Any] | None:
        """The stored index identity, or None before the first build (or if unreadable)."""
        raw = self.get_meta("identity")
        if not raw:
            return None
        try:
            data = json.loads(raw)
        except ValueError:
            return None
        return data if isinstance(data, dict) else None

    def set_identity(self, identity: Mapping[str, Any]) -> None:
        """Record the index identity."""
        self.set_meta("identity", json.dumps(dict(identity), sort_keys=True))

    def delete_meta(self, key: str) -> None:
        """Remove a meta value."""
        self.conn.execute("DELETE FROM meta WHERE key=?", (key,))

    def sources_present(self) -> set[str]:
        """Sources with at least one indexed file."""
        return {r[0] for r in self.conn.execute("SELECT DISTINCT source FROM files")}

    @contextlib.contextmanager
    def transaction(self) -> Iterator[IndexStore]:
        """One write transaction (``BEGIN IMMEDIATE``; a savepoint when one is open).

        Buffered postings land before it commits. A block that raises leaves nothing in
        the buffer for the writer's next transaction: it starts empty (postings pending
        from an enclosing transaction are written first) and is emptied on the rollback.
        """
        nested = self.conn.in_transaction
        if nested:
            self.flush_postings()
        try:
            with savepoint(self.conn) if nested else transaction(self.conn):
                yield self
                self.flush_postings()
                vsql.flush_blocks(self.conn)
        except BaseException:
            self.postings_buffer.clear()
            raise

    # -- protocol: vectors and the embedding cache -----------------------------------
    def vector_rows(self, sources: Sequence[str]) -> list[tuple[int, bytes]]:
        """``(rowid, blob)`` of every stored vector of ``sources``."""
        return vsql.vector_rows(self.conn, sources)

    def vector_matrix(self, sources: Sequence[str], dims: int | None) -> VectorMatrix:
        """Every stored vector of ``sources`` (``dims`` long when given), read by blocks."""
        if not dims:
            return VectorMatrix(self.vector_rows(sources), dims)
        return vsql.load_matrix(self.conn, sources, dims)

    def vector_centroid(self, sources: Sequence[str]) -> tuple[np.ndarray, int] | None:
        """``(mean, count)`` of the stored unit vectors of ``sources``; None when none."""
        return centroid_of(self.vector_rows(sources))

    def vector_index(
        self, sources: Sequence[str], dims: int | None, cache: VectorCache, *, calibrate: bool
    ) -> VectorIndex | None:
        """sqlite-vec's KNN with ``store.vector_backend = "sqlite-vec"``, else the matrix."""
        return choose_vector_index(
            self, sources, dims, cache, calibrate=calibrate, knn=self.vec0 is not None, hnsw=False
        )

    def warm_vectors(self, sources: Sequence[str], dims: int | None, cache: VectorCache) -> None:
        """Load the matrix (sqlite-vec keeps its own table: nothing to load)."""
        if self.vec0 is None:
            cache.matrix(self, sources, dims)

    def nearest(
        self, vector: Sequence[float], k: int, sources: Sequence[str]
    ) -> list[tuple[int, float]]:
        """The ``k`` nearest stored vectors by cosine, best first (ties by rowid)."""
        query = np.asarray(vector, dtype=np.float32)
        if self.vec0 is not None:
            return self._nearest_vec0(query, k, sources)
        matrix = self.vector_matrix(sources, len(query))
        norm = float(np.linalg.norm(query))
        if not len(matrix) or norm == 0.0 or k < 1:
            return []
        return matrix.search(query / norm, k)

    def _nearest_vec0(
        self, query: np.ndarray, k: int, sources: Sequence[str]
    ) -> list[tuple[int, float]]:
        assert self.vec0 is not None
        index = self.vec0()
        identity = self.identity() or {}
        dims = identity.get("vectorDims")
        if not dims:
            return []
        index.refresh(int(dims))
        allowed = None
        if not self.sources_present() <= set(sources):
            allowed = self.chunk_rowids(sources)
        norm = float(np.linalg.norm(query))
        return [] if norm == 0.0 else index.search(query / norm, k, allowed)

    def vector_stats(self) -> VectorStats:
        """Vector, pending and cache figures."""
        return VectorStats(
            vectors=vsql.vector_count(self.conn),
            pending=vsql.pending_count(self.conn),
            cache_entries=vsql.cache_count(self.conn),
            bytes_by_source=vsql.vector_bytes_by_source(self.conn),
        )

    def pending_count(self) -> int:
        """Chunks without a vector."""
        return vsql.pending_count(self.conn)

    def pending_chunks(self, after: int, limit: int) -> list[tuple[int, str, str]]:
        """``(rowid, hash, text)`` of chunks without a vector past ``after``."""
        return vsql.pending_chunks(self.conn, after, limit)

    def cached_embeddings(
        self, provider: str, model: str, provider_key: str, hashes: Sequence[str]
    ) -> dict[str, bytes]:
        """Cached vectors by chunk hash."""
        return vsql.cached_embeddings(self.conn, provider, model, provider_key, hashes)

    def cache_count(self) -> int:
        """Rows in the embedding cache."""
        return vsql.cache_count(self.conn)

    def put_embeddings(
        self, provider: str, model: str, provider_key: str, vectors: Mapping[str, bytes]
    ) -> None:
        """Cache vectors by chunk hash."""
        vsql.put_embeddings(self.conn, provider, model, provider_key, vectors)

    def write_vectors(self, rows: Sequence[tuple[int, str, bytes]]) -> int:
        """Store vectors of chunks that still have that hash."""
        return vsql.write_vectors(self.conn, rows)

    def bump_vector_generation(self) -> int:
        """Increment the vector generation."""
        return vsql.bump_vector_generation(self.conn)

    def prune_embedding_cache(self, max_entries: int, batch: int) -> int:
        """Delete the oldest cache rows above ``max_entries`` (at most ``batch``)."""
        return vsql.prune_cache(self.conn, max_entries, batch)

    # -- protocol: knowledge graph ---------------------------------------------------
    def graph_rows(self) -> GraphRows:
        """Every graph row."""
        return graph.read_rows(self.conn)

    def replace_note_graph(
        self, *, path: str, source: str, note: ParsedNote | None, fresh: bool = False
    ) -> None:
        """Replace one file's graph rows with ``note``."""
        graph.write_note(self.conn, path=path, source=source, text="", parsed=note, fresh=fresh)

    def refresh_graph(self) -> None:
        """Supersession, co-occurrences and seeded activation."""
        graph.refresh_supersession(self.conn)
        graph.refresh_cooccurrences(self.conn, self.postings)
        graph.seed_activation(self.conn)

    def decay_activation(self) -> None:
        """The daily activation decay."""
        graph.decay_activation(self.conn)

    def bump_activation(self, keys: Iterable[str], amount: float) -> None:
        """Raise the activation of entries."""
        graph.bump_activation(self.conn, keys, amount=amount)
