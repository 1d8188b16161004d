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


# -- principals: who a session is with ---------------------------------------------------

#: A principal id (after folding to lower case): path-safe, one path component, no
#: leading or trailing punctuation. Full match only.
PRINCIPAL_PATTERN = re.compile(r"[a-z0-9](?:[a-z0-9._@+-]{0,126}[a-z0-9])?")
#: ``MemoryConfig.dm_scope`` values: ``main`` (every DM is the owner's, as OpenClaw's
#: default scope) or ``per-peer`` (the peer named in a DM's session key is its principal).
DM_SCOPES = ("main", "per-peer")
_THREAD_WORDS = frozenset({"thread", "topic"})


def check_principal_id(value: object, what: str = "principal") -> str:
    """The canonical form of a principal id (ASCII lower case), or a clear ``ConfigError``.

    A principal id names one person (a DM's sender) or one group or channel; it is also a
    folder name (``memory/people/<id>/``), so it must be 1-128 characters of ASCII letters,
    digits, ``.``, ``_``, ``@``, ``+`` and ``-``, starting and ending with a letter or
    digit (:data:`PRINCIPAL_PATTERN`, matched in full). Case does not count: ``Alice`` and
    ``alice`` are one principal (the privacy gate compares folded paths).
    """
    from memmw.errors import ConfigError

    text = value.lower() if isinstance(value, str) and value.isascii() else None
    if text is None or PRINCIPAL_PATTERN.fullmatch(text) is None:
        raise ConfigError(
            f"{what} must be 1-128 ASCII letters, digits, '.', '_', '@', '+' or '-', starting "
            f"and ending with a letter or digit (no spaces, slashes or colons); got {value!r}"
        )
    return text


def peer_of_key(session_key: str | None, private_kinds: Iterable[str] | None = None) -> str | None:
    """The peer a direct session key names, as a principal id, else None (the owner).

    OpenClaw's DM scopes spell keys ``agent:<id>:dm:<peer>`` (``per-peer``),
    ``agent:<id>:<channel>:dm:<peer>`` (``per-channel-peer``) and
    ``agent:<id>:<channel>:<account>:dm:<peer>``; the id is every token but the agent
    prefix and the private kind, joined by ``-``: ``alice``, ``telegram-7``,
    ``matrix-@bob-example.org``; trailing ``thread:<id>`` / ``topic:<id>`` pairs are
    dropped (a DM's threads are the same person). A key without a private-kind token followed by a peer (``main``,
    ``agent:main:main``) names no peer. A peer that is not a valid id as it stands is
    spelled as a slug plus a hash of the key, so two keys never share a principal unless
    they are equal up to case.
    """
    if session_key is None:
        return None
    kinds = _private_kinds(private_kinds)
    tokens = _key_tokens(str(session_key))
    while len(tokens) >= 2 and fold(tokens[-2]) in _THREAD_WORDS:
        tokens = tokens[:-2]
    for i, token in enumerate(tokens[:-1]):
        if fold(token) in kinds:
            parts = tokens[:i] + tokens[i + 1 :]
            joined = "-".join(parts).lower()
            if joined.isascii() and PRINCIPAL_PATTERN.fullmatch(joined):
                return joined
            key = fold(session_key)
            slug = re.sub(r"[^a-z0-9]+", "-", fold("-".join(parts))).strip("-")[:40].strip("-")
            digest = hashlib.sha1(key.encode("utf-8", "surrogatepass")).hexdigest()[:8]
            return f"{slug or 'peer'}-{digest}"
    return None


def principal_for(
    session_key: str | None,
    chat_type: str | None = None,
    principal: str | None = None,
    *,
    dm_scope: str = "main",
    owner_principals: Iterable[str] = (),
    private_kinds: Iterable[str] | None = None,
) -> str | None:
    """The principal of a direct session: None for the owner, else a validated id.

    The host's ``principal`` wins (validated by :func:`check_principal_id`); without one,
    ``dm_scope = "per-peer"`` takes the peer of the session key (:func:`peer_of_key`) and
    ``main`` (the default) keeps every DM the owner's, as before principals existed. An id
    listed in ``owner_principals`` is the owner. Group and channel sessions have no person
    principal (their notes are scoped by :func:`group_scope`): None.

    Raises:
        ConfigError: a bad principal id, or an unknown ``dm_scope``.
    """
    from memmw.errors import ConfigError

    if dm_scope not in DM_SCOPES:
        raise ConfigError(f"dm_scope must be one of {', '.join(DM_SCOPES)}; got {dm_scope!r}")
    if chat_type_for(session_key, chat_type, private_kinds) != "direct":
        if principal is not None:
            check_principal_id(principal)
        return None
    if principal is not None:
        found: str | None = check_principal_id(principal)
    elif dm_scope == "per-peer":
        found = peer_of_key(session_key, private_kinds)
    else:
        found = None
    owners = {check_principal_id(p, "owner_principals entry") for p in owner_principals}
    return None if found is None or found in owners else found
