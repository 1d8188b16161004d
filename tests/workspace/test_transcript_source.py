"""Session transcripts as a source: text and line maps, redaction, deltas, indexing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memmw import MemoryConfig
from memmw.agent.tools import search_payload
from memmw.errors import PathPolicyError
from memmw.redaction import REDACTED
from memmw.workspace.transcript_source import (
    DeltaThresholds,
    SessionDeltaTracker,
    list_transcript_files,
    transcript_document,
)
from memmw.workspace.transcripts import TranscriptStore, transcripts_dir

from ..conftest import make_memory

SESSIONS = MemoryConfig(provider="none", sources=("memory", "sessions"))


def jsonl(path: Path, records: list[dict[str, Any] | str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def msg(role: str, content: Any) -> dict[str, Any]:
    return {"type": "message", "message": {"role": role, "content": content}, "timestamp": "t"}


# -- documents and line maps -------------------------------------------------------------


def test_document_keeps_user_and_assistant_text_with_jsonl_lines(tmp_path: Path) -> None:
    path = jsonl(
        tmp_path / "s.jsonl",
        [
            {"type": "session", "id": "s"},  # line 1: not a message
            msg("user", "Where   does the\n\ngateway run?"),  # line 2
            msg("tool", "tool output is never indexed"),  # line 3
            "not json at all",  # line 4
            msg("assistant", [{"type": "text", "text": "On port"}, {"type": "image"},
                              {"type": "text", "text": "8080."}]),  # line 5
            msg("system", "system prompt"),  # line 6
            msg("assistant", "   "),  # line 7: empty after collapsing
            msg("user", "token is sk-proj-Abcdefghijklmnopqrstuvwx0123456789"),  # line 8
        ],
    )
    doc = transcript_document(path)
    assert doc.text.split("\n") == [
        "User: Where does the gateway run?",
        "Assistant: On port 8080.",
        f"User: token is {REDACTED}",
    ]
    assert doc.line_map == (2, 5, 8)
    assert doc.messages == 3
    assert "tool output" not in doc.text and "system prompt" not in doc.text


def test_hash_covers_text_and_line_map(tmp_path: Path) -> None:
    a = transcript_document(jsonl(tmp_path / "a.jsonl", [msg("user", "hello")]))
    b = transcript_document(jsonl(tmp_path / "b.jsonl", [{"type": "x"}, msg("user", "hello")]))
    assert a.text == b.text and a.hash != b.hash


def test_chunks_map_back_to_jsonl_lines(tmp_path: Path) -> None:
    records: list[dict[str, Any] | str] = []
    for i in range(40):
        records.append(msg("user", f"question {i} " + "word " * 30))
        records.append(msg("tool", "ignored"))
    doc = transcript_document(jsonl(tmp_path / "long.jsonl", records))
    chunks = doc.chunks(tokens=100, overlap=20)
    assert len(chunks) > 3
    for chunk in chunks:
        pieces = chunk.piece_lines()
        assert pieces[0] == chunk.start_line and pieces[-1] == chunk.end_line
        # user messages sit on odd JSONL lines; tool lines in between are skipped.
        assert all(n % 2 == 1 for n in pieces)
        assert len(pieces) == chunk.text.count("\n") + 1
    assert chunks[0].start_line == 1 and chunks[-1].end_line == 79


def test_session_file_listing(tmp_path: Path) -> None:
    d = tmp_path / "sessions"
    for name in ["a.jsonl", "b.jsonl.reset.2026-01-01T00-00-00.000Z",
                 "c.jsonl.deleted.2026-01-01T00-00-00.000Z", "sessions.json", "d.jsonl.bak.1",
                 "e.trajectory.jsonl", "f.jsonl.lock", ".hidden.jsonl"]:
        jsonl(d / name, [msg("user", "x")])
    (d / "link.jsonl").symlink_to(d / "a.jsonl")
    assert [p.name for p in list_transcript_files(d)] == [
        "a.jsonl", "b.jsonl.reset.2026-01-01T00-00-00.000Z",
        "c.jsonl.deleted.2026-01-01T00-00-00.000Z",
    ]
    assert list_transcript_files(tmp_path / "missing") == []


# -- delta tracking ----------------------------------------------------------------------


def append_lines(path: Path, n: int, size: int = 10) -> None:
    with path.open("a", encoding="utf-8") as fh:
        for _ in range(n):
            fh.write("x" * (size - 1) + "\n")


def test_delta_messages_threshold(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text("")
    tracker = SessionDeltaTracker(DeltaThresholds(delta_bytes=10**9, delta_messages=50))
    tracker.prime([path])
    append_lines(path, 49)
    assert tracker.observe(path) is False
    assert tracker.pending() == {str(path): (490, 49)}
    append_lines(path, 1)
    assert tracker.observe(path) is True
    assert str(path) not in tracker.pending()  # thresholds subtracted
    assert tracker.observe(path) is False  # no growth, no hit


def test_delta_bytes_threshold_and_reset(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text("")
    tracker = SessionDeltaTracker(DeltaThresholds(delta_bytes=1000, delta_messages=10**6))
    tracker.prime([path])
    append_lines(path, 1, size=999)
    assert tracker.observe(path) is False
    append_lines(path, 1, size=2)
    assert tracker.observe(path) is True
    append_lines(path, 1, size=500)
    tracker.observe(path)
    tracker.indexed()
    assert tracker.pending() == {}


def test_delta_shrink_counts_the_whole_file_and_zero_means_any_growth(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    append_lines(path, 10)
    tracker = SessionDeltaTracker(DeltaThresholds(delta_bytes=50, delta_messages=1000))
    tracker.prime([path])
    path.write_text("y" * 60 + "\n")  # rewritten shorter: counts as 61 new bytes
    assert tracker.observe(path) is True
    eager = SessionDeltaTracker(DeltaThresholds(delta_bytes=0, delta_messages=0))
    eager.prime([path])
    append_lines(path, 1, size=2)
    assert eager.observe(path) is True


def test_unknown_file_counts_from_zero_and_vanished_file_is_a_change(tmp_path: Path) -> None:
    path = tmp_path / "new.jsonl"
    append_lines(path, 3)
    tracker = SessionDeltaTracker(DeltaThresholds(delta_bytes=10**6, delta_messages=3))
    assert tracker.observe(path) is True
    path.unlink()
    assert tracker.observe(path) is True
    assert tracker.observe(path) is False


# -- indexing through Memory ----------------------------------------------------------------


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "memory").mkdir(parents=True)
    (root / "MEMORY.md").write_text("- The gateway runs on port 8080.\n", encoding="utf-8")
    return root


def test_transcripts_are_indexed_redacted_and_cited(ws: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    store = TranscriptStore(state, "main")
    store.append("s1", "user", "The wombat sanctuary opens at nine on Sundays")
    store.append("s1", "tool", "wombat tool output must stay out")
    store.append("s1", "assistant", "Noted: wombat sanctuary, api_key=wombat-secret-123")
    with make_memory(workspace=ws, state_dir=state, config=SESSIONS) as mem:
        report = mem.sync()
        assert report.files_added == 2
        hits = mem.search("wombat sanctuary")
        assert hits and hits[0].source == "sessions"
        assert hits[0].path == "sessions/s1.jsonl"
        assert (hits[0].start_line, hits[0].end_line) == (1, 3)
        assert hits[0].citation == "sessions/s1.jsonl#L1-L3"
        text = " ".join(h.snippet for h in hits)
        assert "wombat-secret-123" not in text and REDACTED in text
        assert "tool output" not in text
        payload = search_payload(mem, "wombat sanctuary")
        assert payload["results"][0]["source"] == "sessions"
        status = mem.status().to_dict()
        assert status["sourceCounts"]["sessions"]["files"] == 1
        # memory_get stays limited to memory files.
        with pytest.raises(PathPolicyError):
            mem.get("sessions/s1.jsonl")
        with pytest.raises(PathPolicyError):
            mem.get(str(transcripts_dir(state, "main") / "s1.jsonl"))


def test_sessions_are_off_by_default(ws: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    TranscriptStore(state, "main").append("s1", "user", "the platypus ledger")
    with make_memory(workspace=ws, state_dir=state, config=MemoryConfig(provider="none")) as mem:
        mem.sync()
        assert mem.search("platypus ledger") == []
        assert "sessions" not in mem.status().source_counts


def test_incremental_session_sync(ws: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    store = TranscriptStore(state, "main")
    store.append("s1", "user", "first note about capybaras")
    with make_memory(workspace=ws, state_dir=state, config=SESSIONS) as mem:
        mem.sync()
        again = mem.sync()
        assert again.files_unchanged == 2 and not again.changed
        store.append("s1", "tool", "tool lines do not change the indexed text")
        touched = mem.sync()
        assert not touched.changed  # same text: only the file record is updated
        store.append("s1", "assistant", "second note about axolotls")
        grown = mem.sync()
        assert grown.files_changed == 1
        assert [h.path for h in mem.search("axolotls")] == ["sessions/s1.jsonl"]
        store.rotate("s1")  # archived name is indexed; the old path is dropped
        rotated = mem.sync()
        assert rotated.files_added == 1 and rotated.files_removed == 1
        assert mem.search("axolotls")[0].path.startswith("sessions/s1.jsonl.reset.")


def test_full_rebuild_equals_incremental_with_sessions(ws: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    store = TranscriptStore(state, "main")
    for i in range(30):
        store.append("s2", "user" if i % 2 else "assistant", f"turn {i} about the heron colony")
    with make_memory(workspace=ws, state_dir=state, config=SESSIONS) as mem:
        mem.sync()
        store.append("s2", "user", "late addition about herons")
        mem.sync()
        inc = [(h.path, h.start_line, h.end_line) for h in mem.search("heron colony", 20)]
        mem.sync(force=True)
        full = [(h.path, h.start_line, h.end_line) for h in mem.search("heron colony", 20)]
    assert inc == full and inc
