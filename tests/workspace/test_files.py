"""Workspace: discovery, the read path policy and crash-safe writes."""

from __future__ import annotations

import errno
import os
import re
import threading
from pathlib import Path

import pytest

from memmw.config import ExtraPath
from memmw.errors import ContentPolicyError, FileBusyError, PathPolicyError
from memmw.workspace.files import (
    MAX_NOTE_BYTES,
    append_text,
    atomic_write_text,
    discover,
    file_date,
    is_curated,
    resolve_read_path,
)

from ..conftest import write


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    write(root / "MEMORY.md", "# Memory\n")
    write(root / "USER.md", "# User\n")
    write(root / "memory" / "2026-01-02.md")
    write(root / "memory" / "topics" / "deep" / "rust.md")
    write(root / "memory" / "notes.txt")  # not Markdown
    write(root / "memory" / "UPPER.MD")
    write(root / "memory" / ".git" / "x.md")  # hidden folder
    write(root / "memory" / "node_modules" / "y.md")  # tool folder
    write(root / "README.md")  # root file that is not memory
    write(root / "docs" / "design.md")  # not memory unless configured
    return root


# -- discovery --------------------------------------------------------------------------


def paths(files) -> list[str]:
    return [f.path for f in files]


def test_discover_finds_root_files_and_memory_tree(ws: Path) -> None:
    files, issues = discover(ws)
    assert paths(files) == [
        "MEMORY.md",
        "USER.md",
        "memory/2026-01-02.md",
        "memory/UPPER.MD",
        "memory/topics/deep/rust.md",
    ]
    assert issues == []
    assert all(f.source == "memory" for f in files)
    assert files[0].abs_path == ws / "MEMORY.md"


def test_discover_skips_symlinks(ws: Path, tmp_path: Path) -> None:
    outside = write(tmp_path / "outside" / "secret.md", "secret\n")
    os.symlink(outside, ws / "memory" / "link.md")
    os.symlink(outside.parent, ws / "memory" / "linked-dir")
    (ws / "MEMORY.md").unlink()
    os.symlink(outside, ws / "MEMORY.md")
    files, _ = discover(ws)
    assert "memory/link.md" not in paths(files)
    assert not any(p.startswith("memory/linked-dir") for p in paths(files))
    assert "MEMORY.md" not in paths(files)


def test_discover_skips_a_symlinked_memory_folder(tmp_path: Path) -> None:
    real = tmp_path / "real"
    write(real / "2026-01-01.md")
    root = tmp_path / "ws"
    root.mkdir()
    os.symlink(real, root / "memory")
    files, _ = discover(root)
    assert files == []


def test_discover_extra_paths(ws: Path, tmp_path: Path) -> None:
    abs_dir = tmp_path / "elsewhere"
    write(abs_dir / "a.md")
    write(abs_dir / "sub" / "b.md")
    write(abs_dir / "c.txt")
    extras = (
        ExtraPath(path="docs"),
        ExtraPath(path=str(abs_dir), pattern="sub/*.md"),
        ExtraPath(path="missing-dir"),
        ExtraPath(path="memory/notes.txt"),
    )
    files, issues = discover(ws, extras)
    got = paths(files)
    assert "docs/design.md" in got
    assert "../elsewhere/sub/b.md" in got
    assert "../elsewhere/a.md" not in got  # filtered by the pattern
    assert {i.path: i.reason for i in issues} == {
        "missing-dir": "extra path does not exist",
        "memory/notes.txt": "extra path is not a .md file",
    }


def test_discover_refuses_symlinked_extra_path(ws: Path, tmp_path: Path) -> None:
    write(tmp_path / "real-docs" / "x.md")
    os.symlink(tmp_path / "real-docs", ws / "linked-docs")
    files, issues = discover(ws, (ExtraPath(path="linked-docs"),))
    assert not any("x.md" in p for p in paths(files))
    assert [i.reason for i in issues] == ["extra path is a symlink; skipped"]


def test_discover_deduplicates_by_realpath(ws: Path) -> None:
    files, _ = discover(ws, (ExtraPath(path="memory"), ExtraPath(path="MEMORY.md")))
    got = paths(files)
    assert got.count("MEMORY.md") == 1
    assert got.count("memory/2026-01-02.md") == 1
    assert len(got) == len(set(got))


def test_file_date_and_curated() -> None:
    assert file_date("memory/2026-01-02.md") == (2026, 1, 2)
    assert file_date("memory/2026-01-02-standup.md") == (2026, 1, 2)
    assert file_date("memory/projects/2025-12-31.md") == (2025, 12, 31)
    assert file_date("memory/2026-02-30.md") is None  # invalid date
    assert file_date("memory/notes.md") is None
    assert file_date("2026-01-02.md") is None  # not under memory/
    assert file_date("docs/2026-01-02.md") is None
    assert is_curated("MEMORY.md") and is_curated("USER.md") and is_curated("memory.md")
    assert not is_curated("memory/MEMORY.md")


# -- read path policy -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("MEMORY.md", "MEMORY.md"),
        ("USER.md", "USER.md"),
        ("./MEMORY.md", "MEMORY.md"),
        ("memory/2026-01-02.md", "memory/2026-01-02.md"),
        ("memory\\2026-01-02.md", "memory/2026-01-02.md"),
        ("memory/topics/deep/rust.md", "memory/topics/deep/rust.md"),
        ("memory/../MEMORY.md", "MEMORY.md"),
        ("memory/not-yet-written.md", "memory/not-yet-written.md"),
        ("DREAMS.md", "DREAMS.md"),
    ],
)
def test_allowed_paths(ws: Path, raw: str, expected: str) -> None:
    rel, absolute = resolve_read_path(ws, raw)
    assert rel == expected
    assert absolute == ws / expected


def test_absolute_path_inside_the_workspace_is_allowed(ws: Path) -> None:
    rel, _ = resolve_read_path(ws, str(ws / "memory" / "2026-01-02.md"))
    assert rel == "memory/2026-01-02.md"


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        ("", "path is required"),
        ("   ", "path is required"),
        ("README.md", "not a memory file"),
        ("docs/design.md", "not a memory file"),
        ("../outside.md", "outside the workspace"),
        ("memory/../../outside.md", "outside the workspace"),
        ("/etc/passwd", "outside the workspace"),
        ("memory/notes.txt", "only Markdown"),
        ("memory/", "not a memory file"),
        ("MEMORY.md.bak", "not a memory file"),
        ("memory/../README.md", "not a memory file"),
    ],
)
def test_refused_paths(ws: Path, raw: str, needle: str) -> None:
    with pytest.raises(PathPolicyError) as info:
        resolve_read_path(ws, raw)
    assert needle in str(info.value)
    assert isinstance(info.value, PermissionError)


def test_symlinked_file_is_refused(ws: Path, tmp_path: Path) -> None:
    target = write(tmp_path / "secret.md", "secret\n")
    os.symlink(target, ws / "memory" / "secret.md")
    with pytest.raises(PathPolicyError, match=r"'secret\.md' is a symlink"):
        resolve_read_path(ws, "memory/secret.md")


def test_symlinked_parent_is_refused(ws: Path, tmp_path: Path) -> None:
    write(tmp_path / "other" / "note.md")
    os.symlink(tmp_path / "other", ws / "memory" / "linked")
    with pytest.raises(PathPolicyError, match="parent folder 'linked' is a symlink"):
        resolve_read_path(ws, "memory/linked/note.md")


def test_symlinked_memory_folder_is_refused(tmp_path: Path) -> None:
    write(tmp_path / "real" / "2026-01-01.md")
    root = tmp_path / "ws"
    root.mkdir()
    os.symlink(tmp_path / "real", root / "memory")
    with pytest.raises(PathPolicyError, match="symlink"):
        resolve_read_path(root, "memory/2026-01-01.md")


def test_extra_paths_are_readable_with_their_glob(ws: Path, tmp_path: Path) -> None:
    write(tmp_path / "ext" / "keep" / "a.md")
    write(tmp_path / "ext" / "skip" / "b.md")
    write(tmp_path / "ext" / "keep" / "c.txt")
    single = write(tmp_path / "single.md")
    extras = (
        ExtraPath(path="docs"),
        ExtraPath(path=str(tmp_path / "ext"), pattern="keep/*"),
        ExtraPath(path=str(single)),
    )
    assert resolve_read_path(ws, "docs/design.md", extras)[0] == "docs/design.md"
    rel, absolute = resolve_read_path(ws, str(tmp_path / "ext" / "keep" / "a.md"), extras)
    assert rel == "../ext/keep/a.md"
    assert absolute == tmp_path / "ext" / "keep" / "a.md"
    assert resolve_read_path(ws, str(single), extras)[0] == "../single.md"
    with pytest.raises(PathPolicyError, match="outside the workspace"):
        resolve_read_path(ws, str(tmp_path / "ext" / "skip" / "b.md"), extras)
    with pytest.raises(PathPolicyError, match="only Markdown"):
        resolve_read_path(ws, str(tmp_path / "ext" / "keep" / "c.txt"), extras)
    with pytest.raises(PathPolicyError, match="outside the workspace"):
        resolve_read_path(ws, str(tmp_path / "ext" / "keep" / ".." / ".." / "single2.md"), extras)


def test_symlinks_under_extra_paths_are_refused(ws: Path, tmp_path: Path) -> None:
    write(tmp_path / "secret" / "s.md")
    write(ws / "docs" / "real.md")
    os.symlink(tmp_path / "secret", ws / "docs" / "via")
    os.symlink(tmp_path / "secret" / "s.md", ws / "docs" / "s.md")
    extras = (ExtraPath(path="docs"),)
    with pytest.raises(PathPolicyError, match="parent folder 'via' is a symlink"):
        resolve_read_path(ws, "docs/via/s.md", extras)
    with pytest.raises(PathPolicyError, match=r"'s\.md' is a symlink"):
        resolve_read_path(ws, "docs/s.md", extras)
    # A symlinked extra-path root grants nothing.
    os.symlink(tmp_path / "secret", ws / "linkroot")
    with pytest.raises(PathPolicyError, match="not a memory file"):
        resolve_read_path(ws, "linkroot/s.md", (ExtraPath(path="linkroot"),))


# -- writes -----------------------------------------------------------------------------


def test_atomic_write_replaces_and_keeps_mode(tmp_path: Path) -> None:
    target = write(tmp_path / "memory" / "a.md", "old\n")
    os.chmod(target, 0o600)
    atomic_write_text(target, "new\r\n")
    assert target.read_bytes() == b"new\r\n"
    assert (os.stat(target).st_mode & 0o777) == 0o600
    assert sorted(p.name for p in target.parent.iterdir()) == ["a.md"]


def test_atomic_write_failure_leaves_the_old_content(tmp_path: Path, monkeypatch) -> None:
    target = write(tmp_path / "a.md", "old\n")

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        atomic_write_text(target, "new\n")
    assert target.read_text(encoding="utf-8") == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.md"]


def test_append_adds_separator_and_newline(tmp_path: Path) -> None:
    target = tmp_path / "memory" / "2026-01-02.md"
    assert append_text(target, "first") == len("first\n")
    write(target, "first\nsecond")  # no trailing newline
    assert append_text(target, "third\n") == len("\nthird\n")
    assert target.read_text(encoding="utf-8") == "first\nsecond\nthird\n"


def test_append_refuses_symlinks(tmp_path: Path) -> None:
    real = write(tmp_path / "real.md", "x\n")
    link = tmp_path / "link.md"
    os.symlink(real, link)
    with pytest.raises(PathPolicyError, match="symlink"):
        append_text(link, "y")
    assert real.read_text(encoding="utf-8") == "x\n"


# ---------------------------------------------------------------------------------------
# Appends that only append (issue 9, item 1)


def test_append_keeps_text_another_writer_appends_through_an_open_handle(tmp_path: Path) -> None:
    # An editor or `>>` that holds the note open must not lose what it writes after ours.
    target = write(tmp_path / "memory" / "n.md", "one\n")
    inode = os.stat(target).st_ino
    with open(target, "ab") as other:
        append_text(target, "two")
        other.write(b"three\n")
    assert target.read_bytes() == b"one\ntwo\nthree\n"
    assert os.stat(target).st_ino == inode


def test_append_never_rewrites_crlf_or_bare_cr(tmp_path: Path) -> None:
    crlf = tmp_path / "memory" / "crlf.md"
    crlf.parent.mkdir(parents=True)
    crlf.write_bytes(b"a\r\nb\r\n")
    append_text(crlf, "c\nd")
    assert crlf.read_bytes() == b"a\r\nb\r\nc\r\nd\r\n"
    cr = tmp_path / "memory" / "cr.md"
    cr.write_bytes(b"x\ry")
    append_text(cr, "z")
    assert cr.read_bytes().startswith(b"x\ry")
    assert cr.read_bytes() == b"x\ry\nz\n"


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("a\x00b", "NUL"),
        ("bell\x07", "control character"),
        ("x" * (18 * 1024 * 1024), "too large"),
        ("lone \udce9 surrogate", "UTF-8"),
    ],
)
def test_append_refuses_content_that_would_break_the_note(
    tmp_path: Path, content: str, why: str
) -> None:
    target = write(tmp_path / "memory" / "n.md", "keep\n")
    with pytest.raises(ContentPolicyError, match=why):
        append_text(target, content)
    assert target.read_bytes() == b"keep\n"


def test_append_refuses_growing_a_note_past_the_index_limit(tmp_path: Path) -> None:
    target = tmp_path / "memory" / "big.md"
    target.parent.mkdir(parents=True)
    with open(target, "wb") as fh:
        fh.truncate(MAX_NOTE_BYTES - 10)
    with pytest.raises(ContentPolicyError, match="too large"):
        append_text(target, "y" * 20)
    assert target.stat().st_size == MAX_NOTE_BYTES - 10


def test_append_to_a_note_another_writer_holds_is_a_memmw_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memmw.workspace import files as files_mod
    from memmw.workspace.locks import locked_fd

    note = write(tmp_path / "memory" / "busy.md", "before\n")
    monkeypatch.setattr(files_mod, "APPEND_LOCK_TIMEOUT_S", 0.05)
    fd = os.open(note, os.O_RDWR)
    try:
        with (
            locked_fd(fd, timeout=1.0, what="busy.md"),
            pytest.raises(FileBusyError, match="locked by another memmw writer") as info,
        ):
            append_text(note, "x")
    finally:
        os.close(fd)
    assert isinstance(info.value, OSError) and info.value.errno == errno.EBUSY
    assert note.read_text() == "before\n"


def test_append_refuses_a_fifo_without_blocking_and_keeps_the_lock_free(tmp_path: Path) -> None:
    fifo = tmp_path / "memory" / "pipe.md"
    fifo.parent.mkdir(parents=True)
    os.mkfifo(fifo)
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            append_text(fifo, "x")
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout=5)
    if thread.is_alive():  # unblock the stuck reader so the test run can end
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        thread.join(timeout=5)
        pytest.fail("append_text blocked on a FIFO")
    assert outcome and isinstance(outcome[0], PathPolicyError)
    assert "not a regular file" in str(outcome[0])
    # The folder is not left locked: a normal append beside it works at once.
    assert append_text(tmp_path / "memory" / "ok.md", "fine") == len("fine\n")


def test_append_leaves_no_temp_files_and_writes_in_place(tmp_path: Path) -> None:
    target = write(tmp_path / "memory" / "n.md", "a\n")
    for i in range(5):
        append_text(target, f"line {i}")
    assert sorted(p.name for p in target.parent.iterdir()) == ["n.md"]
    assert target.read_text(encoding="utf-8").splitlines() == ["a"] + [f"line {i}" for i in range(5)]


def test_append_from_many_threads_loses_nothing(tmp_path: Path) -> None:
    target = tmp_path / "memory" / "n.md"

    def writer(k: int) -> None:
        for i in range(40):
            append_text(target, f"t{k}-{i}")

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = target.read_text(encoding="utf-8").splitlines()
    assert sorted(lines) == sorted(f"t{k}-{i}" for k in range(4) for i in range(40))


# -- properties: append content and the path policy ---------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from memmw.workspace.files import discover_all, unindexed_note_reason  # noqa: E402

PROPS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _lines(text: str) -> list[str]:
    """Lines as editors read them; a final line break ends the last line (opens none)."""
    parts = re.split(r"\r\n|\r|\n", text)
    return parts[:-1] if len(parts) > 1 and parts[-1] == "" else parts


@pytest.mark.parametrize("text", ["\x85", "a\x85b", "\x9f"])
def test_c1_control_characters_are_refused(tmp_path: Path, text: str) -> None:
    note = tmp_path / "memory" / "p.md"
    note.parent.mkdir(parents=True)
    note.write_bytes(b"kept\n")
    with pytest.raises(ContentPolicyError, match="control character"):
        append_text(note, text)
    assert note.read_bytes() == b"kept\n"


@pytest.mark.parametrize("text", ["\u2028", "a\u2029b"])
def test_unicode_line_separators_are_appended_as_text(tmp_path: Path, text: str) -> None:
    note = tmp_path / "memory" / "p.md"
    note.parent.mkdir(parents=True)
    append_text(note, text)
    assert note.read_text(encoding="utf-8") == text + "\n"


@PROPS
@given(before=st.binary(max_size=200), text=st.text(max_size=300))
def test_append_either_refuses_and_keeps_the_note_or_only_adds_to_its_end(
    tmp_path: Path, before: bytes, text: str
) -> None:
    note = tmp_path / "memory" / "p.md"
    note.parent.mkdir(parents=True, exist_ok=True)
    note.write_bytes(before)
    try:
        added = append_text(note, text)
    except ContentPolicyError:
        assert note.read_bytes() == before
        return
    after = note.read_bytes()
    assert after.startswith(before)  # earlier bytes are never rewritten
    tail = after[len(before):].decode("utf-8")
    assert len(tail) == added and tail.endswith("\n")
    needs_sep = bool(before) and not before.endswith((b"\n", b"\r"))
    sep = ("\r\n" if tail.startswith("\r\n") else "\n") if needs_sep else ""
    assert tail.startswith(sep)  # a separator only when the note lacked a final newline
    # Lines as the chunker and editors see them: only CR, LF and CRLF break a line
    # (str.splitlines also breaks on U+2028 and friends, which are ordinary text here).
    assert _lines(tail[len(sep):]) == _lines(text)
    assert "\x00" not in tail


@PROPS
@given(text=st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=300))
def test_printable_text_is_always_accepted_and_the_note_stays_readable(
    tmp_path: Path, text: str
) -> None:
    from memmw.workspace.reading import read_markdown

    note = tmp_path / "memory" / "q.md"
    note.unlink(missing_ok=True)
    append_text(note, text)
    body = read_markdown(note)[0]
    assert text.replace("\r\n", "\n").rstrip("\n") in body.replace("\r\n", "\n")


NAME_CHARS = st.characters(codec="utf-8", exclude_characters="/\\")


@PROPS
@given(
    folders=st.lists(st.text(NAME_CHARS, min_size=1, max_size=12), max_size=2),
    stem=st.text(NAME_CHARS, min_size=1, max_size=20),
)
def test_a_note_appends_accept_is_a_note_discovery_indexes(
    tmp_path: Path, folders: list[str], stem: str
) -> None:
    ws = tmp_path / "ws"
    rel = "/".join(["memory", *folders, stem + ".md"])
    try:
        rel, abs_path = resolve_read_path(ws, rel)
    except PathPolicyError:
        return
    if not rel.startswith("memory/") or unindexed_note_reason(rel) is not None:
        return
    try:
        append_text(abs_path, "note")
    except OSError:
        return  # the OS refused the name (too long, reserved): nothing to index either
    assert rel in {f.path for f in discover_all(ws).files}
    for p in sorted(ws.rglob("*"), reverse=True):
        p.unlink() if p.is_file() else p.rmdir()


@PROPS
@given(raw=st.text(max_size=60))
def test_the_read_policy_never_lets_a_path_escape(tmp_path: Path, raw: str) -> None:
    ws = tmp_path / "ws"
    try:
        rel, abs_path = resolve_read_path(ws, raw)
    except (PathPolicyError, ValueError):
        return
    assert rel.lower().endswith(".md")
    assert os.path.commonpath([os.path.abspath(ws), abs_path]) == os.path.abspath(ws)
    assert ".." not in Path(rel).parts


# -- the walk: what os.walk and an lstat of each entry found -----------------------------

from memmw.workspace.files import (  # noqa: E402
    FileIssue,
    _Walk,
    _walk_markdown,
    display_path,
    is_ignored_dir,
)


def _reference_walk(root: Path, walk: _Walk) -> list[Path]:
    """The walk before ``os.scandir`` (kept as the oracle): ``os.walk`` and an ``lstat``."""
    import stat

    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False, onerror=walk.cannot_list):
        base = Path(dirpath)
        dirnames[:] = sorted(
            d for d in dirnames if not is_ignored_dir(d) and not (base / d).is_symlink()
        )
        for name in sorted(filenames):
            candidate = base / name
            if not name.lower().endswith(".md"):
                continue
            if display_path(name) != name:
                walk.issues.append(
                    FileIssue(path=walk.rel(candidate), reason="file name is not valid UTF-8; skipped")
                )
                continue
            try:
                regular = stat.S_ISREG(os.lstat(candidate).st_mode)
            except OSError:
                regular = False
            if regular:
                out.append(candidate)
            elif not os.path.islink(candidate):
                walk.issues.append(FileIssue(path=walk.rel(candidate), reason="not a regular file; skipped"))
    return out


_NAMES = st.sampled_from(
    ["a.md", "B.MD", "notes.txt", "x.md.bak", ".hidden.md", "über.md", "d", "e", ".git",
     "node_modules", "z.md", "mid dle.md"]
)
_ENTRY = st.tuples(
    st.lists(st.sampled_from(["d", "e", ".git", "node_modules", "sub"]), max_size=3),
    _NAMES,
    st.sampled_from(["file", "file", "file", "dir", "fifo", "link-file", "link-dir", "broken",
                     "bad-name"]),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entries=st.lists(_ENTRY, max_size=25))
def test_the_walk_finds_what_os_walk_and_lstat_found(tmp_path: Path, entries: list) -> None:
    """Whatever the tree (nested and ignored folders, FIFOs, links to files and folders,
    broken links, names that are not UTF-8): the same files in the same order, the same
    issues."""
    import shutil
    import uuid

    base = tmp_path / uuid.uuid4().hex
    root = base / "ws" / "memory"
    root.mkdir(parents=True)
    outside = base / "outside"
    (outside / "folder").mkdir(parents=True)
    (outside / "real.md").write_text("x")
    (outside / "folder" / "through-a-link.md").write_text("x")
    for folders, name, kind in entries:
        parent = root.joinpath(*folders)
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):  # a file or link of that name
            continue
        target = parent / name
        if os.path.lexists(target) or (kind == "bad-name" and os.path.lexists(
                os.fsencode(parent) + b"/\xff" + os.fsencode(name))):
            continue
        if kind == "file":
            target.write_text("- a note\n")
        elif kind == "dir":
            target.mkdir()
            (target / "inner.md").write_text("x")
        elif kind == "fifo":
            os.mkfifo(target)
        elif kind == "link-file":
            target.symlink_to(outside / "real.md")
        elif kind == "link-dir":
            target.symlink_to(outside / "folder")
        elif kind == "broken":
            target.symlink_to(outside / "missing.md")
        else:  # a name that is not valid UTF-8
            with open(os.fsencode(parent) + b"/\xff" + os.fsencode(name), "w") as fh:
                fh.write("x")
    ws = base / "ws"
    expect_walk = _Walk(workspace=ws, issues=[], unlisted=[])
    got_walk = _Walk(workspace=ws, issues=[], unlisted=[])
    expect = [str(p) for p in _reference_walk(root, expect_walk)]
    got = list(_walk_markdown(root, got_walk))
    assert got == expect
    assert got_walk.issues == expect_walk.issues
    assert got_walk.unlisted == expect_walk.unlisted
    shutil.rmtree(base)
