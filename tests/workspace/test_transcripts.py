"""JSONL session transcripts and the session index."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memmw.workspace.transcripts import TranscriptStore, check_session_id, read_transcript


def test_append_writes_the_original_line_shape(tmp_path: Path) -> None:
    store = TranscriptStore(tmp_path, "main")
    store.append("s1", "user", "hello", timestamp="2026-01-01T00:00:00Z")
    store.append("s1", "assistant", "", tool_calls=[{"id": "c1", "name": "memory_search"}])
    path = tmp_path / "agents" / "main" / "sessions" / "s1.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    assert first == {
        "type": "message",
        "message": {"role": "user", "content": "hello"},
        "timestamp": "2026-01-01T00:00:00Z",
    }
    records = store.read("s1")
    assert [r.role for r in records] == ["user", "assistant"]
    assert records[1].tool_calls[0]["name"] == "memory_search"
    assert records[0].line == 1 and store.size_bytes("s1") == path.stat().st_size


def test_read_skips_bad_lines_and_foreign_records(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text(
        '{"type":"session","id":"x"}\nnot json\n'
        '{"type":"message","message":{"role":"user","content":[{"type":"text","text":"hi"}]}}\n',
        encoding="utf-8",
    )
    records = read_transcript(path)
    assert len(records) == 1 and records[0].text == "hi" and records[0].line == 3
    assert read_transcript(tmp_path / "missing.jsonl") == []


def test_rotate_and_session_index(tmp_path: Path) -> None:
    store = TranscriptStore(tmp_path, "main")
    assert store.rotate("nope") is None
    store.append("s1", "user", "hello")
    rotated = store.rotate("s1")
    assert rotated is not None and ".jsonl.reset." in rotated.name and rotated.exists()
    assert store.read("s1") == [] and list(store.iter_sessions()) == []
    store.bind_session("agent:main:main", "s2")
    assert store.current_session("agent:main:main") == "s2"
    assert store.current_session("other") is None


@pytest.mark.parametrize("bad", ["", "../x", "a/b", ".hidden", "a" * 201])
def test_unsafe_session_ids_are_rejected(bad: str) -> None:
    with pytest.raises(ValueError):
        check_session_id(bad)


@pytest.mark.parametrize("session_id", ["s1\n", "s1\r", "\ns1"])
def test_session_ids_with_line_breaks_are_refused(session_id: str) -> None:
    from memmw.errors import ConfigError
    from memmw.workspace.transcripts import check_session_id

    with pytest.raises(ConfigError, match="session id"):
        check_session_id(session_id)
