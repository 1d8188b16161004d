"""Session keys: direct versus group/channel chats, and the citation mode they imply."""

from __future__ import annotations

from typing import Literal

ChatType = Literal["direct", "group"]

_GROUP_MARKERS = ("group", "channel")


def chat_type_for(session_key: str | None, explicit: str | None = None) -> ChatType:
    """Classify a session as ``direct`` or ``group``.

    Explicit metadata wins (``group``/``channel``/``shared`` mean group). Otherwise the
    ``:``-separated tokens of the key after an ``agent:<id>:`` prefix are inspected: any
    token containing ``group`` or ``channel`` makes it a group. A missing key is direct.

    Args:
        session_key: A key such as ``agent:main:telegram:group:42``.
        explicit: Chat type reported by the framework, if any.

    Returns:
        ``"direct"`` or ``"group"``.
    """
    if explicit:
        kind = explicit.strip().lower()
        if kind in ("group", "channel", "shared", "supergroup"):
            return "group"
        if kind in ("direct", "dm", "private", "main"):
            return "direct"
    if not session_key:
        return "direct"
    tokens = [t.strip().lower() for t in str(session_key).split(":")]
    if len(tokens) >= 2 and tokens[0] == "agent":
        tokens = tokens[2:]
    for token in tokens:
        if any(marker in token for marker in _GROUP_MARKERS):
            return "group"
    return "direct"


def is_group_session(session_key: str | None, explicit: str | None = None) -> bool:
    """True when the session is a group or channel chat (see :func:`chat_type_for`)."""
    return chat_type_for(session_key, explicit) == "group"


def citations_enabled(mode: str, session_key: str | None, explicit: str | None = None) -> bool:
    """Whether snippets carry ``Source: path#Lx-Ly``: ``on``, ``off``, or ``auto`` (direct only)."""
    if mode == "on":
        return True
    if mode == "off":
        return False
    return not is_group_session(session_key, explicit)


__all__ = ["ChatType", "chat_type_for", "citations_enabled", "is_group_session"]
