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
from memmw.text.tokens import content_text
from memmw.workspace.files import atomic_write_text
from memmw.workspace.locks import exclusive_lock, lock_path_for

log = logging.getLogger(__name__)

_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+=-]{0,199}")
SESSIONS_INDEX = "sessions.json"


def check_session_id(session_id: str) -> str:
    """Return ``session_id`` if it is a safe file name, else raise ``ConfigError``."""
    if not isinstance(session_id, str) or not _SAFE_ID.fullmatch(session_id) or ".." in session_id:
        raise ConfigError(
            f"session id {session_id!r} must be 1-200 characters of letters, digits and ._@+=-"
        )
    return session_id


def sessions_dir(state_dir: str | os.PathLike[str], agent_id: str) -> Path:
    """``<state_dir>/agents/<agent_id>/sessions``."""
    return Path(state_dir) / "agents" / check_session_id(agent_id) / "sessions"


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


def read_transcript(path: str | os.PathLike[str]) -> list[TranscriptMessage]:
    """Read the message records of a JSONL transcript; bad lines are skipped.

    A missing file reads as an empty transcript.
    """
    p = Path(path)
    try:
        raw = p.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    out: list[TranscriptMessage] = []
    for lineno, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            log.debug("skipping malformed transcript line %s:%d", p.name, lineno)
            continue
        if not isinstance(record, dict) or record.get("type") != "message":
            continue
        message = record.get("message")
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            continue
        calls = message.get("tool_calls") or ()
        out.append(
            TranscriptMessage(
                role=message["role"],
                content=message.get("content"),
                timestamp=str(record.get("timestamp") or ""),
                line=lineno,
                tool_calls=tuple(c for c in calls if isinstance(c, Mapping)),
                extra={
                    k: v for k, v in message.items() if k not in ("role", "content", "tool_calls")
                },
            )
        )
    return out


class TranscriptStore:
    """The JSONL transcripts of one agent: ``<state_dir>/agents/<agent_id>/sessions/*.jsonl``.

    Also keeps ``sessions.json``, a small map from session key to the current session id,
    so a restarted process continues the same session.

    Args:
        state_dir: The memmw state directory.
        agent_id: The agent whose sessions these are.
    """

    def __init__(self, state_dir: str | os.PathLike[str], agent_id: str) -> None:
        self.dir = sessions_dir(state_dir, agent_id)

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

        Args:
            session_id: The session.
            role: Message role.
            content: String or JSON-serialisable content blocks.
            timestamp: ISO time; default now (UTC).
            **fields: Extra message fields (``tool_calls``, ``tool_call_id``, ``id``...).
        """
        message: dict[str, Any] = {"role": role, "content": content}
        message.update({k: v for k, v in fields.items() if v is not None})
        record = {"type": "message", "message": message, "timestamp": timestamp or _utc_now_iso()}
        line = json.dumps(record, ensure_ascii=False, default=str) + "\n"
        path = self.path(session_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        with exclusive_lock(lock_path_for(path)), path.open("a", encoding="utf-8") as fh:
            fh.write(line)

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
