"""The ``Memory`` facade: one object per agent workspace (sync, search, get, status)."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sqlite3
import threading
from pathlib import Path
from types import TracebackType
from typing import Any

from memmw.config import MemoryConfig, resolve_state_dir, resolve_workspace
from memmw.errors import ConfigError, PathPolicyError
from memmw.index.db import connect, fts5_available, snapshot
from memmw.index.schema import migrate
from memmw.index.store import IndexStore
from memmw.index.sync import FileReadError, Indexer, Progress, read_markdown
from memmw.locks import exclusive_lock
from memmw.search import Searcher
from memmw.text import cut_utf16, utf16_len
from memmw.types import ReadResult, SearchHit, Status, SyncReport
from memmw.workspace import resolve_read_path

log = logging.getLogger(__name__)

_AGENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def default_db_path(state_dir: Path, agent_id: str, template: str | None) -> Path:
    """``store.path`` with ``{agentId}`` replaced, else ``<state_dir>/memory/<agent>.sqlite``."""
    if template:
        return Path(os.path.expanduser(template.replace("{agentId}", agent_id)))
    return state_dir / "memory" / f"{agent_id}.sqlite"


class Memory:
    """Long-term memory of one agent: Markdown files in a workspace plus a derived index.

    Example:
        >>> with Memory(workspace="ws", state_dir="state") as mem:  # doctest: +SKIP
        ...     mem.sync()
        ...     hits = mem.search("where does the gateway run?")

    Args:
        workspace: Folder holding ``MEMORY.md``, ``USER.md`` and ``memory/``
            (default ``$MEMMW_WORKSPACE``, else the current directory).
        state_dir: Where derived state lives (default ``$MEMMW_STATE_DIR``, else ``~/.memmw``).
        agent_id: Names the index file; letters, digits, ``.``, ``_`` and ``-``.
        config: Settings; default loaded from ``<workspace>/memmw.toml`` and ``MEMMW__*``.
        config_file: Explicit TOML file to load when ``config`` is not given.
    """

    def __init__(
        self,
        workspace: str | os.PathLike[str] | None = None,
        state_dir: str | os.PathLike[str] | None = None,
        agent_id: str = "main",
        config: MemoryConfig | None = None,
        *,
        config_file: str | os.PathLike[str] | None = None,
    ) -> None:
        self.workspace = resolve_workspace(workspace).absolute()
        if not self.workspace.is_dir():
            raise ConfigError(f"workspace folder not found: {self.workspace}")
        if not _AGENT_ID.match(agent_id or ""):
            raise ConfigError(
                f"agent_id must be letters, digits, '.', '_' or '-' (max 128); got {agent_id!r}"
            )
        self.agent_id = agent_id
        self.config = config or MemoryConfig.load(workspace=self.workspace, config_file=config_file)
        self.state_dir = resolve_state_dir(state_dir).absolute()
        self.db_path = default_db_path(self.state_dir, agent_id, self.config.store.path)
        self._indexer = Indexer(db_path=self.db_path, workspace=self.workspace, config=self.config)
        self._searcher = Searcher(self.config)
        self._conn: sqlite3.Connection | None = None
        self._conn_inode: int | None = None
        self._lock = threading.RLock()
        self._synced_once = False
        self._closed = False

    # -- lifecycle -------------------------------------------------------------------
    def __enter__(self) -> Memory:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the index connection. The object cannot be used afterwards."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            self._closed = True

    def _reader(self) -> sqlite3.Connection:
        """The read connection, reopened if the index file was replaced or deleted."""
        if self._closed:
            raise ConfigError("this Memory is closed")
        try:
            inode: int | None = os.stat(self.db_path).st_ino
        except FileNotFoundError:
            inode = None
        if self._conn is not None and inode == self._conn_inode and inode is not None:
            return self._conn
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if inode is None:
            self.sync()
            inode = os.stat(self.db_path).st_ino
        conn = connect(self.db_path)
        migrate(conn, self.config.store.fts_tokenizer)
        self._conn, self._conn_inode = conn, inode
        return conn

    def _store(self) -> IndexStore:
        return IndexStore(self._reader(), fts_tokenizer=self.config.store.fts_tokenizer)

    # -- public API ------------------------------------------------------------------
    def sync(self, force: bool = False, *, progress: Progress | None = None) -> SyncReport:
        """Bring the index up to date with the workspace.

        Unchanged files (same sha256) are skipped, removed files dropped, and unreadable,
        binary or non-UTF-8 files reported in ``SyncReport.issues`` while the others index.

        Args:
            force: Rebuild the whole index (atomically; searches keep working meanwhile).
            progress: Optional ``(done, total, path)`` callback.
        """
        report = self._indexer.sync(force=force, progress=progress)
        self._synced_once = True
        return report

    def search(
        self, query: str, max_results: int | None = None, min_score: float | None = None
    ) -> list[SearchHit]:
        """Search memory; returns at most ``max_results`` hits, best first.

        The first search of a process syncs the index if ``sync.on_search`` is on.

        Args:
            query: Free text; any characters are safe.
            max_results: Default ``query.max_results`` (6).
            min_score: Default ``query.min_score`` (0.35); keyword hits below it still fill
                empty slots (the reference's keyword relaxation).
        """
        return self._search(query, max_results, min_score)[0]

    def _search(
        self, query: str, max_results: int | None, min_score: float | None
    ) -> tuple[list[SearchHit], str]:
        if not self.config.enabled or not isinstance(query, str) or not query.strip():
            return [], "fts-only"
        if max_results is not None and max_results < 1:
            raise ConfigError(f"max_results must be >= 1; got {max_results}")
        with self._lock:
            if not self._synced_once and (self.config.sync.on_search or not self.db_path.exists()):
                self.sync()
            conn = self._reader()
            with snapshot(conn):
                outcome = self._searcher.search(
                    IndexStore(conn, fts_tokenizer=self.config.store.fts_tokenizer),
                    query,
                    max_results=max_results,
                    min_score=min_score,
                )
        return outcome.hits, outcome.mode

    def search_payload(
        self,
        query: str,
        max_results: int | None = None,
        min_score: float | None = None,
        *,
        citations: bool = True,
    ) -> dict[str, Any]:
        """The ``memory_search`` tool payload (also what ``memmw search --json`` prints)."""
        hits, mode = self._search(query, max_results, min_score)
        return {
            "results": [h.to_payload(citations=citations) for h in hits],
            "provider": "none",
            "model": "fts-only",
            "fallback": None,
            "citations": "on" if citations else "off",
            "mode": mode,
        }

    def get(self, path: str, from_line: int | None = None, lines: int | None = None) -> ReadResult:
        """Read a window of a memory file.

        Only ``MEMORY.md``, ``USER.md``, ``memory/**`` and configured extra paths can be
        read (``.md`` only, no symlinks, no escapes). A missing file gives
        ``status="not_found"``. The window is at most ``read.max_lines`` lines and
        ``read.max_chars`` characters; ``next_from`` continues a truncated read.

        Raises:
            PathPolicyError: the path is not a readable memory file.
        """
        rel, abs_path = resolve_read_path(self.workspace, path, self.config.extra_paths)
        if not abs_path.exists():
            return ReadResult(path=rel, text="", status="not_found")
        if not abs_path.is_file():
            raise PathPolicyError(f"{rel}: not a regular file")
        try:
            text = read_markdown(abs_path)[0]
        except FileReadError as exc:
            raise PathPolicyError(f"{rel}: {exc}") from exc
        return read_window(
            rel,
            text,
            from_line,
            lines,
            max_lines=self.config.read.max_lines,
            max_chars=self.config.read.max_chars,
        )

    def status(self, deep: bool = False) -> Status:
        """Report files, chunks, freshness and backends of this agent's index.

        Args:
            deep: Also probe the search backends (FTS5 availability, keyword matrix load).
        """
        counts: dict[str, dict[str, int]] = {}
        last_sync: float | None = None
        details: dict[str, Any] = {}
        exists = self.db_path.exists()
        if exists:
            with self._lock:
                store = self._store()
                with snapshot(store.conn):
                    counts = store.counts()
                    raw = store.get_meta("last_sync")
                    last_sync = float(raw) if raw else None
                    if deep:
                        details["fts"] = {
                            "available": fts5_available(store.conn),
                            "tokenizer": self.config.store.fts_tokenizer,
                            "keywordBackend": (
                                "fts5" if self.config.store.keyword_backend == "fts5" else "memory"
                            ),
                        }
                        matrix = self._searcher.keyword_matrix(store, self.config.sources)
                        details["keywordMatrix"] = {
                            "chunks": matrix.n_docs,
                            "terms": len(matrix.terms),
                        }
        details["vector"] = {"enabled": False, "reason": "keyword-only (provider 'none')"}
        return Status(
            agent_id=self.agent_id,
            workspace=str(self.workspace),
            db_path=str(self.db_path),
            files=sum(c["files"] for c in counts.values()),
            chunks=sum(c["chunks"] for c in counts.values()),
            dirty=not exists,
            sources=self.config.sources,
            source_counts=counts,
            mode="fts-only",
            last_sync=last_sync,
            details=details,
        )

    def reset(self) -> None:
        """Delete the derived index (never a Markdown file); the next sync rebuilds it."""
        with self._lock, exclusive_lock(self._indexer.lock_path, timeout=120):
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(f"{self.db_path}{suffix}")
            self._synced_once = False


def read_window(
    path: str,
    text: str,
    from_line: int | None,
    lines: int | None,
    *,
    max_lines: int,
    max_chars: int,
) -> ReadResult:
    """Cut ``text`` to the requested window within the line and character budgets."""
    all_lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if all_lines and all_lines[-1] == "":
        all_lines.pop()
    total = len(all_lines)
    start = max(1, int(from_line or 1))
    want = min(max_lines, max(1, int(lines))) if lines is not None else max_lines
    window = all_lines[start - 1 : start - 1 + want]
    shown: list[str] = []
    used = 0
    cut_line = False
    for line in window:
        cost = utf16_len(line) + (1 if shown else 0)
        if used + cost > max_chars:
            if not shown:  # one huge line: hard-cut it
                shown.append(cut_utf16(line, max_chars))
                cut_line = True
            break
        shown.append(line)
        used += cost
    end = start + len(shown) - 1
    more = end < total or cut_line
    body = "\n".join(shown)
    next_from = (end if cut_line else end + 1) if more else None
    if more:
        body += (
            f"\n\n[truncated: showed lines {start}-{end} of {total}; "
            f"continue with from={next_from}]"
        )
    return ReadResult(
        path=path,
        text=body,
        status="ok",
        from_line=start,
        lines=len(shown),
        total_lines=total,
        truncated=more,
        next_from=next_from,
    )
