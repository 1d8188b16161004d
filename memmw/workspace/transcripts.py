"""Session transcripts: one JSONL file per session, one message per line."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memmw.errors import ConfigError
from memmw.redaction import redact_json
from memmw.text.lines import split_line_bytes
from memmw.text.tokens import content_text
from memmw.workspace.files import atomic_write_text
from memmw.workspace.locks import exclusive_lock, lock_path_for

log = logging.getLogger(__name__)

_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+=-]{0,199}")
SESSIONS_INDEX = "sessions.json"
#: A transcript line longer than this (bytes) is skipped and reported, not parsed.
MAX_TRANSCRIPT_LINE_BYTES = 16 * 1024 * 1024
#: A transcript line whose JSON nests deeper than this is skipped and reported. Checked
#: before parsing, so the answer does not depend on how deep the caller's stack is (the
#: parser's own limit is the interpreter's recursion limit, shared with the caller).
MAX_JSON_DEPTH = 256
_JSON_NESTING = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def check_session_id(session_id: str) -> str:
    """Return ``session_id`` if it is a safe file name, else raise ``ConfigError``."""
    if not isinstance(session_id, str) or not _SAFE_ID.fullmatch(session_id) or ".." in session_id:
        raise ConfigError(
            f"session id {session_id!r} must be 1-200 characters of letters, digits and ._@+=-"
        )
    return session_id


#: Separates a principal's session id from its owner: ``<id>=<principal>``.
PRINCIPAL_MARK = "="


def principal_session_id(session_id: str, principal: str | None) -> str:
    """``session_id`` marked as a principal's (``<id>=<principal>``); the owner's unchanged.

    A transcript's file name then records whose conversation it is, so the privacy gate
    can tell (:func:`transcript_principal`) without any other state.
    """
    if principal is None or transcript_principal(session_id) == principal:
        return session_id
    return check_session_id(f"{session_id}{PRINCIPAL_MARK}{principal}")


#: The folder of an agent's transcripts in the state folder (``agents/<id>/sessions``;
#: OpenClaw's name, and the value of :attr:`memmw.config.Source.TRANSCRIPTS`).
TRANSCRIPTS_DIR = "sessions"


def transcript_principal(name: str) -> str | None:
    """The principal whose session a transcript file (or session id) belongs to, else None.

    The text after the last ``=`` of the session id part (before ``.jsonl``), folded to
    lower case; None (the owner) without one.
    """
    base = name.rsplit("/", 1)[-1].split(".jsonl", 1)[0]
    if PRINCIPAL_MARK not in base:
        return None
    return base.rsplit(PRINCIPAL_MARK, 1)[1].lower() or None


def transcripts_dir(state_dir: str | os.PathLike[str], agent_id: str) -> Path:
    """``<state_dir>/agents/<agent_id>/sessions``: the transcripts of this agent's chat
    sessions (the transcript source)."""
    return Path(state_dir) / "agents" / check_session_id(agent_id) / TRANSCRIPTS_DIR


def _utc_now_iso() -> str:
    return (
        dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )


@dataclass(frozen=True, kw_only=True)
class TranscriptMessage:
    """One ``type == "message"`` line of a transcript.

    Attributes:
        role: ``user``, ``assistant``, ``tool`` or ``system``.
        content: String content or a list of content blocks, as recorded.
        timestamp: ISO time of the record (may be empty for foreign files).
        line: 1-based JSONL line number.
        tool_calls: Tool calls of an assistant message, if any.
        extra: Other fields of the ``message`` object.
    """

    role: str
    content: Any
    timestamp: str = ""
    line: int = 0
    tool_calls: tuple[Mapping[str, Any], ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The plain text: string content or the text blocks joined."""
        return content_text(self.content)


@dataclass(frozen=True, kw_only=True)
class SkippedLine:
    """A transcript line that could not be read (the other lines are read).

    Attributes:
        line: 1-based line number (lines as :func:`memmw.text.lines.split_lines` counts).
        reason: Why, e.g. ``JSON nested too deeply``.
    """

    line: int
    reason: str


@dataclass(frozen=True, kw_only=True)
class TranscriptScan:
    """A transcript as read: its message records and the lines that could not be read."""

    messages: list[TranscriptMessage]
    skipped: list[SkippedLine]


def read_transcript(path: str | os.PathLike[str]) -> list[TranscriptMessage]:
    """Read the message records of a JSONL transcript; bad lines are skipped.

    A missing file reads as an empty transcript. :func:`scan_transcript` also tells
    which lines were skipped and why.
    """
    return scan_transcript(path).messages


def scan_transcript(path: str | os.PathLike[str]) -> TranscriptScan:
    """Read a JSONL transcript line by line; a line that cannot be read is skipped.

    Lines are cut as :func:`memmw.text.lines.split_lines` cuts text (``\\n``, ``\\r\\n``,
    ``\\r``; a raw U+2028 inside a JSON string stays in its record), so ``line`` numbers
    match ``memory_get``, editors and ``wc -l``. Each line is decoded and parsed on its
    own: one longer than :data:`MAX_TRANSCRIPT_LINE_BYTES`, not UTF-8, not JSON, or
    nested too deeply for the parser is listed in ``skipped``; blank lines and records
    that are not messages are passed over silently. A missing file reads as empty.
    """
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        return TranscriptScan(messages=[], skipped=[])
    out: list[TranscriptMessage] = []
    skipped: list[SkippedLine] = []
    for lineno, data in enumerate(split_line_bytes(raw), start=1):
        if not data.strip():
            continue
        try:
            message = _message(_parse_line(data), lineno)
        except Exception as exc:  # any bad input skips this line only
            reason = str(exc) if isinstance(exc, _BadLine) else (
                f"not a readable record ({type(exc).__name__})"
            )
            log.debug("skipping transcript line %s:%d: %s", p.name, lineno, reason)
            skipped.append(SkippedLine(line=lineno, reason=reason))
            continue
        if message is not None:
            out.append(message)
    return TranscriptScan(messages=out, skipped=skipped)


class _BadLine(ValueError):
    """A transcript line that cannot be parsed (the message says why)."""


def _parse_line(data: bytes) -> Any:
    """One JSONL line's value. Raises :class:`_BadLine` for any line that cannot be read."""
    if len(data) > MAX_TRANSCRIPT_LINE_BYTES:
        limit = MAX_TRANSCRIPT_LINE_BYTES
        size = f"{limit >> 20} MiB" if limit % (1 << 20) == 0 else f"{limit} bytes"
        raise _BadLine(f"longer than {size}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _BadLine(f"not valid UTF-8 (byte {exc.start})") from exc
    if _nests_deeper(data, MAX_JSON_DEPTH):
        raise _BadLine(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        return json.loads(text)
    except RecursionError as exc:  # a caller already deep in its stack
        raise _BadLine("JSON nested too deeply") from exc
    except ValueError as exc:  # JSONDecodeError, and huge integer literals
        raise _BadLine(f"not JSON ({exc})"[:200]) from exc
    except MemoryError as exc:
        raise _BadLine("too large to parse") from exc


def _nests_deeper(data: bytes, limit: int) -> bool:
    """True when the JSON in ``data`` opens more than ``limit`` arrays/objects at once.

    Brackets inside strings do not count. Lines with few brackets are not scanned.
    """
    if data.count(b"[") + data.count(b"{") <= limit:
        return False
    depth = 0
    for m in _JSON_NESTING.finditer(data):
        token = m.group()
        if token in (b"[", b"{"):
            depth += 1
            if depth > limit:
                return True
        elif token in (b"]", b"}"):
            depth -= 1
    return False


def _message(record: Any, lineno: int) -> TranscriptMessage | None:
    """The message of a parsed record, or None for other records."""
    if not isinstance(record, dict) or record.get("type") != "message":
        return None
    message = record.get("message")
    if not isinstance(message, dict) or not isinstance(message.get("role"), str):
        return None
    calls = message.get("tool_calls")
    calls = calls if isinstance(calls, (list, tuple)) else ()
    return TranscriptMessage(
        role=message["role"],
        content=message.get("content"),
        timestamp=str(record.get("timestamp") or ""),
        line=lineno,
        tool_calls=tuple(c for c in calls if isinstance(c, Mapping)),
        extra={k: v for k, v in message.items() if k not in ("role", "content", "tool_calls")},
    )


class TranscriptStore:
    """The JSONL transcripts of one agent: ``<state_dir>/agents/<agent_id>/sessions/*.jsonl``.

    Also keeps ``sessions.json``, a small map from session key to the current session id,
    so a restarted process continues the same session.

    Args:
        state_dir: The memmw state directory.
        agent_id: The agent whose sessions these are.
    """

    def __init__(self, state_dir: str | os.PathLike[str], agent_id: str) -> None:
        self.dir = transcripts_dir(state_dir, agent_id)

    def path(self, session_id: str) -> Path:
        """The transcript file of ``session_id`` (it may not exist yet)."""
        return self.dir / f"{check_session_id(session_id)}.jsonl"

    def append(
        self,
        session_id: str,
        role: str,
        content: Any,
        *,
        timestamp: str | None = None,
        **fields: Any,
    ) -> None:
        """Append one message line ``{"type":"message","message":{...},"timestamp":...}``.

        Every string of the message (content, content blocks, tool calls) passes the one
        redaction pass (:func:`memmw.redaction.redact_json`) before it is written: a
        credential the user pastes never reaches the transcript file.

        Args:
            session_id: The session.
            role: Message role.
            content: String or JSON-serialisable content blocks.
            timestamp: ISO time; default now (UTC).
            **fields: Extra message fields (``tool_calls``, ``tool_call_id``, ``id``...).
        """
        message: dict[str, Any] = {"role": role, "content": content}
        message.update({k: v for k, v in fields.items() if v is not None})
        message = redact_json(message)
        record = {"type": "message", "message": message, "timestamp": timestamp or _utc_now_iso()}
        text = json.dumps(record, ensure_ascii=False, default=str)
        try:
            data = (text + "\n").encode("utf-8")
        except UnicodeEncodeError:
            # A lone surrogate (half an emoji) cannot be UTF-8: JSON escapes keep the line
            # valid, and the reader turns the half into U+FFFD. The message is never lost.
            data = (json.dumps(record, ensure_ascii=True, default=str) + "\n").encode("ascii")
        path = self.path(session_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        with exclusive_lock(lock_path_for(path)), path.open("ab") as fh:
            fh.write(data)

    def read(self, session_id: str) -> list[TranscriptMessage]:
        """All message records of ``session_id`` (empty if there is no transcript)."""
        return read_transcript(self.path(session_id))

    def size_bytes(self, session_id: str) -> int:
        """Size of the transcript file in bytes (0 if missing)."""
        try:
            return self.path(session_id).stat().st_size
        except FileNotFoundError:
            return 0

    def rotate(self, session_id: str, *, now: dt.datetime | None = None) -> Path | None:
        """Rename the transcript to ``<id>.jsonl.reset.<ts>`` (call after archiving it).

        Returns:
            The new path, or None when there was no transcript.
        """
        path = self.path(session_id)
        if not path.exists():
            return None
        stamp = (now or dt.datetime.now(dt.timezone.utc)).astimezone(dt.timezone.utc)
        target = path.with_name(f"{path.name}.reset.{stamp.strftime('%Y-%m-%dT%H-%M-%S.%fZ')}")
        os.replace(path, target)
        lock = lock_path_for(path)
        with contextlib.suppress(OSError):
            lock.unlink()
        return target

    def iter_sessions(self) -> Iterator[Path]:
        """Primary transcript files (rotated archives excluded), sorted by name."""
        if not self.dir.is_dir():
            return iter(())
        return iter(sorted(p for p in self.dir.glob("*.jsonl") if p.is_file()))

    def principal_files(self, principal: str) -> list[Path]:
        """Every transcript file of ``principal``'s sessions (current and rotated)."""
        if not self.dir.is_dir():
            return []
        return sorted(
            p
            for p in self.dir.iterdir()
            if ".jsonl" in p.name
            and not p.is_dir()
            and transcript_principal(p.name) == principal
        )

    def forget_principal(self, principal: str) -> list[Path]:
        """Delete ``principal``'s transcripts and their key bindings; returns the files."""
        removed: list[Path] = []
        for path in self.principal_files(principal):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                removed.append(path)
        if self._index_path().exists():
            with exclusive_lock(lock_path_for(self._index_path())):
                data = self._read_index()
                kept = {
                    k: v
                    for k, v in data.items()
                    if not (
                        isinstance(v, dict)
                        and isinstance(v.get("sessionId"), str)
                        and transcript_principal(v["sessionId"]) == principal
                    )
                }
                if kept != data:
                    atomic_write_text(self._index_path(), json.dumps(kept, indent=2, sort_keys=True))
        return removed

    # -- session index ------------------------------------------------------------------

    def _index_path(self) -> Path:
        return self.dir / SESSIONS_INDEX

    def _read_index(self) -> dict[str, Any]:
        try:
            data = json.loads(self._index_path().read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def current_session(self, session_key: str) -> str | None:
        """The session id last bound to ``session_key``, if any."""
        entry = self._read_index().get(session_key)
        if isinstance(entry, dict) and isinstance(entry.get("sessionId"), str):
            return str(entry["sessionId"])
        return None

    def bind_session(self, session_key: str, session_id: str) -> None:
        """Record ``session_id`` as the current session of ``session_key``."""
        check_session_id(session_id)
        self.dir.mkdir(parents=True, exist_ok=True)
        with exclusive_lock(lock_path_for(self._index_path())):
            data = self._read_index()
            data[session_key] = {"sessionId": session_id, "updatedAt": _utc_now_iso()}
            atomic_write_text(self._index_path(), json.dumps(data, indent=2, sort_keys=True))
