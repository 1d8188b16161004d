"""Session transcripts as a search source: redacted text, JSONL line maps, growth deltas."""

from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from memmw.config import Source
from memmw.redaction import StreamRedactor
from memmw.text.chunking import Chunk, chunk_text
from memmw.workspace.transcripts import SkippedLine, scan_transcript

log = logging.getLogger(__name__)

#: Indexed paths of transcripts are ``sessions/<file name>``.
TRANSCRIPTS_PREFIX = Source.TRANSCRIPTS.value

_ROLES = {"user": "User", "assistant": "Assistant"}
_WS = re.compile(r"\s+")
#: Half a surrogate pair (JSON may escape one, e.g. an emoji cut in two): not encodable.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_DELTA_READ = 64 * 1024


def collapse_whitespace(text: str) -> str:
    """Collapse every run of whitespace (newlines included) to one space and trim."""
    return _WS.sub(" ", text).strip()


@dataclass(frozen=True, kw_only=True)
class TranscriptDocument:
    """A transcript as indexable text.

    Attributes:
        text: One line per user/assistant message (``User: ...``/``Assistant: ...``),
            whitespace collapsed and secrets redacted (see :mod:`memmw.redaction`).
        line_map: ``line_map[i]`` is the JSONL line (1-based) of ``text`` line ``i + 1``.
        hash: sha256 of the text plus the line map (the file's identity in the index).
        messages: Number of indexed messages.
        skipped: Lines that could not be read (too long, not UTF-8, not JSON, nested too
            deeply); the rest of the transcript is indexed.
    """

    text: str
    line_map: tuple[int, ...]
    hash: str
    messages: int
    skipped: tuple[SkippedLine, ...] = ()

    def chunks(self, *, tokens: int = 400, overlap: int = 80) -> list[Chunk]:
        """Chunk the text (no per-entry mode) with line numbers mapped to JSONL lines."""
        return map_chunks(chunk_text(self.text, tokens=tokens, overlap=overlap), self.line_map)


def transcript_document(path: str | os.PathLike[str]) -> TranscriptDocument:
    """Read a JSONL transcript into a :class:`TranscriptDocument` (a missing file is empty)."""
    lines: list[str] = []
    line_map: list[int] = []
    # One redactor for the whole transcript: a key pasted over two messages is hidden
    # whole. Redaction runs before whitespace is collapsed so multi-line blocks match.
    redactor = StreamRedactor()
    scan = scan_transcript(path)
    for message in scan.messages:
        label = _ROLES.get(message.role)
        if label is None:
            continue
        text = collapse_whitespace(redactor.redact(_LONE_SURROGATE.sub("\ufffd", message.text)))
        if not text:
            continue
        lines.append(f"{label}: {text}")
        line_map.append(message.line)
    body = "\n".join(lines)
    digest = hashlib.sha256(
        (body + "\n" + ",".join(map(str, line_map))).encode("utf-8")
    ).hexdigest()
    return TranscriptDocument(
        text=body,
        line_map=tuple(line_map),
        hash=digest,
        messages=len(lines),
        skipped=tuple(scan.skipped),
    )


def map_chunks(chunks: Iterable[Chunk], line_map: tuple[int, ...]) -> list[Chunk]:
    """Map chunk line numbers (lines of the document text) to JSONL line numbers."""
    out: list[Chunk] = []
    for chunk in chunks:
        pieces = [line_map[n - 1] for n in chunk.piece_lines() if 0 < n <= len(line_map)]
        if not pieces:
            continue
        start, end = pieces[0], pieces[-1]
        contiguous = pieces == list(range(start, start + len(pieces)))
        out.append(
            Chunk(
                start_line=start,
                end_line=end,
                text=chunk.text,
                hash=chunk.hash,
                line_map=None if contiguous else tuple(pieces),
                importance=None,
            )
        )
    return out


def transcript_index_path(file: Path) -> str:
    """The indexed path of a transcript: ``sessions/<file name>``."""
    return f"{TRANSCRIPTS_PREFIX}/{file.name}"


def is_transcript_file(name: str) -> bool:
    """True for transcript file names the sessions source indexes (see ``list_transcript_files``)."""
    if name.startswith(".") or ".bak." in name or name.endswith((".tmp", ".lock")):
        return False
    if not name.isprintable() or any("\udc80" <= c <= "\udcff" for c in name):
        return False  # undecodable bytes (surrogate escapes) cannot be stored as a path
    lowered = name.lower()
    if "trajectory" in lowered or "checkpoint" in lowered or "dream" in lowered:
        return False
    return name.endswith(".jsonl") or ".jsonl.reset." in name or ".jsonl.deleted." in name


def list_transcript_files(directory: Path) -> list[Path]:
    """Transcripts to index: ``*.jsonl`` plus ``.reset.<ts>``/``.deleted.<ts>`` archives.

    ``sessions.json``, ``.bak.`` copies, trajectory and checkpoint files, symlinks and
    hidden files are left out.
    """
    try:
        entries = list(os.scandir(directory))
    except (FileNotFoundError, NotADirectoryError):
        return []
    out = [
        Path(e.path) for e in entries
        if is_transcript_file(e.name) and e.is_file(follow_symlinks=False)
    ]
    return sorted(out, key=lambda p: p.name)


@dataclass
class _FileDelta:
    last_size: int = 0
    pending_bytes: int = 0
    pending_messages: int = 0


@dataclass(frozen=True, kw_only=True)
class DeltaThresholds:
    """When a grown transcript is worth re-indexing (``<= 0`` means any growth)."""

    delta_bytes: int = 100_000
    delta_messages: int = 50


@dataclass
class SessionDeltaTracker:
    """Counts bytes and messages appended to each transcript since it was last indexed.

    Call :meth:`observe` when a transcript changed; it returns True when the file crossed
    a threshold (then the index should be synced). :meth:`indexed` resets the counters
    after a sync. Thread-safe.
    """

    thresholds: DeltaThresholds = field(default_factory=DeltaThresholds)
    _files: dict[str, _FileDelta] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def prime(self, paths: Iterable[Path]) -> None:
        """Record the current sizes (e.g. right after a sync) without counting them."""
        with self._lock:
            for p in paths:
                try:
                    size = p.stat().st_size
                except OSError:
                    continue
                self._files[str(p)] = _FileDelta(last_size=size)

    def observe(self, path: str | os.PathLike[str]) -> bool:
        """Account for a change of ``path``; True when a threshold was reached.

        Growth adds the size delta and the newlines of the new range (read in 64 KiB
        pieces, only while under the message threshold); a shrink (rewrite) counts the
        whole file. On a hit the thresholds are subtracted from the counters.
        """
        key = os.fspath(path)
        try:
            size = os.stat(key).st_size
        except OSError:
            with self._lock:
                known = self._files.pop(key, None)
            return known is not None  # a vanished transcript changes the index
        with self._lock:
            state = self._files.setdefault(key, _FileDelta())
            previous = state.last_size
            if size == previous:
                return False
            if size < previous:
                state.pending_bytes += size
                state.pending_messages += self._count_newlines(key, 0, size, state)
            else:
                state.pending_bytes += size - previous
                state.pending_messages += self._count_newlines(key, previous, size, state)
            state.last_size = size
            return self._hit(state)

    def _count_newlines(self, path: str, start: int, end: int, state: _FileDelta) -> int:
        limit = self.thresholds.delta_messages
        count = 0
        try:
            with open(path, "rb") as fh:
                fh.seek(start)
                remaining = end - start
                while remaining > 0:
                    if limit > 0 and state.pending_messages + count >= limit:
                        break  # already over the threshold: no need to read further
                    data = fh.read(min(_DELTA_READ, remaining))
                    if not data:
                        break
                    count += data.count(b"\n")
                    remaining -= len(data)
        except OSError:
            return 0
        return count

    def _hit(self, state: _FileDelta) -> bool:
        t = self.thresholds
        bytes_hit = state.pending_bytes > 0 and (
            t.delta_bytes <= 0 or state.pending_bytes >= t.delta_bytes
        )
        messages_hit = state.pending_messages > 0 and (
            t.delta_messages <= 0 or state.pending_messages >= t.delta_messages
        )
        if not (bytes_hit or messages_hit):
            return False
        state.pending_bytes = max(0, state.pending_bytes - max(t.delta_bytes, 0))
        state.pending_messages = max(0, state.pending_messages - max(t.delta_messages, 0))
        return True

    def indexed(self) -> None:
        """Reset the pending counters of every file (call after a successful sync)."""
        with self._lock:
            for state in self._files.values():
                state.pending_bytes = state.pending_messages = 0

    def pending(self) -> dict[str, tuple[int, int]]:
        """``{path: (pending bytes, pending messages)}`` for status and tests."""
        with self._lock:
            return {
                k: (v.pending_bytes, v.pending_messages)
                for k, v in self._files.items()
                if v.pending_bytes or v.pending_messages
            }
