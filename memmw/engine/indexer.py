"""Sync orchestration, store-agnostic: discover, read, chunk, parse, decide what changed, write."""

from __future__ import annotations

import calendar
import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memmw.config import MemoryConfig, Source
from memmw.engine.freshness import yield_to_searches
from memmw.errors import FileReadError, IndexBusyError, IndexCorruptError, IndexStoreError
from memmw.notes.syntax import GRAPH_VERSION, ParsedNote, mask_retracted, parse_note
from memmw.store.factory import create_store
from memmw.store.protocol import FileRecords, Store, StoreWriter
from memmw.store.terms import TERMS_VERSION
from memmw.text.chunking import CHUNKING_VERSION, Chunk, chunk_text
from memmw.types import FileIssue, SyncReport
from memmw.workspace.files import (
    MEMORY_DIR,
    Discovery,
    WorkspaceFile,
    discover_all,
    file_date,
    is_curated,
    resolve_extra_path,
)
from memmw.workspace.locks import lock_path_for
from memmw.workspace.reading import decode_note, read_note_bytes
from memmw.workspace.transcript_source import (
    list_transcript_files,
    transcript_document,
    transcript_index_path,
)
from memmw.workspace.transcripts import SkippedLine

log = logging.getLogger(__name__)

#: Files larger than this are reported and skipped (memory files are small by nature).
#: How long a sync waits for another process's sync before giving up.
WRITER_LOCK_TIMEOUT_S = 120.0

#: Meta key with the paths the last sync skipped (JSON list of ``{path, reason}``).
SCAN_ISSUES_KEY = "scan_issues"
#: Meta key: when the last sync that looked at every note started (epoch seconds).
SCANNED_AT_KEY = "scanned_at"
#: Meta key with the transcript reader's version the session rows were made with; when it
#: differs from :data:`TRANSCRIPTS_VERSION` every transcript is read again (no stat shortcut).
TRANSCRIPTS_VERSION_KEY = "sessions_version"
#: 2: JSONL lines are cut as :func:`memmw.text.lines.split_lines` cuts (U+2028 and U+0085
#: inside a record no longer split it); unreadable lines are reported.
TRANSCRIPTS_VERSION = "2"
#: Skipped lines reported per transcript (the last one counts the rest).
MAX_LINE_ISSUES = 10
#: A note whose recorded mtime is this close to (or after) the sync that recorded it is
#: read again: it may have changed again within the file system's mtime resolution.
RACY_WINDOW_S = 2.0

Progress = Callable[[int, int, str], None]


@dataclass(frozen=True, kw_only=True)
class ProviderIdentity:
    """What of the embedding provider goes into the index identity."""

    provider: str = "none"
    model: str = "fts-only"
    provider_key: str = ""
    dims: int | None = None


@dataclass
class _Counts:
    added: int = 0
    changed: int = 0
    removed: int = 0
    unchanged: int = 0
    chunks: int = 0
    issues: list[FileIssue] = field(default_factory=list)

    @property
    def modified(self) -> bool:
        return bool(self.added or self.changed or self.removed)


def decay_timestamp(file: WorkspaceFile, mtime: float) -> float | None:
    """Epoch seconds a file's age is measured from; None for evergreen files.

    Dated files under ``memory/`` use the date in their name (UTC midnight); root curated
    files and undated files under ``memory/`` are evergreen; other files (extra paths)
    use their modification time.
    """
    date = file_date(file.path)
    if date is not None:
        return float(calendar.timegm((*date, 0, 0, 0)))
    if is_curated(file.path) or file.path.startswith(MEMORY_DIR + "/"):
        return None
    return mtime


def build_identity(
    config: MemoryConfig, workspace: Path, provider: ProviderIdentity
) -> dict[str, Any]:
    """The index identity: when any of it changes, the index is rebuilt."""
    scope = sorted(
        [str(resolve_extra_path(e, workspace).absolute()), e.pattern or ""]
        for e in config.extra_paths
    )
    return {
        "provider": provider.provider,
        "model": provider.model,
        "providerKey": provider.provider_key,
        "vectorDims": provider.dims,
        "sources": sorted(config.sources),
        "scopeHash": hashlib.sha256(json.dumps(scope).encode()).hexdigest(),
        "chunkTokens": config.chunking.tokens,
        "chunkOverlap": config.chunking.overlap,
        "ftsTokenizer": config.store.fts_tokenizer,
        # chunks_fts is only filled for the fts5 backend (postings serve the others).
        "keywordBackend": "fts5" if config.store.keyword_backend == "fts5" else "postings",
        "chunkingVersion": CHUNKING_VERSION,
        "termsVersion": TERMS_VERSION,
    }


def identity_change(stored: dict[str, Any] | None, wanted: dict[str, Any]) -> str | None:
    """Why the stored identity does not match (``no-index``, ``identity:<key>``), or None."""
    if stored is None:
        return "no-index"
    for key, value in wanted.items():
        if key == "vectorDims" and value is None:
            continue  # dims are learned on the first embedding
        if stored.get(key) != value:
            return f"identity:{key}"
    return None


class Indexer:
    """Brings one agent's index up to date with its workspace, through the store protocol.

    One sync runs at a time per index, across processes (the store's writer lock).
    Incremental syncs run in one transaction; full rebuilds are staged by the store and
    swapped in atomically, so readers always see a complete index and a crash leaves
    the previous one in place.

    Args:
        store: The index (default: the SQLite file ``db_path``).
        db_path: Where the SQLite index lives when no ``store`` is given.
        workspace: The workspace root.
        config: Settings.
        provider: What of the embedding provider goes into the identity.
        transcripts_dir: Transcript folder, indexed when ``Source.TRANSCRIPTS`` is a source.
    """

    def __init__(
        self,
        *,
        workspace: Path,
        config: MemoryConfig,
        db_path: Path | None = None,
        store: Store | None = None,
        provider: ProviderIdentity | None = None,
        transcripts_dir: Path | None = None,
    ) -> None:
        if store is None:
            if db_path is None:
                raise ValueError("give a store or a db_path")
            store = create_store(config, db_path=db_path)
        self.store = store
        self.db_path = db_path if db_path is not None else Path(store.location)
        self.workspace = workspace
        self.config = config
        self.provider = provider or ProviderIdentity()
        #: Transcript folder, indexed when ``Source.TRANSCRIPTS`` is among ``config.sources``.
        self.transcripts_dir = transcripts_dir

    @property
    def lock_path(self) -> Path:
        """The writer lock file of a SQLite index."""
        return lock_path_for(self.db_path)

    def sync(
        self, *, force: bool = False, progress: Progress | None = None, wait: bool = True
    ) -> SyncReport:
        """Index new and changed files, drop removed ones; rebuild when forced or needed.

        Args:
            force: Rebuild everything (staged, swapped in atomically).
            progress: Called with ``(done, total, path)`` per file.
            wait: Wait for another process's sync; False raises ``IndexBusyError``.
        """
        started = time.perf_counter()
        store = self.store
        # The notes are listed before the writer lock is taken: in a background sync the
        # listing steps aside for searches, which must not keep other writers waiting.
        found = discover_all(self.workspace, self.config.extra_paths, pace=yield_to_searches)
        try:
            with store.writer_lock(timeout=WRITER_LOCK_TIMEOUT_S if wait else 0, what="sync"):
                try:
                    with store.write() as writer:
                        reason, counts, total = self._sync_locked(writer, force, progress, found)
                except IndexCorruptError as exc:
                    # The Markdown files are the source of truth: move the damaged index
                    # aside and rebuild it from them, under the writer lock we hold.
                    cause = str(exc.__cause__ or exc)
                    aside = store.quarantine(cause)
                    log.warning(
                        "the index was damaged (%s); moved it to %s and rebuilt it from the"
                        " Markdown files",
                        cause,
                        aside,
                    )
                    try:
                        with store.write() as writer:
                            _reason, counts, total = self._sync_locked(
                                writer, True, progress, found
                            )
                    except IndexCorruptError as again:
                        raise IndexCorruptError(
                            f"the index {store.location} could not be rebuilt "
                            f"({again.__cause__ or again}); run 'memmw reset' then 'memmw index'"
                        ) from again
                    reason = "corrupt-index"
        except IndexBusyError as exc:
            holder = store.lock_holder()
            who = f" ({holder.describe()})" if holder is not None else ""
            raise IndexBusyError(
                f"another process is syncing {Path(store.location).name}{who}; try again shortly"
            ) from exc
        report = SyncReport(
            full_rebuild=reason is not None,
            reason=reason or "",
            files_added=counts.added,
            files_changed=counts.changed,
            files_removed=counts.removed,
            files_unchanged=counts.unchanged,
            chunks_indexed=counts.chunks,
            chunks_total=int(total),
            issues=tuple(counts.issues),
            seconds=time.perf_counter() - started,
        )
        log.debug("sync %s: %s", store.location, report)
        return report

    # -- internals -------------------------------------------------------------------
    def _sync_locked(
        self, writer: StoreWriter, force: bool, progress: Progress | None, found: Discovery
    ) -> tuple[str | None, _Counts, int]:
        """One sync under the writer lock: ``(rebuild reason, counts, chunks in index)``."""
        wanted = build_identity(self.config, self.workspace, self.provider)
        stored = writer.identity()
        reason = "forced" if force else identity_change(stored, wanted)
        if (
            reason is not None
            and reason != "no-index"
            and not force
            and not self.config.auto_reindex
        ):
            raise IndexStoreError(
                f"the index was built with other settings ({reason}); "
                "run 'memmw index --force' to rebuild it"
            )
        if reason is not None:
            counts = self._rebuild(writer, wanted, progress, found)
        else:
            counts = self._incremental(writer, progress, found)
        with writer.transaction():
            writer.decay_activation()  # at most once a day
        total = _total_chunks(writer)
        self._record_issues(writer, counts.issues)
        return reason, counts, total

    def _index(
        self,
        store: StoreWriter,
        existing: FileRecords,
        progress: Progress | None,
        found: Discovery,
    ) -> _Counts:
        """Index the ``found`` files; ``existing`` maps path -> (hash, mtime, size)."""
        if not self.workspace.is_dir():
            # Renamed or unmounted mid-run: an empty walk must not drop every note.
            raise IndexStoreError(
                f"the workspace folder {self.workspace} is gone; the index was left as it was"
            )
        started = time.time()
        files = found.files
        counts = _Counts(issues=list(found.issues))
        # Graph rows of unchanged files are re-derived once when the parser changed.
        graph_stale = store.get_meta("graph_version") != GRAPH_VERSION
        # A note whose size and mtime match its record is not read again (as make and
        # rsync decide), unless its mtime is within RACY_WINDOW_S of the sync that
        # recorded it: a rewrite within the mtime resolution would look unchanged.
        scanned_at = store.get_meta(SCANNED_AT_KEY)
        trusted_before = float(scanned_at) - RACY_WINDOW_S if scanned_at else None
        seen: set[str] = set()
        for i, file in enumerate(files):
            seen.add(file.path)
            if progress is not None:
                progress(i, len(files), file.path)
            known = existing.get(file.path)
            if not graph_stale and _stat_unchanged(file.abs_path, known, trusted_before):
                counts.unchanged += 1
                continue
            try:  # the one place a note is read and parsed: a bad note is a reported skip
                read = self._read_note(file, known, graph_stale)
            except Exception as exc:
                counts.issues.append(FileIssue(path=file.path, reason=skip_reason(exc)))
                log.warning("skipping %s: %s", file.path, skip_reason(exc))
                continue
            mtime, size = read.mtime, read.size
            if read.chunks is None:  # same bytes as indexed
                counts.unchanged += 1
                if known is not None and (known[1], known[2]) != (mtime, size):
                    # Same content, touched: keep the stat current so status can tell
                    # changed files by a stat alone.
                    store.update_file_stat(file.path, file.source, mtime=mtime, size=size)
                if graph_stale:
                    store.replace_note_graph(path=file.path, source=file.source, note=read.note)
                continue
            written = store.replace_file(
                path=file.path,
                source=file.source,
                file_hash=read.digest,
                mtime=mtime,
                size=size,
                decay_ts=decay_timestamp(file, mtime),
                chunks=read.chunks,
                model=self.provider.model,
            )
            # replace_file dropped the old graph rows of the file.
            store.replace_note_graph(
                path=file.path, source=file.source, note=read.note, fresh=True
            )
            counts.chunks += len(written)
            if file.path in existing:
                counts.changed += 1
            else:
                counts.added += 1
        for path in existing.keys() - seen:
            if found.may_have(path):
                continue  # its folder could not be listed: not known to be deleted
            store.delete_file(path, Source.MEMORY)
            counts.removed += 1
        self._index_transcripts(store, counts)
        store.set_meta(SCANNED_AT_KEY, repr(started))
        if counts.modified or graph_stale:
            store.refresh_graph()
            if graph_stale and not counts.modified:
                store.bump_generation()  # readers cache the graph by generation
            store.set_meta("graph_version", GRAPH_VERSION)
        if progress is not None:
            progress(len(files), len(files), "")
        return counts

    def _read_note(
        self, file: WorkspaceFile, known: tuple[str, float, int] | None, graph_stale: bool
    ) -> _NoteRead:
        """Read, decode, chunk and parse one note; any exception means a bad note.

        ``chunks`` is None when the bytes are the ones indexed (``note`` is then parsed
        only when the graph is stale). Touches no store.
        """
        if known is None:
            data, digest, mtime, size = read_note_bytes(file.abs_path)
            text = decode_note(data)
        else:
            # Bytes that were indexed decoded then: hash first, decode what changed
            # (or what the graph needs again).
            data, digest, mtime, size = read_note_bytes(file.abs_path)
            if digest == known[0]:
                note = _note(file.source, decode_note(data), file.path) if graph_stale else None
                return _NoteRead(digest=digest, mtime=mtime, size=size, chunks=None, note=note)
            text = decode_note(data)
        chunks = chunk_text(
            # Retracted entries stay in the note but are not searchable.
            mask_retracted(text),
            tokens=self.config.chunking.tokens,
            overlap=self.config.chunking.overlap,
            per_entry=is_curated(file.path),
        )
        note = _note(file.source, text, file.path)
        return _NoteRead(digest=digest, mtime=mtime, size=size, chunks=chunks, note=note)

    def _index_transcripts(self, store: StoreWriter, counts: _Counts) -> None:
        """Index the JSONL transcripts as ``Source.TRANSCRIPTS`` (paths ``sessions/<name>``).

        A transcript whose size and mtime match its record is not read again; one whose
        indexed text did not change (tool lines appended) only gets its record updated.
        """
        if Source.TRANSCRIPTS not in self.config.sources or self.transcripts_dir is None:
            return
        existing = store.file_records(Source.TRANSCRIPTS)
        # Skipped lines of transcripts not read again this time are still skipped.
        previous = _line_issues(store.get_meta(SCAN_ISSUES_KEY))
        trust_stat = store.get_meta(TRANSCRIPTS_VERSION_KEY) == TRANSCRIPTS_VERSION
        seen: set[str] = set()
        for file in list_transcript_files(self.transcripts_dir):
            path = transcript_index_path(file)
            seen.add(path)
            try:
                st = os.stat(file)  # before reading: a write during the read shows next time
            except OSError:
                continue
            known = existing.get(path)
            if (
                trust_stat
                and known is not None
                and known[1] == st.st_mtime
                and known[2] == st.st_size
            ):
                counts.unchanged += 1
                counts.issues.extend(previous.get(path, ()))
                continue
            try:  # the one place a transcript is read and parsed: bad input is a skip
                doc = transcript_document(file)
                chunks = doc.chunks(
                    tokens=self.config.chunking.tokens, overlap=self.config.chunking.overlap
                )
            except Exception as exc:
                counts.issues.append(FileIssue(path=path, reason=skip_reason(exc)))
                log.warning("skipping %s: %s", path, skip_reason(exc))
                continue
            counts.issues.extend(_skipped_lines(path, doc.skipped))
            if known is not None and known[0] == doc.hash:
                store.update_file_stat(
                    path, Source.TRANSCRIPTS, mtime=st.st_mtime, size=st.st_size
                )
                counts.unchanged += 1
                continue
            written = store.replace_file(
                path=path,
                source=Source.TRANSCRIPTS,
                file_hash=doc.hash,
                mtime=st.st_mtime,
                size=st.st_size,
                decay_ts=st.st_mtime,
                chunks=chunks,
                model=self.provider.model,
            )
            counts.chunks += len(written)
            if known is None:
                counts.added += 1
            else:
                counts.changed += 1
        for path in existing.keys() - seen:
            store.delete_file(path, Source.TRANSCRIPTS)
            counts.removed += 1
        if not trust_stat:
            store.set_meta(TRANSCRIPTS_VERSION_KEY, TRANSCRIPTS_VERSION)

    def _incremental(
        self, store: StoreWriter, progress: Progress | None, found: Discovery
    ) -> _Counts:
        with store.transaction():
            counts = self._index(store, store.file_records(Source.MEMORY), progress, found)
            if counts.modified:
                store.bump_generation()
        return counts

    def _rebuild(
        self,
        live: StoreWriter,
        identity: dict[str, Any],
        progress: Progress | None,
        found: Discovery,
    ) -> _Counts:
        old_generation = live.generation()
        old_chunks = _total_chunks(live)
        with self.store.rebuild(live) as staged:
            with staged.transaction():
                counts = self._index(staged, {}, progress, found)
                staged.set_identity(identity)
                staged.set_meta("generation", str(old_generation))
                staged.bump_generation()
            if old_chunks and counts.chunks == 0 and counts.issues and not (counts.added):
                # Raised inside the staging: the store drops it, the old index stays.
                raise IndexStoreError(
                    "rebuild produced an empty index while files could not be read; "
                    "kept the previous index"
                )
        return counts

    def _record_issues(self, store: StoreWriter, issues: list[FileIssue]) -> None:
        """Keep the last sync's skipped paths in the index so ``status`` can list them."""
        value = json.dumps([i.to_dict() for i in issues[:200]])
        if store.get_meta(SCAN_ISSUES_KEY) != value:
            with store.transaction():
                store.set_meta(SCAN_ISSUES_KEY, value)


@dataclass(frozen=True, kw_only=True)
class _NoteRead:
    """A note as read: its bytes' identity, its chunks (None: unchanged) and its graph."""

    digest: str
    mtime: float
    size: int
    chunks: list[Chunk] | None
    note: ParsedNote | None


def skip_reason(exc: BaseException) -> str:
    """The reason a bad file is skipped, for ``status`` (one line, at most 300 characters).

    A :class:`FileReadError` says it in its own words; any other exception (a parser's
    ``RecursionError``, ``MemoryError``, ``ValueError``...) is named with its message.
    """
    if isinstance(exc, FileReadError):
        text = str(exc)
    elif isinstance(exc, RecursionError):
        text = "could not be parsed: nested too deeply (RecursionError)"
    elif isinstance(exc, MemoryError):
        text = "could not be parsed: too large for memory (MemoryError)"
    else:
        detail = " ".join(str(exc).split())
        text = f"could not be parsed ({type(exc).__name__}{': ' + detail if detail else ''})"
    return text[:300]


def _skipped_lines(path: str, skipped: Sequence[SkippedLine]) -> list[FileIssue]:
    """Issues for a transcript's skipped lines: at most :data:`MAX_LINE_ISSUES`."""
    lines = list(skipped)
    out = [FileIssue(path=path, reason=s.reason, line=s.line) for s in lines[:MAX_LINE_ISSUES]]
    if len(lines) > MAX_LINE_ISSUES:
        last = out[-1]
        more = len(lines) - MAX_LINE_ISSUES
        out[-1] = FileIssue(
            path=path, line=last.line, reason=f"{last.reason} (and {more} more skipped lines)"
        )
    return out


def _line_issues(raw: str | None) -> dict[str, list[FileIssue]]:
    """The skipped-line issues recorded by the last sync, by path."""
    out: dict[str, list[FileIssue]] = {}
    try:
        items = json.loads(raw or "[]")
    except ValueError:
        return out
    for item in items if isinstance(items, list) else ():
        if isinstance(item, dict) and isinstance(item.get("line"), int):
            issue = FileIssue(path=str(item.get("path")), reason=str(item.get("reason")),
                              line=item["line"])
            out.setdefault(issue.path, []).append(issue)
    return out


def _stat_unchanged(
    path: Path, known: tuple[str, float, int] | None, trusted_before: float | None
) -> bool:
    """True when a note's size and mtime match its record made before ``trusted_before``."""
    if known is None or trusted_before is None or known[1] >= trusted_before:
        return False
    try:
        st = os.stat(path)
    except OSError:
        return False  # the read reports it
    return (st.st_mtime, st.st_size) == (known[1], known[2])


def _note(source: str, text: str, path: str) -> ParsedNote | None:
    """The parsed graph of a note (only ``memory`` files carry graph entries)."""
    return parse_note(text, path) if source == Source.MEMORY else None


def _total_chunks(reader: StoreWriter) -> int:
    return sum(c["chunks"] for c in reader.counts().values())
