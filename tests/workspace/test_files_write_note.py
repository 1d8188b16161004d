"""write_note: the one note writer (appends and line edits) and its guarantees.

Issue 20: a forget rewrote the whole note under a folder lock, losing lines that
memory_append acknowledged and lines a shell appended with ``>>``, and turned CRLF into
LF. Every note-changing write now goes through :func:`memmw.workspace.files.write_note`.
"""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memmw.errors import ContentPolicyError, NoteEditError, PathPolicyError
from memmw.text.lines import LINE_BREAK, line_spans
from memmw.workspace.files import LineEdit, append_text, write_note
from memmw.workspace.reads import read_window


def foreign_append(path: Path, data: bytes) -> None:
    """What ``echo ... >> note`` does: O_APPEND, no lock."""
    with open(path, "ab") as fh:
        fh.write(data)


def mark(line: str) -> str:
    return "- ~~" + line.removeprefix("- ") + "~~ (retracted)"


def test_an_edit_changes_only_its_line_and_keeps_every_line_ending(tmp_path: Path) -> None:
    note = tmp_path / "n.md"
    before = b"# T\r\n- one\r- two\xe2\x80\xa8still two\r\n- three\xc2\x85x\n- four"
    note.write_bytes(before)
    assert write_note(note, edits=[LineEdit(3, mark)]).changed == (3,)
    after = note.read_bytes()
    start, end, _ = line_spans(before)[2]
    assert before[start:end] == "- two\u2028still two".encode()
    assert after == before[:start] + "- ~~two\u2028still two~~ (retracted)".encode() + before[end:]


def test_an_edit_keeps_a_line_another_program_appends_meanwhile(tmp_path: Path) -> None:
    note = tmp_path / "n.md"
    note.write_bytes(b"- a\r\n- b\r\n")

    def change(line: str) -> str:
        foreign_append(note, b"shell line\n")  # between the note's read and its rewrite
        return mark(line)

    write_note(note, edits=[LineEdit(1, change)])
    assert note.read_bytes() == b"- ~~a~~ (retracted)\r\n- b\r\nshell line\n"


def test_an_append_waits_for_an_edit_and_is_kept(tmp_path: Path) -> None:
    note = tmp_path / "n.md"
    note.write_bytes(b"- a\n- b\n")
    done: list[int] = []
    appender = threading.Thread(target=lambda: done.append(append_text(note, "agent line")))

    def change(line: str) -> str:
        appender.start()
        appender.join(0.3)  # the append waits for the note's lock, which the edit holds
        assert not done
        return mark(line)

    write_note(note, edits=[LineEdit(2, change)])
    appender.join()
    assert note.read_bytes() == b"- a\n- ~~b~~ (retracted)\nagent line\n"


def test_edit_refusals_change_nothing(tmp_path: Path) -> None:
    note = tmp_path / "n.md"
    note.write_bytes(b"- a\n- b\n")
    with pytest.raises(NoteEditError, match="has 2 lines"):
        write_note(note, edits=[LineEdit(3, mark)])
    def refuse(line: str) -> str:
        raise ValueError("nope")

    with pytest.raises(NoteEditError, match=r"n\.md#L2: nope"):
        write_note(note, edits=[LineEdit(1, mark), LineEdit(2, refuse)])  # all or none
    with pytest.raises(NoteEditError, match="line breaks"):
        write_note(note, edits=[LineEdit(1, lambda line: line + "\nx")])
    with pytest.raises(NoteEditError, match="shorten"):
        write_note(note, edits=[LineEdit(1, lambda line: "-")])
    with pytest.raises(NoteEditError, match="changed since it was indexed"):
        write_note(note, edits=[LineEdit(1, mark)], indexed_prefix=(3, "0" * 64))
    assert note.read_bytes() == b"- a\n- b\n"
    with pytest.raises(FileNotFoundError):
        write_note(tmp_path / "missing.md", edits=[LineEdit(1, mark)])
    assert not (tmp_path / "missing.md").exists()  # an edit never creates a note
    link = tmp_path / "link.md"
    link.symlink_to(note)
    with pytest.raises(PathPolicyError, match="symlink"):
        write_note(link, edits=[LineEdit(1, mark)])
    with pytest.raises(ContentPolicyError):
        write_note(note, append="\x00")


def test_indexed_prefix_allows_appends_since(tmp_path: Path) -> None:
    import hashlib

    note = tmp_path / "n.md"
    note.write_bytes(b"- a\n")
    indexed = (4, hashlib.sha256(b"- a\n").hexdigest())
    foreign_append(note, b"- later\n")
    write_note(note, edits=[LineEdit(1, mark)], indexed_prefix=indexed)
    assert note.read_bytes() == b"- ~~a~~ (retracted)\n- later\n"


# ---------------------------------------------------------------------------------------
# Properties

LINE_TEXT = st.text(
    alphabet=st.characters(
        blacklist_categories=("Cs",),
        blacklist_characters="\r\n",
        max_codepoint=0x2FFF,
    )
    | st.sampled_from(["\u2028", "\u2029", "\x85", "-", " ", "é", "爱"]),
    max_size=12,
)
#: What an agent appends: any text but controls (the content policy refuses them).
PAYLOAD = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc"), max_codepoint=0x2FFF)
    | st.sampled_from(["\u2028", "\u2029"]),
    max_size=10,
)
ENDINGS = st.sampled_from([b"\n", b"\r\n", b"\r"])


@st.composite
def notes(draw: st.DrawFn) -> bytes:
    lines = draw(st.lists(st.tuples(LINE_TEXT, ENDINGS), min_size=1, max_size=8))
    data = b"".join(text.encode("utf-8", "surrogatepass") + end for text, end in lines)
    if draw(st.booleans()):  # no final line break
        data += draw(LINE_TEXT).encode() or b"tail"
    return data


@settings(max_examples=150, deadline=None)
@given(data=notes())
def test_line_spans_agree_with_memory_get_and_the_chunker(data: bytes) -> None:
    text = data.decode("utf-8")
    window = read_window("n.md", text, 1, None, max_lines=10_000, max_chars=10**7)
    mine = [data[s:e].decode() for s, e, _ in line_spans(data)]
    assert window.total_lines == len(mine)
    assert window.text == "\n".join(mine)
    for _start, e, stop in line_spans(data):
        assert LINE_BREAK.fullmatch(data[e:stop]) or stop == len(data)


@st.composite
def operations(draw: st.DrawFn) -> list[tuple[str, int, bytes]]:
    """Appends, edits, and foreign ``>>`` appends landing during an edit."""
    ops = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["append", "edit", "edit+foreign", "edit+append"]))
        line = draw(st.integers(1, 10))
        payload = draw(PAYLOAD).encode() + b"#"
        ops.append((kind, line, payload))
    return ops


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(start=notes(), ops=operations())
def test_write_note_loses_no_line_and_touches_only_the_changed_line(
    tmp_path: Path, start: bytes, ops: list[tuple[str, int, bytes]]
) -> None:
    note = tmp_path / "prop.md"
    note.write_bytes(start)
    acknowledged: list[bytes] = []
    for n, (kind, line, payload) in enumerate(ops):
        before = note.read_bytes()
        if kind == "append":
            text = f"ack {n} " + payload.decode()
            append_text(note, text)
            acknowledged.append(text.encode())
            assert note.read_bytes().startswith(before)
            continue
        spans = line_spans(before)
        line = (line - 1) % len(spans) + 1 if spans else 1
        foreign = b"shell %d\n" % n
        thread: threading.Thread | None = None
        text = f"ack {n} " + payload.decode()

        def change(old: str, kind: str = kind, text: str = text, foreign: bytes = foreign) -> str:
            nonlocal thread
            if kind == "edit+foreign":
                foreign_append(note, foreign)
            elif kind == "edit+append":
                thread = threading.Thread(target=append_text, args=(note, text))
                thread.start()
                thread.join(0.05)
            return "~~" + old + "~~"

        if not spans:
            with pytest.raises(NoteEditError):
                write_note(note, edits=[LineEdit(line, change)])
            continue
        write_note(note, edits=[LineEdit(line, change)])
        if thread is not None:
            thread.join()
            acknowledged.append(text.encode())
        after = note.read_bytes()
        s, e, _ = spans[line - 1]
        expected = before[:s] + b"~~" + before[s:e] + b"~~" + before[e:]
        if kind == "edit+foreign":
            expected += foreign
            acknowledged.append(foreign.rstrip(b"\n"))
        # Bytes outside the changed line are identical; anything appended since follows.
        assert after.startswith(expected)
        if kind == "edit":
            assert after == expected
    final = note.read_bytes()
    lines = [final[s:e] for s, e, _ in line_spans(final)]
    for text_bytes in acknowledged:
        assert any(text_bytes in line for line in lines), text_bytes


def test_forget_beside_real_appenders_loses_no_line(tmp_path: Path) -> None:
    """Edits beside a thread calling append_text and a shell ``>>`` loop in another process."""
    note = tmp_path / "n.md"
    note.write_bytes(b"# Notes\r\n" + b"".join(b"- entry %d\r\n" % i for i in range(60)))
    shell = subprocess.Popen(
        ["sh", "-c", 'i=0; while [ $i -lt 400 ]; do i=$((i+1)); echo "shell $i" >> "$1"; done', "sh", str(note)]
    )
    agent = [f"agent {i}" for i in range(150)]
    appender = threading.Thread(target=lambda: [append_text(note, line) for line in agent])
    appender.start()
    for line in range(2, 62):
        write_note(note, edits=[LineEdit(line, mark)])
    appender.join()
    assert shell.wait(timeout=60) == 0
    data = note.read_bytes()
    lines = {data[s:e] for s, e, _ in line_spans(data)}
    assert {f"- ~~entry {i}~~ (retracted)".encode() for i in range(60)} <= lines
    assert {a.encode() for a in agent} <= lines
    assert {b"shell %d" % i for i in range(1, 401)} <= lines
    assert data.startswith(b"# Notes\r\n- ~~entry 0~~ (retracted)\r\n")


class Crash(BaseException):
    """A process killed mid-write (not an Exception: nothing may catch it)."""


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    start=notes(),
    line=st.integers(1, 10),
    cut=st.floats(0, 1, exclude_max=True),
    torn_record=st.booleans(),
)
def test_an_edit_killed_mid_rewrite_is_finished_by_the_next_write(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    start: bytes,
    line: int,
    cut: float,
    torn_record: bool,
) -> None:
    from memmw.workspace import files

    note = tmp_path / "crash.md"
    note.write_bytes(start)
    spans = line_spans(start)
    line = (line - 1) % len(spans) + 1
    s, e, _ = spans[line - 1]
    expected = start[:s] + b"~~" + start[s:e] + b"~~" + start[e:]
    real_write_all = files._write_all
    target = "record" if torn_record else "region"

    def dying_write_all(fd: int, data: bytes, offset: int | None = None) -> None:
        is_record = data.startswith(b"memmw-edit 1\n")
        if (target == "record") == is_record and (is_record or offset is not None):
            real_write_all(fd, data[: int(len(data) * cut)], offset)
            raise Crash
        real_write_all(fd, data, offset)

    with monkeypatch.context() as m:
        m.setattr(files, "_write_all", dying_write_all)
        with pytest.raises(Crash):
            write_note(note, edits=[LineEdit(line, lambda old: "~~" + old + "~~")])
    assert files.edit_record_path(note).exists()
    foreign_append(note, b"after the crash\n")
    write_note(note, append="next")  # any later write of the note finishes or drops the edit
    assert not files.edit_record_path(note).exists()
    after = note.read_bytes()
    if torn_record:  # the rewrite never started: the note is as before, plus the growth
        assert after.startswith(start)
        grown = after[len(start) :]
        assert grown.lstrip(b"\n").startswith(b"after the crash\n")
    else:
        assert after.startswith(expected + b"after the crash\n")
    assert after.rstrip(b"\r\n").endswith(b"next")


def test_an_edit_whose_redo_record_cannot_be_made_changes_nothing(tmp_path: Path) -> None:
    from memmw.workspace.files import edit_record_path

    note = tmp_path / "n.md"
    note.write_bytes(b"- a\r\n- b\r\n")
    edit_record_path(note).mkdir()  # something in the way of the record
    with pytest.raises(IsADirectoryError):
        write_note(note, edits=[LineEdit(1, mark)])
    assert note.read_bytes() == b"- a\r\n- b\r\n"
    append_text(note, "still appendable")  # appends do not need the record
    assert note.read_bytes() == b"- a\r\n- b\r\nstill appendable\r\n"
