"""JSONL session transcripts and the session index."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memmw.text.lines import NOT_LINE_BREAKS, split_lines
from memmw.workspace import transcripts as transcripts_mod
from memmw.workspace.transcripts import (
    TranscriptStore,
    check_session_id,
    read_transcript,
    scan_transcript,
)


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


# -- bad input: one line never costs the others ---------------------------------------


def _message_line(text: str, role: str = "user") -> bytes:
    record = {"type": "message", "message": {"role": role, "content": text}}
    return json.dumps(record, ensure_ascii=False).encode("utf-8")


def test_line_separators_inside_a_record_keep_it_whole_and_numbered(tmp_path: Path) -> None:
    # json.dumps(ensure_ascii=False) writes U+2028 / U+0085 raw: still one JSONL line.
    path = tmp_path / "s.jsonl"
    texts = [f"pasted{ch}from a PDF" for ch in NOT_LINE_BREAKS]
    path.write_bytes(b"\n".join(_message_line(t) for t in texts) + b"\n")
    scan = scan_transcript(path)
    assert [m.text for m in scan.messages] == texts
    assert [m.line for m in scan.messages] == list(range(1, len(texts) + 1))
    assert scan.skipped == []
    # The numbering is the file's: line n is the n-th newline-terminated line.
    raw_lines = path.read_bytes().split(b"\n")
    for m in scan.messages:
        assert json.loads(raw_lines[m.line - 1])["message"]["content"] == m.text


def test_unreadable_lines_are_skipped_and_named(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(transcripts_mod, "MAX_TRANSCRIPT_LINE_BYTES", 20_000)
    path = tmp_path / "s.jsonl"
    lines = [
        _message_line("first"),
        b"[" * 5000 + b"]" * 5000,  # RecursionError in json.loads
        b'{"type":"message","message":{"role":"user","content":"caf\xe9"}}',  # latin-1
        b"not json",
        _message_line("x" * 30_000),  # too long
        b'{"type":"message","message":{"role":"user","content":"ok","tool_calls":5}}',
        b'{"type":"message","timestamp":' + b"[" * 900 + b"]" * 900
        + b',"message":{"role":"user","content":"deep stamp"}}',
        b"",
        _message_line("last"),
    ]
    path.write_bytes(b"\r\n".join(lines) + b"\r\n")
    scan = scan_transcript(path)
    texts = [m.text for m in scan.messages]
    assert texts[0] == "first" and texts[-1] == "last" and "ok" in texts
    assert [m.line for m in scan.messages if m.text in ("first", "ok", "last")] == [1, 6, 9]
    reasons = {s.line: s.reason for s in scan.skipped}
    assert reasons[2] == "JSON nested deeper than 256 levels"
    assert reasons[3] == "not valid UTF-8 (byte 57)"
    assert reasons[4].startswith("not JSON")
    assert reasons[5] == "longer than 20000 bytes"
    assert set(reasons) <= {2, 3, 4, 5, 7}  # line 7 parses or is skipped, never fatal
    assert read_transcript(path) == scan.messages


@pytest.mark.parametrize("session_id", ["s1\n", "s1\r", "\ns1"])
def test_session_ids_with_line_breaks_are_refused(session_id: str) -> None:
    from memmw.errors import ConfigError
    from memmw.workspace.transcripts import check_session_id

    with pytest.raises(ConfigError, match="session id"):
        check_session_id(session_id)


# -- one redaction pass: a pasted credential never reaches the transcript file ----------

_CORPUS = json.loads(
    (Path(__file__).resolve().parents[2] / "benchmarks" / "credential_forms.json").read_text(
        encoding="utf-8"
    )
)


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


@settings(max_examples=60, deadline=None)
@given(
    form=st.sampled_from(_CORPUS),
    before=st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20),
    where=st.sampled_from(["content", "blocks", "tool-args", "tool-args-json"]),
)
def test_a_pasted_credential_never_reaches_the_transcript_file(
    form: dict[str, str], before: str, where: str
) -> None:
    """Issue 20: transcripts are written through the one redaction pass (content, content
    blocks and tool-call arguments alike), so the JSONL on disk holds no credential."""
    with tempfile.TemporaryDirectory() as tmp:
        _append_and_check(TranscriptStore(tmp, "main"), form, before, where)


def _append_and_check(
    store: TranscriptStore, form: dict[str, str], before: str, where: str
) -> None:
    text = f"{before}\n{form['text']}\nthanks"
    if where == "content":
        store.append("s1", "user", text)
    elif where == "blocks":
        store.append("s1", "user", [{"type": "text", "text": text}])
    elif where == "tool-args":
        store.append("s1", "assistant", "", tool_calls=[{"id": "c", "args": {"note": text}}])
    else:
        store.append(
            "s1", "assistant", "", tool_calls=[{"id": "c", "arguments": json.dumps({"n": text})}]
        )
    path = store.path("s1")
    raw = path.read_text(encoding="utf-8")
    (line,) = split_lines(raw)
    decoded = " ".join(_strings(json.loads(line)))
    assert form["secret"] not in decoded, form["name"]
    assert form["secret"] not in raw, form["name"]


@settings(max_examples=40, deadline=None)
@given(text=st.text(st.characters(codec=None, categories=("Cs", "Ll", "Zs")), max_size=12))
def test_a_message_with_a_lone_surrogate_is_written_and_read_back(text: str) -> None:
    """Half an emoji (a lone surrogate, as a JS client may send) never loses the message:
    the line is written with JSON escapes and read back (the indexer later shows U+FFFD)."""
    with tempfile.TemporaryDirectory() as tmp:
        store = TranscriptStore(tmp, "main")
        store.append("s1", "user", f"before {text} after")
        (record,) = store.read("s1")
        # Read back as JSON reads it (a pair of halves joins into one character).
        assert record.text == json.loads(json.dumps(f"before {text} after"))
        store.path("s1").read_bytes().decode("utf-8")  # the file stays valid UTF-8
