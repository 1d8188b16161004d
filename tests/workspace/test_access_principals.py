"""The privacy gate with principals (issue 24): each person's memory is theirs alone.

Property: no spelling of another principal's file, of the owner's private files or of a
group's notes, and no symlink or hard link to one, is readable by a principal's session;
no spelling or link of a principal's file is readable by the owner or a group. Each
principal reads its own folder, shared topic notes and extra paths.
"""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memmw.chat_type import group_scope
from memmw.config import ExtraPath
from memmw.errors import ConfigError
from memmw.workspace.access import SessionAccess
from memmw.workspace.transcripts import principal_session_id, transcript_principal

from ..conftest import write

GROUP_KEY = "agent:main:telegram:group:42"
SCOPE = group_scope(GROUP_KEY)
#: Whose each file is: "owner" (private to the owner), a principal id, a group, or shared.
FILES = {
    "MEMORY.md": "owner",
    "USER.md": "owner",
    "active-context.md": "owner",
    "memory/2026-03-10.md": "owner",
    "memory/principals/alice/USER.md": "alice",
    "memory/principals/alice/2026-03-10.md": "alice",
    # Hard-linked into bob's folder too: one file, two owners, so nobody reads it.
    "memory/principals/alice/2026-03-10-talk.md": "mixed",
    "memory/principals/bob/MEMORY.md": "bob",
    "memory/principals/bob/notes/topic.md": "bob",
    f"memory/groups/{SCOPE}/2026-03-10.md": "group",
    "memory/topics/shared.md": "shared",
    "shared/ref.md": "shared",
}
#: Links: a hard link and a symlink in shared places to each person's note.
LINKS = {
    "memory/topics/hard-alice.md": "alice",
    "memory/topics/sym-bob.md": "bob",
    "shared/hard-alice.md": "alice",
    # Two owners (the name says one, the file another): nobody reads it (fail closed).
    "memory/principals/bob/hard-alice.md": "mixed",  # bob's folder, alice's file
    "memory/principals/alice/sym-user.md": "mixed",  # alice's folder, the owner's USER.md
}
SESSIONS = {
    "owner": {"session_key": "main"},
    "alice": {"session_key": "agent:main:telegram:dm:1", "principal": "alice"},
    "bob": {"session_key": "agent:main:dm:bob", "dm_scope": "per-peer"},
    "group": {"session_key": GROUP_KEY},
}
#: What each session may read.
MAY = {
    "owner": {"owner", "group", "shared"},
    "alice": {"alice", "shared"},
    "bob": {"bob", "shared"},
    "group": {"group", "shared"},
}


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("principals") / "ws"
    for rel, whose in FILES.items():
        write(root / rel, f"- text of {whose}\n")
    os.link(root / "memory/principals/alice/2026-03-10.md", root / "memory/topics/hard-alice.md")
    os.symlink("../principals/bob/MEMORY.md", root / "memory/topics/sym-bob.md")
    os.link(root / "memory/principals/alice/USER.md", root / "shared/hard-alice.md")
    os.link(root / "memory/principals/alice/2026-03-10-talk.md",
            root / "memory/principals/bob/hard-alice.md")
    os.symlink("../../../USER.md", root / "memory/principals/alice/sym-user.md")
    return root


def gate(ws: Path, who: str) -> SessionAccess:
    return SessionAccess.for_session(ws, (ExtraPath(path="shared"),), **SESSIONS[who])  # type: ignore[arg-type]


def test_each_session_reads_exactly_its_own_and_shared_files(ws: Path) -> None:
    for who in SESSIONS:
        g = gate(ws, who)
        for rel, whose in {**FILES, **LINKS}.items():
            verdict = g.check(rel)
            assert verdict.readable == (whose in MAY[who]), (who, rel, verdict)
            if verdict.readable and rel.startswith(f"memory/principals/{who}/"):
                assert verdict.trusted  # a person's own notes are memory for them


def test_principal_of_sessions() -> None:
    ws = Path("/nonexistent")
    assert SessionAccess.for_session(ws, session_key="main").principal is None
    assert SessionAccess.for_session(ws, session_key="agent:main:telegram:dm:7").principal is None
    per_peer = SessionAccess.for_session(
        ws, session_key="agent:main:telegram:dm:7", dm_scope="per-peer"
    )
    assert per_peer.principal == "telegram-7"
    assert per_peer.notes_dir == "memory/principals/telegram-7"
    owner = SessionAccess.for_session(ws, session_key="agent:main:telegram:dm:7",
                                      dm_scope="per-peer", owner_principals=["Telegram-7"])
    assert owner.principal is None and owner.notes_dir == "memory"
    hosted = SessionAccess.for_session(ws, session_key="main", principal="Alice")
    assert hosted.principal == "alice"
    group = SessionAccess.for_session(ws, session_key=GROUP_KEY, principal="team-42")
    assert group.principal is None and group.scope == "team-42"
    for bad in ("../x", "a/b", "", ".", "..", "al ice", "alice:1", "ａｌｉｃｅ", "-x", "x.", "a\x00b"):
        with pytest.raises(ConfigError, match="principal must be"):
            SessionAccess.for_session(ws, session_key="main", principal=bad)


def test_transcripts_belong_to_their_principal() -> None:
    sid = principal_session_id("20260310T140530-abcd1234", "alice")
    assert sid == "20260310T140530-abcd1234=alice"
    assert principal_session_id(sid, "alice") == sid
    assert transcript_principal(f"sessions/{sid}.jsonl.reset.2026") == "alice"
    assert transcript_principal("sessions/20260310T140530-abcd1234.jsonl") is None
    ws = Path("/nonexistent")
    alice = SessionAccess(workspace=ws, principal="alice")
    owner = SessionAccess(workspace=ws)
    group = SessionAccess(workspace=ws, private=False, scope=SCOPE)
    assert alice.may_read(f"sessions/{sid}.jsonl", "sessions")
    assert not owner.may_read(f"sessions/{sid}.jsonl", "sessions")
    assert not alice.may_read("sessions/20260310T140530-abcd1234.jsonl", "sessions")
    assert owner.may_read("sessions/20260310T140530-abcd1234.jsonl", "sessions")
    assert not group.may_read(f"sessions/{sid}.jsonl", "sessions")


def _fullwidth(ch: str) -> str:
    return chr(ord(ch) + 0xFEE0) if "!" <= ch <= "~" and ch not in "/\\" else ch


@st.composite
def spelled(draw: st.DrawFn, ws: Path) -> tuple[str, str, str]:
    """A file (or link) and one way of writing it: ``(spelling, whose, file)``."""
    rel, whose = draw(st.sampled_from(sorted({**FILES, **LINKS}.items())))
    out: list[str] = []
    for part in rel.split("/"):
        for _ in range(draw(st.integers(0, 2))):
            out.append(draw(st.sampled_from([".", "memory/..", "memory/principals/../..", "x/.."])))
        style = draw(st.sampled_from(["same", "upper", "swap", "wide"]))
        out.append({
            "same": part,
            "upper": part.upper(),
            "swap": part.swapcase(),
            "wide": "".join(_fullwidth(c) for c in part),
        }[style])
    path = draw(st.sampled_from(["/", "//", "\\", "/./"])).join(out)
    if draw(st.booleans()):
        path = f"{ws}/{path}"
    path += draw(st.sampled_from(["", "/", ".", " ", "/."]))
    form = draw(st.sampled_from(["NFC", "NFD", "NFKC"]))
    return unicodedata.normalize(form, path), whose, rel


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_property_no_spelling_or_link_crosses_principals(ws: Path, data: st.DataObject) -> None:
    spelling, whose, rel = data.draw(spelled(ws))
    linked = rel in LINKS or whose == "mixed"
    if linked and gate(ws, "owner")._resolve(spelling)[1] is None:
        whose = "nothing"  # another case of a link's name is no file at all (case-sensitive)
    for who in SESSIONS:
        if whose not in MAY[who] and whose != "nothing":
            assert not gate(ws, who).may_read(spelling), (who, spelling, whose)
