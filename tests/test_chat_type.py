"""Chat types fail closed (issue 19 item 2): only the explicit private kinds are direct.

Property (b): generated chat-type values and session keys are direct only when they are one
of the private kinds (and carry no group identifier); everything else is a group.
"""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memmw.chat_type import (
    DEFAULT_PRIVATE_KINDS,
    chat_type_for,
    citations_enabled,
    group_scope,
    is_group_session,
)
from memmw.config import MemoryConfig


@pytest.mark.parametrize(
    "explicit", ["mpim", "guild", "group", "channel", "supergroup", "GROUP", " Channel ",
                 "shared", "room", "thread", "unknown", "public", "multi", "x"]
)
def test_non_private_chat_types_are_groups(explicit: str) -> None:
    assert chat_type_for(None, explicit) == "group"
    assert chat_type_for("main", explicit) == "group"


@pytest.mark.parametrize("explicit", ["direct", "dm", "im", "private", "main", " DM ", "Ｄｍ"])
def test_private_chat_types_are_direct(explicit: str) -> None:
    assert chat_type_for(None, explicit) == "direct"


@pytest.mark.parametrize(
    "key",
    [
        "agent:main:whatsapp:120363025246125888@g.us",
        "agent:main:whatsapp:status@broadcast",
        "agent:main:telegram:-1001234567890",
        "agent:main:telegram:group:-1001234567890",
        "telegram:-4242",
        "agent:main:discord:guild:1234:987",
        "agent:main:discord:channel:987",
        "agent:main:slack:mpim:abc",
        "agent:main:slack:C0123456789",
        "agent:main:slack:G0123456789",
        "agent:main:matrix:!room",
        "agent:main:imessage:chat123456",
        "agent:main:telegram:supergroup:42",
        "agent:main:xmpp:room@conference.example.org",
        "agent:main:slack:weird:x",  # platform:<unknown kind>:peer fails closed
    ],
)
def test_keys_with_group_identifiers_are_groups(key: str) -> None:
    assert chat_type_for(key) == "group"
    assert chat_type_for(key, "direct") == "group"  # metadata cannot make a group private


@pytest.mark.parametrize(
    "key", [None, "", "main", "agent:main:main", "agent:main:telegram:dm:7", "s1",
            "agent:main:msteams:dm:29", "agent:main:workspace-bot",
            "agent:main:whatsapp:+15551234567", "agent:main:slack:im:D0123", "telegram:123"]
)
def test_direct_keys(key: str | None) -> None:
    assert chat_type_for(key) == "direct"


def test_private_kinds_are_configurable() -> None:
    config = MemoryConfig(private_chat_types=("direct", "dm", "owner"))
    assert chat_type_for(None, "owner", config.private_chat_types) == "direct"
    assert chat_type_for(None, "im", config.private_chat_types) == "group"
    assert chat_type_for(None, "direct", ()) == "direct"  # memmw's own canonical value
    assert MemoryConfig.from_dict({"privateChatTypes": ["DM "]}).private_chat_types == ("dm",)


def test_citations_follow_the_fail_closed_type() -> None:
    assert not citations_enabled("auto", "agent:main:whatsapp:1@g.us")
    assert not citations_enabled("auto", None, "mpim")
    assert citations_enabled("auto", "agent:main:telegram:dm:7")


def test_group_scope_is_a_safe_distinct_folder_name() -> None:
    a = group_scope("agent:main:telegram:group:42")
    b = group_scope("agent:main:telegram:group:43")
    assert a != b and a.startswith("telegram-group-42-")
    assert group_scope("../../etc") .replace("-", "").isalnum()


_KINDS = st.one_of(
    st.sampled_from(["group", "channel", "mpim", "guild", "supergroup", "shared", "room",
                     "direct", "dm", "im", "private", "main", "thread", "public", ""]),
    st.text(min_size=0, max_size=12),
)


def _variant(draw: st.DrawFn, text: str) -> str:
    style = draw(st.sampled_from(["same", "upper", "title", "space", "wide", "nfd"]))
    if style == "upper":
        return text.upper()
    if style == "title":
        return text.title()
    if style == "space":
        return f"  {text}\t"
    if style == "wide":
        return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)
    if style == "nfd":
        return unicodedata.normalize("NFD", text)
    return text


def _fold(text: str) -> str:
    text = unicodedata.normalize("NFKC", text)
    return "".join(c for c in text if unicodedata.category(c) != "Cf").strip().casefold()


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_property_only_private_kinds_are_direct(data: st.DataObject) -> None:
    kind = data.draw(_KINDS)
    explicit = _variant(data.draw, kind)
    result = chat_type_for(None, explicit)
    folded = _fold(explicit)
    if not folded:
        assert result == "direct"  # no metadata at all: the (missing) key decides
    else:
        assert (result == "direct") == (folded in DEFAULT_PRIVATE_KINDS), explicit


_GROUP_TOKENS = st.sampled_from(
    ["group", "channel", "guild", "mpim", "supergroup", "room", "120363@g.us", "-1001234567",
     "-42", "C0123456789", "!abc", "chat12345", "GROUP", "Channel_7", "groupchat"]
)


@settings(max_examples=300, deadline=None)
@given(
    platform=st.sampled_from(["telegram", "whatsapp", "slack", "discord", "signal", "x"]),
    before=st.lists(st.sampled_from(["dm", "7", "main", "direct", "abc"]), max_size=2),
    token=_GROUP_TOKENS,
    after=st.lists(st.sampled_from(["1", "42", "thread", "dm", "x"]), max_size=2),
    prefix=st.booleans(),
    explicit=st.sampled_from([None, "direct", "dm", "private", "main"]),
)
def test_property_a_group_identifier_anywhere_in_the_key_makes_a_group(
    platform: str, before: list[str], token: str, after: list[str], prefix: bool,
    explicit: str | None,
) -> None:
    key = ":".join([*(["agent", "main"] if prefix else []), platform, *before, token, *after])
    assert is_group_session(key, explicit), key


# -- principals (issue 24) ------------------------------------------------------------------

from memmw.chat_type import (  # noqa: E402
    PRINCIPAL_PATTERN,
    check_principal_id,
    peer_of_key,
    principal_for,
)
from memmw.errors import ConfigError  # noqa: E402


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_property_principal_ids_are_one_safe_path_component_or_an_error(value: str) -> None:
    try:
        pid = check_principal_id(value)
    except ConfigError as exc:
        assert "principal must be" in str(exc)
        return
    assert PRINCIPAL_PATTERN.fullmatch(pid) and pid == value.lower()
    assert pid not in (".", "..") and not {"/", "\\", ":", " ", "\x00"} & set(pid)
    assert pid == pid.strip(" .") and pid.isascii()


@pytest.mark.parametrize(
    ("key", "peer"),
    [
        ("main", None),
        ("agent:main:main", None),
        (None, None),
        ("agent:main:dm:alice", "alice"),  # OpenClaw dmScope per-peer
        ("agent:main:telegram:dm:7", "telegram-7"),  # per-channel-peer
        ("agent:ops:whatsapp:direct:+15550001", "whatsapp-+15550001"),
        ("agent:main:telegram:dm:7:thread:3", "telegram-7"),  # a DM's thread: same person
        ("agent:main:matrix:dm:@bob:example.org", "matrix-@bob-example.org"),
    ],
)
def test_peer_of_openclaw_dm_keys(key: str | None, peer: str | None) -> None:
    assert peer_of_key(key) == peer


def test_a_peer_that_is_no_valid_id_gets_a_slug_and_hash() -> None:
    a = peer_of_key("agent:main:dm:Zoë/../x")
    b = peer_of_key("agent:main:dm:Zoë/../y")
    assert a is not None and b is not None and a != b
    assert check_principal_id(a) == a and check_principal_id(b) == b


def test_principal_for_keeps_the_owner_by_default() -> None:
    key = "agent:main:telegram:dm:7"
    assert principal_for(key) is None  # dm_scope "main": as before principals existed
    assert principal_for(key, dm_scope="per-peer") == "telegram-7"
    assert principal_for(key, dm_scope="per-peer", owner_principals=["telegram-7"]) is None
    assert principal_for(key, principal="Alice") == "alice"  # the host's word wins
    assert principal_for("main", principal="carol", owner_principals=["carol"]) is None
    assert principal_for("agent:main:telegram:group:42", principal="g42") is None  # a group
    with pytest.raises(ConfigError, match="dm_scope"):
        principal_for(key, dm_scope="per-channel")
    with pytest.raises(ConfigError, match="principal must be"):
        principal_for(key, principal="../owner")


def test_config_checks_dm_scope_and_owner_principals() -> None:
    config = MemoryConfig(dm_scope="per-peer", owner_principals=("Telegram-7", "telegram-7"))
    assert config.owner_principals == ("telegram-7",)
    with pytest.raises(ConfigError, match="dm_scope"):
        MemoryConfig(dm_scope="per-room")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="owner_principals entry must be"):
        MemoryConfig(owner_principals=("a/b",))
    loaded = MemoryConfig.from_dict({"dmScope": "per-peer", "ownerPrincipals": ["me"]})
    assert loaded.dm_scope == "per-peer" and loaded.owner_principals == ("me",)
