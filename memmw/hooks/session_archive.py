"""Session archive on /new, /reset and auto-reset: the last messages to memory/<date>-<slug>.md."""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from memmw.agent.chat import ChatModel, call_model
from memmw.agent.prompts import visible_text
from memmw.errors import PathPolicyError
from memmw.redaction import redact_all, redact_value
from memmw.workspace.files import atomic_write_text
from memmw.workspace.layout import MEMORY_DIR, archive_path
from memmw.workspace.transcripts import TranscriptMessage

log = logging.getLogger(__name__)

#: Characters of the conversation passed to the slug model.
SLUG_INPUT_CHARS = 2000
SLUG_MAX_CHARS = 30
#: An optional LLM call: conversation text in, a short filename slug out.
SlugFunction = Callable[[str], str]

_NOT_SLUG = re.compile(r"[^a-z0-9-]+")
_DASHES = re.compile(r"-{2,}")
_PROVIDER_ERROR = re.compile(
    r"^\s*(error|exception|traceback|sorry|i can|i cannot|i can't|i'm|i am)\b"
    r"|rate.?limit|quota|api.?key|status code|unauthori[sz]ed|overloaded|\b429\b",
    re.IGNORECASE,
)
#: Answers with more words than this are prose, not a slug.
_MAX_SLUG_WORDS = 6
#: Chat-template special tokens and tool/role XML tags a transcript line may carry.
_SPECIAL_TOKEN = re.compile(r"<\|[^|<>]{1,40}\|>")
_ROLE_XML = re.compile(
    r"</?(?:tool_call|tool_result|tool_use|function_calls?|function_results?|invoke|"
    r"parameter|system|user|assistant|human|im_start|im_end)\b[^>]{0,200}>",
    re.IGNORECASE,
)
SLUG_PROMPT = (
    "Name this conversation for a file name: reply with a slug of one or two lowercase "
    "English words joined by a hyphen, no file extension and nothing else "
    "(examples: vendor-pitch, api-design, bug-fix, trip-planning)."
)


def clean_archive_text(text: str) -> str:
    """Remove chat-template special tokens and tool/role XML tags from a line's text."""
    text = _SPECIAL_TOKEN.sub("", text)
    return _ROLE_XML.sub("", text).strip()


def collect_archive_lines(
    messages: Sequence[TranscriptMessage], limit: int = 15
) -> list[tuple[str, str]]:
    """The last ``limit`` user/assistant lines worth archiving, oldest first (pure).

    Dropped: other roles, tool calls and results, slash commands, empty text, silent
    (``NO_REPLY``) replies and a row repeating the one before it (a mirrored message);
    ``NO_REPLY`` tokens, special tokens and tool/role XML are stripped from the rest.
    """
    lines: list[tuple[str, str]] = []
    for message in messages:
        if message.role not in ("user", "assistant"):
            continue
        text = clean_archive_text(message.text)
        if not text:
            continue
        if message.role == "user" and text.startswith("/"):
            continue
        if message.role == "assistant":
            shown = visible_text(text)
            if not shown:
                continue
            text = shown
        if lines and lines[-1] == (message.role, text):
            continue
        lines.append((message.role, text))
    return lines[-limit:] if limit > 0 else []


def redact_lines(lines: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The archive lines through memmw's one redaction pass (:mod:`memmw.redaction`), in
    order, so a key pasted over two messages is hidden whole; run before the slug model
    sees the text and before the note is written."""
    texts = redact_all([text for _role, text in lines])
    return [(role, text) for (role, _old), text in zip(lines, texts, strict=True)]


def archive_line(role: str, text: str) -> str:
    """One archive line, ``role: "text"``: the text JSON-quoted, so a multi-line message
    can never start a line of its own (no forged ``## headings`` or ``user:`` rows)."""
    return f"{role}: {json.dumps(text, ensure_ascii=False)}"


def clean_slug(raw: str | None) -> str | None:
    """Turn a model's answer into a filename slug (a-z, 0-9, ``-``; at most 30 chars).

    Returns:
        The slug, or None when nothing usable remains or the text looks like a
        provider error rather than a slug.
    """
    if not raw or not isinstance(raw, str):
        return None
    text = raw.strip()
    if (
        not text
        or len(text) > 200
        or len(text.split()) > _MAX_SLUG_WORDS
        or _PROVIDER_ERROR.search(text)
    ):
        return None
    slug = _NOT_SLUG.sub("-", text.lower())
    slug = _DASHES.sub("-", slug).strip("-")
    slug = slug[:SLUG_MAX_CHARS].strip("-")
    return slug or None


def llm_slug(slug_fn: SlugFunction, conversation: str, timeout_s: float) -> str | None:
    """Ask ``slug_fn`` for a slug with a timeout; any failure gives None (never raises)."""
    box: dict[str, object] = {}

    def target() -> None:
        try:
            box["value"] = slug_fn(conversation[:SLUG_INPUT_CHARS])
        except Exception as exc:
            box["error"] = exc

    worker = threading.Thread(target=target, name="memmw-slug", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        log.warning("session slug call timed out after %.1fs; using the time", timeout_s)
        return None
    if "error" in box:
        log.warning("session slug call failed: %s", type(box["error"]).__name__)
        return None
    value = box.get("value")
    slug = clean_slug(value if isinstance(value, str) else None)
    if slug is None:
        log.info("session slug answer unusable; using the time")
    return slug


def model_slug_fn(model: ChatModel) -> SlugFunction:
    """A slug function asking ``model`` (one call, no tools) for a 1-2 word slug."""

    def ask(conversation: str) -> str:
        reply = call_model(
            model,
            [
                {"role": "system", "content": SLUG_PROMPT},
                {"role": "user", "content": conversation[:SLUG_INPUT_CHARS]},
            ],
        )
        return reply.text

    return ask


def render_archive(
    lines: Sequence[tuple[str, str]],
    *,
    now: dt.datetime,
    session_key: str,
    session_id: str | None,
    source: str | None = None,
    reason: str | None = None,
) -> str:
    """The archive Markdown: H1 with the time, bold-label bullets, then the conversation."""
    tz = now.tzname() or "UTC"
    out = [
        f"# Session: {now.strftime('%Y-%m-%d %H:%M:%S')} {tz}",
        "",
        f"- **Session Key**: {session_key}",
        f"- **Session ID**: {session_id or 'unknown'}",
    ]
    if reason:
        out.append(f"- **Reason**: {reason}")
    else:
        out.append(f"- **Source**: {source or 'unknown'}")
    if lines:
        out += ["", "## Conversation Summary", ""]
        out += [archive_line(role, text) for role, text in lines]
    return "\n".join(out) + "\n"


@dataclass(frozen=True, kw_only=True)
class ArchiveRequest:
    """Inputs of one archive.

    Attributes:
        workspace: Workspace root (the file goes to ``memory/``).
        messages: The ending session's transcript (read before rotating it).
        session_key: Key of the session.
        session_id: Id of the ending session.
        now: Time in the user's timezone (names the file and dates the header).
        source: ``/new``, ``/reset`` or the caller's command source.
        reason: Set for auto-resets (``idle``, ``daily``).
        max_messages: Lines kept (the reference's 15).
        slug_fn: Optional LLM slug callable.
        slug_timeout_s: Timeout of the slug call.
        folder: Workspace-relative folder of the archive: ``memory``, or a group
            session's ``memory/groups/<scope>`` (recorded as group-written).
    """

    workspace: Path
    messages: Sequence[TranscriptMessage]
    session_key: str
    session_id: str | None
    now: dt.datetime
    source: str | None = None
    reason: str | None = None
    max_messages: int = 15
    slug_fn: SlugFunction | None = None
    slug_timeout_s: float = 15.0
    folder: str = MEMORY_DIR


def archive_session(request: ArchiveRequest) -> Path | None:
    """Write the archive of an ending session; never raises.

    Returns:
        The file written, or None when the transcript had nothing to keep or on failure.
    """
    try:
        lines = redact_lines(collect_archive_lines(request.messages, request.max_messages))
        if not lines:
            log.info("session %s ended with an empty transcript; no archive", request.session_id)
            return None
        slug = None
        if request.slug_fn is not None:
            conversation = "\n".join(archive_line(role, text) for role, text in lines)
            slug = llm_slug(request.slug_fn, conversation, request.slug_timeout_s)
        if slug is None:
            slug = request.now.strftime("%H%M")
        workspace = Path(request.workspace)
        memory_dir = workspace
        for part in request.folder.split("/"):
            memory_dir = memory_dir / part
            if memory_dir.is_symlink():
                raise PathPolicyError(f"{part}/ is a symlink; refusing to write the archive")
        memory_dir.mkdir(parents=True, exist_ok=True)
        target = archive_path(memory_dir, request.now.date(), slug)
        text = render_archive(
            lines,
            now=request.now,
            session_key=request.session_key,
            session_id=request.session_id,
            source=request.source,
            reason=request.reason,
        )
        atomic_write_text(target, text)
        log.info("archived session %s to %s/%s", request.session_id, request.folder, target.name)
        return target
    except Exception as exc:
        log.warning("session archive failed: %s: %s", type(exc).__name__, redact_value(exc))
        log.debug("session archive failure", exc_info=True)
        return None
