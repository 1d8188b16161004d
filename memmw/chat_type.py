"""Session keys: direct versus group/channel chats, and the citation mode they imply.

Classification fails closed: only the explicit private kinds are direct; every other
chat-type value, and every session key carrying a group identifier, is a group.

Internal module: import its public names from ``memmw``.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable
from typing import Literal

ChatType = Literal["direct", "group"]

#: Chat kinds that are private (one person and the agent); ``MemoryConfig.private_chat_types``.
DEFAULT_PRIVATE_KINDS: tuple[str, ...] = ("direct", "dm", "im", "private", "main")
#: Words that, anywhere inside a session-key token, make the session a group.
_GROUP_WORDS = (
    "group",
    "channel",
    "guild",
    "mpim",
    "room",
    "community",
    "broadcast",
    "newsletter",
    "conference",
    "muc",
    "shared",
)
#: Group identifiers of chat platforms, matched against one raw key token.
_GROUP_IDS = (
    re.compile(r"@(g\.us|broadcast|newsletter|groups?\.|conference\.|chat\.|muc\.)", re.I),
    re.compile(r"^-\d+$"),  # Telegram: negative chat ids are groups and channels
    re.compile(r"-100\d{5,}"),  # Telegram supergroups/channels (-100...) anywhere in a token
    re.compile(r"^[CG][A-Z0-9]{8,}$"),  # Slack public (C...) and private/mpim (G...) channels
    re.compile(r"^!"),  # Matrix room ids (!room:server)
    re.compile(r"^chat\d+", re.I),  # iMessage group chats
    re.compile(r"^[CR][0-9a-f]{32}$"),  # LINE groups and rooms
)
_WORD = re.compile(r"[a-z]+")


def fold(value: object) -> str:
    """``value`` as NFKC, case-folded text without surrounding space or format characters."""
    text = unicodedata.normalize("NFKC", str(value))
    text = "".join(ch for ch in text if unicodedata.category(ch) != "Cf")
    return text.strip().casefold()


def _private_kinds(private_kinds: Iterable[str] | None) -> frozenset[str]:
    kinds = {fold(k) for k in (DEFAULT_PRIVATE_KINDS if private_kinds is None else private_kinds)}
    kinds.add("direct")  # the canonical value memmw itself passes around
    return frozenset(k for k in kinds if k)


def _key_tokens(session_key: str) -> list[str]:
    tokens = [t.strip() for t in str(session_key).split(":")]
    if len(tokens) >= 2 and fold(tokens[0]) == "agent":
        tokens = tokens[2:]
    return [t for t in tokens if t]


def key_is_group(session_key: str | None, private_kinds: Iterable[str] | None = None) -> bool:
    """True when a session key names a group or channel chat.

    A token containing a group word (``group``, ``channel``, ``guild``, ``mpim``,
    ``room``...) or a platform group identifier (WhatsApp ``...@g.us``, Telegram negative
    ids, Slack ``C``/``G`` channel ids, Matrix ``!room`` ids...) makes it a group; so does
    a ``platform:kind:peer`` key whose kind is not a private kind. A missing key, or one
    without any of these, is direct.
    """
    if session_key is None or not str(session_key).strip():
        return False
    kinds = _private_kinds(private_kinds)
    tokens = _key_tokens(str(session_key))
    for raw in tokens:
        token = fold(raw)
        if any(word in token for word in _GROUP_WORDS):
            return True
        if any(p.search(raw) or p.search(token) for p in _GROUP_IDS):
            return True
    if len(tokens) >= 3:
        kind = fold(tokens[1])
        if _WORD.fullmatch(kind) and kind not in kinds:
            return True  # platform:<unknown kind>:peer fails closed
    return False


def chat_type_for(
    session_key: str | None,
    explicit: str | None = None,
    private_kinds: Iterable[str] | None = None,
) -> ChatType:
    """Classify a session as ``direct`` or ``group``, failing closed.

    Explicit metadata decides when given: only the private kinds (``direct``, ``dm``,
    ``im``, ``private``, ``main`` by default; ``direct`` always) are direct, every other
    value (``group``, ``channel``, ``mpim``, ``guild``, unknown words) is a group. A key
    with a group identifier is a group even when the metadata says direct. Without
    metadata the key decides (:func:`key_is_group`); a missing key is direct.

    Args:
        session_key: A key such as ``agent:main:telegram:group:42``.
        explicit: Chat type reported by the framework, if any.
        private_kinds: The private kinds (default :data:`DEFAULT_PRIVATE_KINDS`).

    Returns:
        ``"direct"`` or ``"group"``.
    """
    if key_is_group(session_key, private_kinds):
        return "group"
    if explicit is not None and fold(explicit):
        return "direct" if fold(explicit) in _private_kinds(private_kinds) else "group"
    return "direct"


def is_group_session(
    session_key: str | None, explicit: str | None = None, private_kinds: Iterable[str] | None = None
) -> bool:
    """True when the session is a group or channel chat (see :func:`chat_type_for`)."""
    return chat_type_for(session_key, explicit, private_kinds) == "group"


def group_scope(session_key: str | None) -> str:
    """The folder name of a group's own notes: a readable slug of the key plus a short hash.

    Two keys never share a scope unless they are equal up to case and surrounding space.
    """
    key = fold(session_key or "")
    tokens = _key_tokens(key) or ["group"]
    slug = re.sub(r"[^a-z0-9]+", "-", "-".join(tokens)).strip("-")[:40].strip("-") or "group"
    digest = hashlib.sha1(key.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{slug}-{digest}"


def citations_enabled(
    mode: str,
    session_key: str | None,
    explicit: str | None = None,
    private_kinds: Iterable[str] | None = None,
) -> bool:
    """Whether snippets carry ``Source: path#Lx-Ly``: ``on``, ``off``, or ``auto`` (direct only)."""
    if mode == "on":
        return True
    if mode == "off":
        return False
    return not is_group_session(session_key, explicit, private_kinds)
