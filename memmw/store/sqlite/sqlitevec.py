"""Optional KNN through the sqlite-vec extension (needs an extension-capable sqlite3 module)."""

from __future__ import annotations

import importlib
import logging
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from memmw.workspace.locks import exclusive_lock

log = logging.getLogger(__name__)

#: sqlite3-compatible modules tried in order; the stdlib one often cannot load extensions.
CANDIDATE_MODULES = ("sqlite3", "sqlean", "pysqlite3")


def _loadable_module() -> tuple[ModuleType | None, str]:
    try:
        import sqlite_vec  # noqa: F401
    except ImportError:
        return None, "sqlite-vec is not installed (pip install 'memmw[vec]')"
    reasons = []
    for name in CANDIDATE_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            reasons.append(f"{name}: not installed")
            continue
        conn = module.connect(":memory:")
        try:
            if not hasattr(conn, "enable_load_extension"):
                reasons.append(f"{name}: cannot load extensions")
                continue
            return module, f"sqlite-vec loaded through the {name} module"
        finally:
            conn.close()
    return None, "no sqlite3 module here can load extensions (" + "; ".join(reasons) + ")"


def sqlite_vec_status() -> tuple[bool, str]:
    """Whether sqlite-vec can be used here, and why (not)."""
    module, reason = _loadable_module()
    return module is not None, reason


class SqliteVecIndex:
    """A ``vec0`` table derived from ``chunk_vectors``, refreshed lazily by set difference.

    Writers never touch it (they may use a sqlite3 module without the extension); the
    searching process brings it up to date under the writer lock when the vectors changed.
    """

    def __init__(self, db_path: Path, lock_path: Path) -> None:
        module, reason = _loadable_module()
        if module is None:
            raise RuntimeError(reason)
        import sqlite_vec

        self.db_path = db_path
        self.lock_path = lock_path
        self.conn: Any = module.connect(str(db_path), check_same_thread=False, isolation_level=None)
        self.conn.execute("PRAGMA busy_timeout=5000")
        self.conn.enable_load_extension(True)
        sqlite_vec.load(self.conn)
        self.conn.enable_load_extension(False)

    def close(self) -> None:
        """Close the extension connection."""
        self.conn.close()

    def _meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def refresh(self, dims: int) -> None:
        """Create or update the ``vec0`` table to match ``chunk_vectors``."""
        state = (
            f"{self._meta('epoch')}:{self._meta('generation')}:"
            f"{self._meta('vector_generation')}:{dims}"
        )
        if self._meta("vec0_state") == state:
            return
        with exclusive_lock(self.lock_path):
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                if self._meta("vec0_dims") != str(dims):
                    self.conn.execute("DROP TABLE IF EXISTS chunks_vec")
                    self.conn.execute(
                        "CREATE VIRTUAL TABLE chunks_vec USING vec0("
                        f"embedding float[{dims}] distance_metric=cosine)"
                    )
                    self.conn.execute(
                        "INSERT OR REPLACE INTO meta(key, value) VALUES ('vec0_dims', ?)",
                        (str(dims),),
                    )
                self.conn.execute(
                    "DELETE FROM chunks_vec WHERE rowid NOT IN (SELECT chunk_rowid FROM chunk_vectors)"
                )
                self.conn.execute(
                    "INSERT INTO chunks_vec(rowid, embedding) SELECT chunk_rowid, embedding"
                    " FROM chunk_vectors WHERE LENGTH(embedding) = ? AND chunk_rowid NOT IN"
                    " (SELECT rowid FROM chunks_vec)",
                    (dims * 4,),
                )
                self.conn.execute(
                    "INSERT OR REPLACE INTO meta(key, value) VALUES ('vec0_state', ?)", (state,)
                )
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")

    def search(
        self, query: np.ndarray, limit: int, allowed: Sequence[int] | None = None
    ) -> list[tuple[int, float]]:
        """Top ``limit`` ``(rowid, cosine)`` by ``MATCH ... AND k = ?``.

        ``allowed`` (rowids of the searched sources) filters the answer; the query asks
        for more neighbours when filtering.
        """
        k = limit if allowed is None else limit * 4
        try:
            rows = self.conn.execute(
                "SELECT rowid, distance FROM chunks_vec WHERE embedding MATCH ? AND k = ?",
                (query.astype("<f4").tobytes(), k),
            ).fetchall()
        except Exception as exc:  # pragma: no cover - the module's own Error class
            log.warning("sqlite-vec search failed: %s", exc)
            return []
        keep = None if allowed is None else set(allowed)
        out = [(int(r), 1.0 - float(d)) for r, d in rows if keep is None or int(r) in keep]
        return out[:limit]
