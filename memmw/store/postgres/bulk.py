"""Bulk writes of the PostgreSQL store: a staged rebuild's postings in one sorted COPY, vectors by COPY."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import psycopg

#: Postings formatted per COPY write (bounds the text held at once).
COPY_SLICE = 100_000
#: Temporary (session-local, never logged) table the vectors of one write are copied into.
VECTOR_STAGE = "memmw_vector_stage"


@dataclass
class _Part:
    """The postings and statistics one ``replace_file`` added."""

    source: str
    rowids: np.ndarray
    hashes: np.ndarray
    tf: np.ndarray
    doc_len: np.ndarray
    docs: int
    length: int


@dataclass
class StagedPostings:
    """The postings of a staged rebuild, written at the end sorted by key in one COPY.

    A rebuild writes millions of postings. Copied file by file, each lands at a random
    place of the primary key's B-tree (keyed by term), which costs a page visit and
    write-ahead log per posting; sorted and copied at once, the B-tree is filled left to
    right. The buffer holds 24 bytes a posting (about 60 MB for 25k chunks) until the
    rebuild commits, like the SQLite store's bulk postings.

    Savepoints: ``mark`` before one and ``rollback(mark)`` when it rolls back drop what was
    added inside it, and what a flush inside it wrote (rolled back in the server) is
    written again by the next flush.
    """

    parts: list[_Part] = field(default_factory=list)
    #: Parts ``[0, flushed)`` are in the database.
    flushed: int = 0
    #: ``(path, source)`` of files written during the rebuild (a second write replaces).
    paths: set[tuple[str, str]] = field(default_factory=set)

    def add(
        self,
        source: str,
        counted: Sequence[tuple[int, np.ndarray, np.ndarray, int]],
    ) -> None:
        """The ``(rowid, term hashes, counts, length)`` of one file's new chunks."""
        if not counted:
            return
        sizes = [len(h) for _, h, _, _ in counted]
        self.parts.append(
            _Part(
                source=source,
                rowids=np.repeat(
                    np.asarray([r for r, _, _, _ in counted], dtype=np.int64), sizes
                ),
                hashes=np.concatenate([h for _, h, _, _ in counted]).astype(np.int64),
                tf=np.concatenate([t for _, _, t, _ in counted]).astype(np.int32),
                doc_len=np.repeat(
                    np.asarray([n for _, _, _, n in counted], dtype=np.int32), sizes
                ),
                docs=len(counted),
                length=sum(n for _, _, _, n in counted),
            )
        )

    @property
    def pending(self) -> bool:
        """True when parts wait for ``flush``."""
        return self.flushed < len(self.parts)

    def mark(self) -> tuple[int, int]:
        """The state to return to if the savepoint opened now rolls back."""
        return len(self.parts), self.flushed

    def rollback(self, mark: tuple[int, int]) -> None:
        """Forget what was added since ``mark``; re-queue what was flushed since."""
        added, flushed = mark
        del self.parts[added:]
        self.flushed = min(self.flushed, flushed)

    def flush(self, conn: psycopg.Connection[Any], namespace_id: int) -> None:
        """Write the pending parts: postings sorted by key in one COPY, then the statistics."""
        pending = self.parts[self.flushed :]
        if not pending:
            return
        by_source: dict[str, list[_Part]] = {}
        for part in pending:
            by_source.setdefault(part.source, []).append(part)
        for source, parts in sorted(by_source.items()):
            hashes = np.concatenate([p.hashes for p in parts])
            rowids = np.concatenate([p.rowids for p in parts])
            tf = np.concatenate([p.tf for p in parts])
            doc_len = np.concatenate([p.doc_len for p in parts])
            order = np.lexsort((rowids, hashes))
            with conn.cursor() as cur, cur.copy(
                "COPY memmw.postings (namespace_id, term_hash, chunk_rowid, source, tf, doc_len)"
                " FROM STDIN"
            ) as copy:
                # Formatted a slice at a time: the text of millions of rows at once is large.
                for at in range(0, len(order), COPY_SLICE):
                    rows = order[at : at + COPY_SLICE]
                    copy.write(
                        _copy_text(namespace_id, source, hashes[rows], rowids[rows],
                                   tf[rows], doc_len[rows])
                    )
            conn.execute(
                "INSERT INTO memmw.source_stats (namespace_id, source, n_docs, total_len)"
                " VALUES (%s, %s, %s, %s) ON CONFLICT (namespace_id, source) DO UPDATE"
                " SET n_docs = memmw.source_stats.n_docs + excluded.n_docs,"
                " total_len = memmw.source_stats.total_len + excluded.total_len",
                (namespace_id, source, sum(p.docs for p in parts), sum(p.length for p in parts)),
            )
        self.flushed = len(self.parts)


def _copy_text(
    namespace_id: int,
    source: str,
    hashes: np.ndarray,
    rowids: np.ndarray,
    tf: np.ndarray,
    doc_len: np.ndarray,
) -> bytes:
    """COPY text rows, formatted in bulk (``write_row`` per posting is the slow part)."""
    if not len(hashes):
        return b""
    # The source goes through COPY's text escaping (backslash, tab, newline).
    escaped = (
        source.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    )
    prefix = f"{namespace_id}\t"
    middle = f"\t{escaped}\t"
    lines = [
        f"{prefix}{h}\t{r}{middle}{t}\t{d}\n"
        for h, r, t, d in zip(
            hashes.tolist(), rowids.tolist(), tf.tolist(), doc_len.tolist(), strict=True
        )
    ]
    return "".join(lines).encode("utf-8")


def copy_vectors(
    conn: psycopg.Connection[Any], namespace_id: int, rows: Sequence[tuple[int, str, bytes]]
) -> int:
    """Store ``(rowid, chunk hash, blob)`` where the chunk still has that hash; returns how many.

    One binary COPY into a temporary table and one statement that keeps the rows whose
    chunk still has the hash (a sync may have replaced it meanwhile), instead of one
    statement per vector. Call inside a transaction.
    """
    from pgvector import Vector

    # The last vector of a chunk wins (one statement may not update a row twice).
    latest = {int(rowid): (digest, blob) for rowid, digest, blob in rows}
    conn.execute(
        f"CREATE TEMPORARY TABLE IF NOT EXISTS {VECTOR_STAGE}"
        " (chunk_rowid bigint NOT NULL, hash text NOT NULL, dims integer NOT NULL,"
        " embedding vector NOT NULL)"
    )
    # TRUNCATE, not ON COMMIT: several writes may share one outer transaction.
    conn.execute(f"TRUNCATE {VECTOR_STAGE}")
    with conn.cursor() as cur, cur.copy(
        f"COPY {VECTOR_STAGE} (chunk_rowid, hash, dims, embedding) FROM STDIN (FORMAT BINARY)"
    ) as copy:
        copy.set_types(["int8", "text", "int4", "vector"])
        for rowid, (digest, blob) in latest.items():
            copy.write_row(
                (rowid, digest, len(blob) // 4, Vector(np.frombuffer(blob, dtype="<f4")))
            )
    cur2 = conn.execute(
        "INSERT INTO memmw.chunk_vectors (chunk_rowid, namespace_id, source, dims, embedding)"
        f" SELECT c.rowid, c.namespace_id, c.source, s.dims, s.embedding FROM {VECTOR_STAGE} s"
        " JOIN memmw.chunks c ON c.rowid = s.chunk_rowid AND c.hash = s.hash"
        " WHERE c.namespace_id = %s"
        " ON CONFLICT (chunk_rowid) DO UPDATE SET embedding = excluded.embedding,"
        " dims = excluded.dims",
        (namespace_id,),
    )
    return max(cur2.rowcount, 0)
