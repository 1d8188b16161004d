"""``write_note(whole_sha256=...)`` and ``restore_note``: a write refused when the note is no
longer the bytes the caller read; a restore only over the bytes the caller left."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memmw.errors import NoteEditError
from memmw.workspace.files import LineEdit, restore_note, write_note


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_a_write_is_refused_when_the_note_changed_even_by_an_append(tmp_path: Path) -> None:
    note = tmp_path / "MEMORY.md"
    note.write_bytes(b"- a\n")
    seen = sha(note.read_bytes())
    with note.open("ab") as fh:
        fh.write(b"- b\n")
    with pytest.raises(NoteEditError):
        write_note(note, append="- c", whole_sha256=seen)
    assert note.read_bytes() == b"- a\n- b\n"
    write_note(note, append="- c", whole_sha256=sha(b"- a\n- b\n"))
    assert note.read_bytes() == b"- a\n- b\n- c\n"


def test_a_missing_note_is_the_hash_of_no_bytes(tmp_path: Path) -> None:
    note = tmp_path / "active-context.md"
    write_note(note, append="- now", whole_sha256=sha(b""))
    assert note.read_bytes() == b"- now\n"
    restore_note(note, None, whole_sha256=sha(b"- now\n"))
    assert not note.exists()


@settings(max_examples=60, deadline=None)
@given(
    before=st.binary(max_size=200).map(lambda b: b.replace(b"\x00", b"")),
    line=st.text(alphabet="abc xyz", min_size=1, max_size=20),
)
def test_restore_puts_back_the_exact_bytes(tmp_path_factory: pytest.TempPathFactory, before: bytes, line: str) -> None:
    note = tmp_path_factory.mktemp("n") / "MEMORY.md"
    note.write_bytes(before)
    try:
        write_note(note, append=line, whole_sha256=sha(before))
    except Exception:
        return  # content the writer refuses (not UTF-8 text): nothing to restore
    after = note.read_bytes()
    restore_note(note, before, whole_sha256=sha(after))
    assert note.read_bytes() == before


def test_restore_refuses_when_the_note_changed_since(tmp_path: Path) -> None:
    note = tmp_path / "MEMORY.md"
    note.write_bytes(b"- a\n")
    write_note(note, edits=[LineEdit(1, lambda s: s + " (more)")], whole_sha256=sha(b"- a\n"))
    with note.open("ab") as fh:
        fh.write(b"- human\n")
    with pytest.raises(NoteEditError):
        restore_note(note, b"- a\n", whole_sha256=sha(b"- a (more)\n"))
    assert note.read_bytes() == b"- a (more)\n- human\n"
