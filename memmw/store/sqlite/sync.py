"""The SQLite side of a sync: staged full rebuilds, orphan clean-up, quarantine of a damaged file."""

from __future__ import annotations

import contextlib
import glob
import logging
import os
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

from memmw.errors import IndexCorruptError
from memmw.store.segments import PostingsBuffer
from memmw.store.sqlite import graph as graph_index
from memmw.store.sqlite.db import quarantine, transaction
from memmw.store.sqlite.schema import migrate
from memmw.store.sqlite.store import IndexStore

log = logging.getLogger(__name__)


@contextlib.contextmanager
def staged_rebuild(
    db_path: Path, live_store: IndexStore, fts_tokenizer: str, *, fts: bool = False
) -> Iterator[IndexStore]:
    """A full rebuild built in a temporary database and copied over the live one on success.

    The staged index starts with what survives a rebuild (embedding cache, activation,
    the chunk rowid sequence, the generation counter) and a new ``epoch``. When the
    block exits cleanly it is copied over the live database in one write transaction
    (readers see old or new, never a mix; a crash leaves the old index); when it
    raises, it is dropped and the live index is untouched.
    """
    live = live_store.conn
    tmp_path = db_path.with_name(f"{db_path.name}.tmp-{uuid.uuid4().hex[:12]}")
    tmp = sqlite3.connect(str(tmp_path), isolation_level=None)
    try:
        tmp.execute("PRAGMA synchronous=OFF")
        # The copy needs the live file's page size (a WAL database keeps its own).
        (page_size,) = live.execute("PRAGMA page_size").fetchone()
        tmp.execute(f"PRAGMA page_size={int(page_size)}")
        migrate(tmp, fts_tokenizer)
        store = IndexStore(tmp, fts_tokenizer=fts_tokenizer, fts=fts)
        # An empty database: postings are only ever appended (no read-back).
        store.postings_buffer = PostingsBuffer(bulk=True)
        old_generation = live_store.generation()
        with transaction(tmp):
            # Seed the new index with the old embedding cache: a rebuild re-embeds
            # nothing that is already cached.
            tmp.executemany(
                "INSERT OR IGNORE INTO embedding_cache VALUES (?,?,?,?,?,?,?)",
                live.execute("SELECT * FROM embedding_cache"),
            )
            # Activation is use, not content: it survives a rebuild like the cache.
            graph_index.copy_activation(live, tmp)
            # Continue the live rowid sequence so a chunk rowid is never reused, even
            # across a rebuild (caches of other processes rely on it).
            seq = live.execute("SELECT seq FROM sqlite_sequence WHERE name='chunks'").fetchone()
            if seq is not None:
                tmp.execute("INSERT INTO sqlite_sequence(name, seq) VALUES ('chunks', ?)", seq)
            store.set_meta("generation", str(old_generation))
            store.set_meta("epoch", uuid.uuid4().hex)
        yield store
        # One write transaction on the live database: readers see old or new, never
        # a mix, and a crash in the middle leaves the old index.
        tmp.backup(live)
    finally:
        tmp.close()
        for suffix in ("", "-journal", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{tmp_path}{suffix}")


def quarantine_damaged(db_path: Path, reason: str) -> str:
    """Move a damaged index aside for inspection; returns its new name.

    Raises:
        IndexCorruptError: it could not be moved.
    """
    try:
        aside = quarantine(db_path)
    except OSError as move_exc:
        raise IndexCorruptError(
            f"the index {db_path} is damaged ({reason}) and could not be "
            f"moved aside ({move_exc.strerror or move_exc}); delete it or run "
            "'memmw reset', then 'memmw index' to rebuild it from the notes"
        ) from move_exc
    return aside.name


def remove_orphans(db_path: Path) -> None:
    """Delete temporary databases left by a crashed rebuild (the caller holds the writer lock)."""
    for leftover in glob.glob(glob.escape(str(db_path)) + ".tmp-*"):
        try:
            os.unlink(leftover)
            log.info("removed orphaned temporary index %s", leftover)
        except OSError:
            pass
