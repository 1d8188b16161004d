"""Row-level operations on one index database (the store of record for search)."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from memmw.store.terms import pack_terms, unpack_terms
from memmw.text.analysis import terms
from memmw.text.chunking import Chunk


@dataclass(frozen=True, kw_only=True)
class ChunkRow:
    """A chunk as stored, with what ranking and snippets need."""

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
    terms_blob: bytes = b""

    def term_set(self) -> frozenset[int]:
        """The chunk's distinct term hashes (for similarity between chunks)."""
        return frozenset(unpack_terms(self.terms_blob)["h"].tolist())

    def piece_lines(self) -> list[int]:
        """Line number of each ``\\n``-separated piece of ``text``."""
        if self.line_map is not None:
            return list(self.line_map)
        return list(range(self.start_line, self.start_line + self.text.count("\n") + 1))


_CHUNK_COLUMNS = (
    "c.rowid, c.id, c.path, c.source, c.start_line, c.end_line, c.text, c.line_map, "
    "c.importance, c.n_terms, f.decay_ts, c.terms"
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
        terms_blob=row[11],
    )


def chunk_id(source: str, path: str, chunk: Chunk, model: str) -> str:
    """Stable chunk id: sha256 of ``source:path:start:end:hash:model``."""
    import hashlib

    key = f"{source}:{path}:{chunk.start_line}:{chunk.end_line}:{chunk.hash}:{model}"
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def fts_body(text: str, tokenizer: str) -> str:
    """What the FTS5 column holds: memmw's terms (unicode61) or the raw text (trigram)."""
    return text if tokenizer == "trigram" else " ".join(terms(text))


class IndexStore:
    """Reads and writes of one index database through one connection.

    The store knows nothing of ranking; a second backend (for example PostgreSQL) would
    implement the same methods.
    """

    def __init__(self, conn: sqlite3.Connection, *, fts_tokenizer: str = "unicode61") -> None:
        self.conn = conn
        self.fts_tokenizer = fts_tokenizer

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
        ids = [
            r[0]
            for r in self.conn.execute(
                "SELECT c.rowid FROM chunks c JOIN files f ON f.id=c.file_id WHERE f.path=? AND f.source=?",
                (path, source),
            )
        ]
        self._delete_fts(ids)
        self.conn.execute("DELETE FROM files WHERE path=? AND source=?", (path, source))

    def _delete_fts(self, rowids: Iterable[int]) -> None:
        self.conn.executemany("DELETE FROM chunks_fts WHERE rowid=?", ((r,) for r in rowids))

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
        """Write a file's record and chunks, replacing what it had. Returns the chunk rowids."""
        self.delete_file(path, source)
        cur = self.conn.execute(
            "INSERT INTO files(path, source, hash, mtime, size, decay_ts) VALUES (?,?,?,?,?,?)",
            (path, source, file_hash, mtime, size, decay_ts),
        )
        file_id = cur.lastrowid
        now = time.time()
        rowids: list[int] = []
        written: set[str] = set()
        for chunk in chunks:
            cid = chunk_id(source, path, chunk, model)
            if cid in written:
                # Pieces of one long line with the same text share lines and hash, hence
                # the id; one copy serves search equally well (the reference upserts).
                continue
            written.add(cid)
            blob, n_terms = pack_terms(chunk.text)
            cur = self.conn.execute(
                "INSERT INTO chunks(id, file_id, path, source, start_line, end_line, hash, model,"
                " text, line_map, importance, terms, n_terms, updated_at)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    cid,
                    file_id,
                    path,
                    source,
                    chunk.start_line,
                    chunk.end_line,
                    chunk.hash,
                    model,
                    chunk.text,
                    json.dumps(chunk.line_map) if chunk.line_map else None,
                    chunk.importance,
                    blob,
                    n_terms,
                    now,
                ),
            )
            assert cur.lastrowid is not None
            rowids.append(cur.lastrowid)
            self.conn.execute(
                "INSERT INTO chunks_fts(rowid, body) VALUES (?, ?)",
                (cur.lastrowid, fts_body(chunk.text, self.fts_tokenizer)),
            )
        return rowids

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
                f" WHERE c.rowid IN ({marks})",
                part,
            ):
                out[row[0]] = _chunk_row(row)
        return out

    def term_blobs(self, sources: Sequence[str], *, after: int = 0) -> list[tuple[int, bytes, int]]:
        """``(rowid, terms blob, n_terms)`` of the chunks of ``sources`` with rowid > ``after``."""
        marks = ",".join("?" * len(sources))
        return self.conn.execute(
            "SELECT rowid, terms, n_terms FROM chunks"
            f" WHERE source IN ({marks}) AND rowid > ? ORDER BY rowid",
            (*sources, after),
        ).fetchall()

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

    def fts_search(self, match: str, limit: int, sources: Sequence[str]) -> list[tuple[int, float]]:
        """``(rowid, bm25 rank)`` for an FTS5 MATCH expression, best first."""
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
