"""Sync: incremental by sha256, broken files, identity changes, atomic and interrupted rebuilds."""

from __future__ import annotations

import calendar
import contextlib
import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memmw
from memmw import Memory, MemoryConfig, StoreConfig
from memmw.config import ChunkingConfig, ExtraPath, SyncConfig
from memmw.engine import indexer as sync_mod
from memmw.engine.indexer import Indexer, decay_timestamp
from memmw.errors import FileReadError, IndexBusyError, IndexStoreError
from memmw.store.protocol import chunk_id
from memmw.store.sqlite.store import IndexStore
from memmw.text.chunking import chunk_text
from memmw.text.lines import NOT_LINE_BREAKS
from memmw.types import ReadResult, SyncReport
from memmw.workspace import reading as reading_mod
from memmw.workspace.files import WorkspaceFile
from memmw.workspace.locks import exclusive_lock
from memmw.workspace.reading import ReadCaps, read_markdown
from memmw.workspace.transcripts import transcripts_dir

from ..conftest import make_memory, write

KEYWORD_ONLY = MemoryConfig(provider="none")


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    write(root / "MEMORY.md", "# Facts\n- The gateway runs on port 8080.\n- Alice prefers green tea.\n")
    write(root / "memory" / "2026-01-02.md", "# Jan 2\nWe planned the kubernetes migration.\n")
    write(root / "memory" / "2026-01-03.md", "# Jan 3\nBob fixed the backup cron job.\n")
    write(root / "memory" / "topics" / "garden.md", "Tomatoes need sun.\nWater the basil daily.\n")
    return root


def open_memory(ws: Path, state: Path, config: MemoryConfig = KEYWORD_ONLY) -> Memory:
    return make_memory(workspace=ws, state_dir=state, config=config)


def db_rows(db: Path, sql: str) -> list[tuple]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def results(mem: Memory, queries: list[str]) -> list[list[tuple[str, float, str]]]:
    return [[(h.citation, round(h.score, 9), h.snippet) for h in mem.search(q)] for q in queries]


QUERIES = ["gateway port", "kubernetes migration", "backup", "basil", "tea", "nothing-matches"]


# -- reading files ----------------------------------------------------------------------


def test_read_markdown_hashes_bytes_and_strips_bom(tmp_path: Path) -> None:
    data = "\ufeff# Title\r\nbody\r\n".encode()
    path = tmp_path / "a.md"
    path.write_bytes(data)
    text, digest, mtime, size = read_markdown(path)
    assert text == "# Title\r\nbody\r\n"
    assert digest == hashlib.sha256(data).hexdigest()
    assert size == len(data)
    assert mtime == os.stat(path).st_mtime


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"abc\x00def", "binary content"),
        (b"caf\xe9 au lait", "not valid UTF-8 (byte 3)"),
        (b"\x89PNG\r\n\x1a\n\x00\x00", "binary content"),
    ],
)
def test_read_markdown_refuses_binary_and_non_utf8(tmp_path: Path, data: bytes, reason: str) -> None:
    path = tmp_path / "bad.md"
    path.write_bytes(data)
    with pytest.raises(FileReadError, match=reason.replace("(", r"\(").replace(")", r"\)")):
        read_markdown(path)


def test_read_markdown_reads_past_the_size_fstat_gave(tmp_path: Path, monkeypatch) -> None:
    # A note that grows between fstat and read is read whole, and refused once past the limit.
    data = ("- a line of a growing note\n" * 100_000).encode()
    path = tmp_path / "growing.md"
    path.write_bytes(data)
    real_fstat = os.fstat

    def stale_fstat(fd: int) -> os.stat_result:
        st = real_fstat(fd)
        return os.stat_result((st.st_mode, *tuple(st)[1:6], 10, *tuple(st)[7:]))

    monkeypatch.setattr(os, "fstat", stale_fstat)
    text, digest, _mtime, size = read_markdown(path)
    # The size recorded is the size of the bytes hashed (forget checks a note against both).
    assert text.encode() == data and digest == hashlib.sha256(data).hexdigest()
    assert size == len(data)
    monkeypatch.setattr(reading_mod, "CAPS", ReadCaps(index=len(data) - 1))
    with pytest.raises(FileReadError, match="larger than"):
        read_markdown(path)


def test_an_unchanged_note_is_hashed_not_decoded_again(ws: Path, tmp_path: Path, monkeypatch) -> None:
    with open_memory(ws, tmp_path / "state") as mem:
        mem.sync()
        decoded: list[int] = []
        real = sync_mod.decode_note

        def counting(data: bytes) -> str:
            decoded.append(len(data))
            return real(data)

        monkeypatch.setattr(sync_mod, "decode_note", counting)
        assert mem.sync().files_unchanged == 4 and decoded == []
        note = ws / "memory" / "2026-01-02.md"
        note.write_text(note.read_text(encoding="utf-8") + "- zeppelins at noon\n", encoding="utf-8")
        report = mem.sync()
        assert (report.files_changed, len(decoded)) == (1, 1)
        assert [h.path for h in mem.search("zeppelins")] == ["memory/2026-01-02.md"]


def test_read_markdown_refuses_huge_and_missing_files(tmp_path: Path, monkeypatch) -> None:
    path = write(tmp_path / "big.md", "x" * 100)
    monkeypatch.setattr(reading_mod, "CAPS", ReadCaps(index=50))
    with pytest.raises(FileReadError, match="larger than"):
        read_markdown(path)
    with pytest.raises(FileReadError, match="unreadable"):
        read_markdown(tmp_path / "missing.md")


def test_decay_timestamps(tmp_path: Path) -> None:
    def f(path: str) -> WorkspaceFile:
        return WorkspaceFile(path=path, abs_path=tmp_path / path)

    midnight = float(calendar.timegm((2026, 1, 2, 0, 0, 0)))
    assert decay_timestamp(f("memory/2026-01-02.md"), 5.0) == midnight
    assert decay_timestamp(f("memory/2026-01-02-standup.md"), 5.0) == midnight
    assert decay_timestamp(f("memory/sub/2026-01-02.md"), 5.0) == midnight
    assert decay_timestamp(f("MEMORY.md"), 5.0) is None
    assert decay_timestamp(f("USER.md"), 5.0) is None
    assert decay_timestamp(f("memory/topics/garden.md"), 5.0) is None
    assert decay_timestamp(f("../docs/design.md"), 5.0) == 5.0  # extra path: mtime


# -- first sync and incremental sync ----------------------------------------------------


def test_first_sync_indexes_everything(ws: Path, tmp_path: Path) -> None:
    with open_memory(ws, tmp_path / "state") as mem:
        report = mem.sync()
        assert report.full_rebuild and report.reason == "no-index"
        assert (report.files_added, report.files_changed, report.files_removed) == (4, 0, 0)
        assert report.chunks_total == report.chunks_indexed == 5  # 2 entries + 3 files
        assert report.issues == ()
        assert report.seconds > 0
        assert mem.db_path == tmp_path / "state" / "memory" / "main.sqlite"
    paths = db_rows(mem.db_path, "SELECT path FROM files ORDER BY path")
    assert [p for (p,) in paths] == [
        "MEMORY.md",
        "memory/2026-01-02.md",
        "memory/2026-01-03.md",
        "memory/topics/garden.md",
    ]
    # The keyword statistics count every chunk; FTS5 is only filled for its backend.
    assert db_rows(mem.db_path, "SELECT source, chunks FROM keyword_stats") == [("memory", 5)]
    assert db_rows(mem.db_path, "SELECT COUNT(*) FROM chunks_fts") == [(0,)]


def test_incremental_sync_uses_sha256_per_file(ws: Path, tmp_path: Path) -> None:
    with open_memory(ws, tmp_path / "state") as mem:
        mem.sync()
        again = mem.sync()
        assert not again.full_rebuild
        assert (again.files_added, again.files_changed, again.files_removed) == (0, 0, 0)
        assert again.files_unchanged == 4
        assert again.chunks_indexed == 0
        assert not again.changed

        # Touching a file without changing its bytes does not reindex it.
        garden = ws / "memory" / "topics" / "garden.md"
        os.utime(garden, (time.time() + 100, time.time() + 100))
        assert mem.sync().files_unchanged == 4

        write(garden, "Tomatoes need sun.\nWater the basil daily.\nPrune the roses.\n")
        (ws / "memory" / "2026-01-03.md").unlink()
        write(ws / "memory" / "2026-01-04.md", "# Jan 4\nCarol booked flights to Lisbon.\n")
        report = mem.sync()
        assert not report.full_rebuild
        assert (report.files_added, report.files_changed, report.files_removed) == (1, 1, 1)
        assert report.files_unchanged == 2
        assert report.chunks_indexed == 2
        assert report.chunks_total == 5
        assert [h.path for h in mem.search("roses")] == ["memory/topics/garden.md"]
        assert [h.path for h in mem.search("Lisbon flights")] == ["memory/2026-01-04.md"]
        assert mem.search("backup cron") == []
    db = mem.db_path
    assert db_rows(db, "SELECT COUNT(*) FROM chunks WHERE path='memory/2026-01-03.md'") == [(0,)]
    assert db_rows(db, "SELECT COUNT(*) FROM files WHERE path='memory/2026-01-03.md'") == [(0,)]
    assert db_rows(db, "SELECT chunks FROM keyword_stats") == db_rows(db, "SELECT COUNT(*) FROM chunks")
    stored = db_rows(db, "SELECT hash FROM files WHERE path='memory/topics/garden.md'")
    assert stored == [(hashlib.sha256((ws / "memory/topics/garden.md").read_bytes()).hexdigest(),)]


def test_unchanged_files_are_not_reread_into_the_index(ws: Path, tmp_path: Path, monkeypatch) -> None:
    with open_memory(ws, tmp_path / "state") as mem:
        mem.sync()
        written: list[str] = []
        original = IndexStore.replace_file

        def spy(self, **kwargs):
            written.append(kwargs["path"])
            return original(self, **kwargs)

        monkeypatch.setattr(IndexStore, "replace_file", spy)
        write(ws / "memory" / "2026-01-02.md", "# Jan 2\nWe finished the kubernetes migration.\n")
        mem.sync()
        assert written == ["memory/2026-01-02.md"]


def test_chunk_ids_are_stable_and_follow_the_reference_formula(ws: Path, tmp_path: Path) -> None:
    with open_memory(ws, tmp_path / "state") as mem:
        mem.sync()
        first = db_rows(mem.db_path, "SELECT id, path, start_line, end_line, hash FROM chunks ORDER BY id")
        mem.sync(force=True)
        second = db_rows(mem.db_path, "SELECT id, path, start_line, end_line, hash FROM chunks ORDER BY id")
    assert first == second
    text = (ws / "memory" / "2026-01-02.md").read_text(encoding="utf-8")
    (chunk,) = chunk_text(text)
    expected = hashlib.sha256(
        f"memory:memory/2026-01-02.md:1:2:{chunk.hash}:fts-only".encode()
    ).hexdigest()
    assert chunk_id("memory", "memory/2026-01-02.md", chunk, "fts-only") == expected
    assert expected in {row[0] for row in first}


def test_curated_files_are_chunked_per_entry(ws: Path, tmp_path: Path) -> None:
    with open_memory(ws, tmp_path / "state") as mem:
        mem.sync()
        rows = db_rows(
            mem.db_path, "SELECT start_line, end_line, text FROM chunks WHERE path='MEMORY.md' ORDER BY start_line"
        )
    # The heading has no text of its own: it joins the entry under it.
    assert rows == [
        (1, 2, "# Facts\n- The gateway runs on port 8080."),
        (3, 3, "- Alice prefers green tea."),
    ]


def test_repeated_long_line_indexes(ws: Path, tmp_path: Path) -> None:
    # Regression: identical pieces of one long line got the same chunk id and the
    # UNIQUE constraint aborted the whole sync.
    write(ws / "memory" / "rule.md", "=" * 5000 + "\nbelow the rule\n")
    with open_memory(ws, tmp_path / "state") as mem:
        report = mem.sync()
        assert report.issues == ()
        assert [h.path for h in mem.search("below rule")] == ["memory/rule.md"]
        rows = db_rows(mem.db_path, "SELECT COUNT(*), COUNT(DISTINCT id) FROM chunks WHERE path='memory/rule.md'")
        assert rows[0][0] == rows[0][1] >= 2
        assert report.chunks_total == db_rows(mem.db_path, "SELECT COUNT(*) FROM chunks")[0][0]


def test_crlf_files_index_like_lf_files(tmp_path: Path) -> None:
    lf_ws = tmp_path / "lf"
    crlf_ws = tmp_path / "crlf"
    body = "# Trip\nBooked the train to Kyoto.\n\nHotel near the station.\n"
    write(lf_ws / "memory" / "trip.md", body)
    (crlf_ws / "memory").mkdir(parents=True)
    (crlf_ws / "memory" / "trip.md").write_bytes(body.replace("\n", "\r\n").encode())
    with open_memory(lf_ws, tmp_path / "s1") as a, open_memory(crlf_ws, tmp_path / "s2") as b:
        a.sync()
        b.sync()
        assert results(a, ["Kyoto train", "hotel station"]) == results(b, ["Kyoto train", "hotel station"])
        (hit,) = b.search("hotel station")
        assert "\r" not in hit.snippet
        assert hit.citation == "memory/trip.md#L1-L4"
        got = b.get("memory/trip.md")
        assert got.text == body.rstrip("\n")
        assert got.total_lines == 4
    assert db_rows(a.db_path, "SELECT hash FROM chunks") == db_rows(b.db_path, "SELECT hash FROM chunks")


# -- broken files -----------------------------------------------------------------------


def test_broken_files_are_reported_and_skipped(ws: Path, tmp_path: Path, monkeypatch) -> None:
    (ws / "memory" / "binary.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    (ws / "memory" / "latin1.md").write_bytes("Café crème brûlée\n".encode("latin-1"))
    locked = write(ws / "memory" / "locked.md", "secret words\n")
    write(ws / "memory" / "huge.md", "word " * 100)
    original = os.open

    def os_open(path: str, flags: int, *args: int) -> int:
        if os.fspath(path).endswith("locked.md"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return original(path, flags, *args)

    monkeypatch.setattr(os, "open", os_open)
    monkeypatch.setattr(reading_mod, "CAPS", ReadCaps(index=300))
    with open_memory(ws, tmp_path / "state") as mem:
        report = mem.sync()
        issues = {i.path: i.reason for i in report.issues}
        assert issues == {
            "memory/binary.md": "binary content (NUL bytes)",
            "memory/latin1.md": "not valid UTF-8 (byte 3)",
            "memory/locked.md": "unreadable: Permission denied",
            "memory/huge.md": "larger than 0 MiB",
        }
        assert report.files_added == 4
        assert [h.path for h in mem.search("kubernetes")] == ["memory/2026-01-02.md"]
        assert mem.search("secret") == []
        assert mem.search("crème") == []
        # Fixed files are picked up by the next incremental sync.
        locked.unlink()
        (ws / "memory" / "latin1.md").write_text("Café crème brûlée\n", encoding="utf-8")
        report = mem.sync()
        assert {i.path for i in report.issues} == {"memory/binary.md", "memory/huge.md"}
        assert report.files_added == 1
        assert [h.path for h in mem.search("crème brûlée")] == ["memory/latin1.md"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_file_by_mode(ws: Path, tmp_path: Path) -> None:  # pragma: no cover
    locked = write(ws / "memory" / "locked.md", "secret\n")
    locked.chmod(0)
    try:
        with open_memory(ws, tmp_path / "state") as mem:
            report = mem.sync()
            assert [i.path for i in report.issues] == ["memory/locked.md"]
            assert mem.search("kubernetes")
    finally:
        locked.chmod(0o644)


def test_a_file_that_turns_binary_keeps_its_last_good_version(ws: Path, tmp_path: Path) -> None:
    with open_memory(ws, tmp_path / "state") as mem:
        mem.sync()
        (ws / "memory" / "2026-01-03.md").write_bytes(b"\x00\x01\x02")
        report = mem.sync()
        assert [i.path for i in report.issues] == ["memory/2026-01-03.md"]
        assert report.files_removed == 0
        assert [h.path for h in mem.search("backup cron")] == ["memory/2026-01-03.md"]


# -- identity, locking, reset -----------------------------------------------------------


def test_identity_change_rebuilds(ws: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    with open_memory(ws, state) as mem:
        mem.sync()
    changed = KEYWORD_ONLY.replace(chunking=ChunkingConfig(tokens=200, overlap=20))
    with open_memory(ws, state, changed) as mem:
        report = mem.sync()
        assert report.full_rebuild and report.reason == "identity:chunkTokens"
        assert mem.sync().full_rebuild is False
    extra = KEYWORD_ONLY.replace(
        chunking=ChunkingConfig(tokens=200, overlap=20), extra_paths=(ExtraPath(path="docs"),)
    )
    with open_memory(ws, state, extra) as mem:
        assert mem.sync().reason == "identity:scopeHash"


def test_identity_change_without_auto_reindex_fails_with_guidance(ws: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    with open_memory(ws, state) as mem:
        mem.sync()
    paused = KEYWORD_ONLY.replace(
        auto_reindex=False, store=StoreConfig(fts_tokenizer="trigram")
    )
    with open_memory(ws, state, paused) as mem:
        with pytest.raises(IndexStoreError, match=r"identity:ftsTokenizer.*index --force"):
            mem.sync()
        assert mem.sync(force=True).reason == "forced"


def test_forced_sync_is_a_full_rebuild_with_the_same_content(ws: Path, tmp_path: Path) -> None:
    with open_memory(ws, tmp_path / "state") as mem:
        mem.sync()
        before = results(mem, QUERIES)
        report = mem.sync(force=True)
        assert report.full_rebuild and report.reason == "forced"
        assert report.files_added == 4 and report.chunks_indexed == 5
        assert results(mem, QUERIES) == before


def test_deleting_the_index_and_syncing_again_gives_the_same_results(ws: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    with open_memory(ws, state) as mem:
        mem.sync()
        before = results(mem, QUERIES)
        assert before[0][0][0] == "MEMORY.md#L1-L2"
        db = mem.db_path
        # While this Memory is open: delete the files under it.
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
        assert results(mem, QUERIES) == before
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    with open_memory(ws, state) as fresh:
        report = fresh.sync()
        assert report.reason == "no-index"
        assert results(fresh, QUERIES) == before


def test_reset_deletes_only_derived_state(ws: Path, tmp_path: Path) -> None:
    with open_memory(ws, tmp_path / "state") as mem:
        mem.sync()
        before = results(mem, QUERIES)
        mem.reset()
        assert not mem.db_path.exists()
        assert (ws / "MEMORY.md").exists()
        assert results(mem, QUERIES) == before


def test_concurrent_sync_without_waiting_is_busy(ws: Path, tmp_path: Path) -> None:
    db = tmp_path / "state" / "main.sqlite"
    db.parent.mkdir(parents=True)
    indexer = Indexer(db_path=db, workspace=ws, config=KEYWORD_ONLY)
    with exclusive_lock(indexer.lock_path), pytest.raises(IndexBusyError, match="try again"):
        indexer.sync(wait=False)
    assert indexer.sync(wait=False).files_added == 4


def test_a_busy_sync_names_the_process_that_holds_the_lock(ws: Path, tmp_path: Path) -> None:
    db = tmp_path / "state" / "memory" / "main.sqlite"
    holder = Indexer(db_path=db, workspace=ws, config=KEYWORD_ONLY)
    waiting = Indexer(db_path=db, workspace=ws, config=KEYWORD_ONLY)
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with holder.store.writer_lock(what="sync"):
            held.set()
            release.wait(10)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert held.wait(10)
        with pytest.raises(IndexBusyError, match=rf"syncing main.sqlite \(pid {os.getpid()} .*sync"):
            waiting.sync(wait=False)
    finally:
        release.set()
        thread.join()
    assert waiting.sync(wait=False).files_added == 4


def test_progress_callback(ws: Path, tmp_path: Path) -> None:
    calls: list[tuple[int, int, str]] = []
    with open_memory(ws, tmp_path / "state") as mem:
        mem.sync(progress=lambda done, total, path: calls.append((done, total, path)))
    assert calls[0] == (0, 4, "MEMORY.md")
    assert calls[-1] == (4, 4, "")
    assert len(calls) == 5


# -- interrupted rebuilds ---------------------------------------------------------------


def tmp_files(state: Path) -> list[str]:
    return sorted(p.name for p in (state / "memory").iterdir() if ".tmp-" in p.name)


def test_failure_mid_rebuild_keeps_the_previous_index(ws: Path, tmp_path: Path, monkeypatch) -> None:
    state = tmp_path / "state"
    with open_memory(ws, state) as mem:
        mem.sync()
        before = results(mem, QUERIES)
        generation = db_rows(mem.db_path, "SELECT value FROM meta WHERE key='generation'")
        write(ws / "memory" / "2026-01-05.md", "# Jan 5\nNew note about zeppelins.\n")
        calls = {"n": 0}
        original = IndexStore.replace_file

        def failing(self, **kwargs):
            calls["n"] += 1
            if calls["n"] == 3:
                raise OSError("disk full")
            return original(self, **kwargs)

        monkeypatch.setattr(IndexStore, "replace_file", failing)
        with pytest.raises(OSError, match="disk full"):
            mem.sync(force=True)
        assert calls["n"] == 3
        assert tmp_files(state) == []  # the temporary database was removed
        assert results(mem, QUERIES) == before
        assert mem.search("zeppelins") == []
        assert db_rows(mem.db_path, "SELECT value FROM meta WHERE key='generation'") == generation
        assert db_rows(mem.db_path, "PRAGMA integrity_check") == [("ok",)]
        monkeypatch.undo()
        report = mem.sync(force=True)
        assert report.files_added == 5
        assert [h.path for h in mem.search("zeppelins")] == ["memory/2026-01-05.md"]


def test_rebuild_that_would_publish_an_empty_index_is_refused(ws: Path, tmp_path: Path, monkeypatch) -> None:
    with open_memory(ws, tmp_path / "state") as mem:
        mem.sync()
        before = results(mem, QUERIES)

        def unreadable(path: Path):
            raise FileReadError("unreadable: Input/output error")

        monkeypatch.setattr(sync_mod, "read_note_bytes", unreadable)
        with pytest.raises(IndexStoreError, match="kept the previous index"):
            mem.sync(force=True)
        assert results(mem, QUERIES) == before
        assert tmp_files(tmp_path / "state") == []


def test_orphaned_temporary_databases_are_removed(ws: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    with open_memory(ws, state) as mem:
        mem.sync()
        db = mem.db_path
        for name in (".tmp-0123456789ab", ".tmp-0123456789ab-journal", ".tmp-deadbeef0000-wal"):
            Path(f"{db}{name}").write_bytes(b"leftover")
        unrelated = db.with_name("other.sqlite.tmp-x")
        unrelated.write_bytes(b"not ours")
        mem.sync()
        assert tmp_files(state) == ["other.sqlite.tmp-x"]


def make_big_workspace(root: Path, files: int) -> None:
    words = (
        "alpha beta gamma delta kubernetes gateway deploy backup tea coffee alice bob carol "
        "server port migration invoice budget travel paris tokyo garden piano recipe doctor"
    ).split()
    (root / "memory").mkdir(parents=True)
    for i in range(files):
        lines = [f"# Notes {i}"]
        for j in range(60):
            lines.append(" ".join(words[(i * 7 + j * 3 + k * k) % len(words)] for k in range(12)) + f" item{i}x{j}")
        day = f"2025-{1 + i // 28 % 12:02d}-{1 + i % 28:02d}"
        (root / "memory" / f"{day}-n{i}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (root / "MEMORY.md").write_text("- The gateway runs on port 8080.\n", encoding="utf-8")


CHILD = textwrap.dedent(
    """
    import sys
    from memmw import Memory, MemoryConfig

    def progress(done, total, path):
        if done == total // 2:
            print("MID", flush=True)

    mem = Memory(workspace=sys.argv[1], state_dir=sys.argv[2], config=MemoryConfig(provider="none"))
    print("START", flush=True)
    while True:
        mem.sync(force=True, progress=progress)
        print("DONE", flush=True)
    """
)


def kill_during_rebuild(ws: Path, state: Path, *, wait_for: str, delay: float) -> None:
    repo = Path(memmw.__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(repo)}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(ws), str(state)],
        stdout=subprocess.PIPE, env=env, text=True,
    )
    try:
        assert child.stdout is not None
        deadline = time.monotonic() + 60
        for line in child.stdout:
            if line.strip() == wait_for or time.monotonic() > deadline:
                break
        time.sleep(delay)
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=30) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        if child.stdout is not None:
            child.stdout.close()


def test_sigkill_during_a_forced_rebuild_leaves_a_searchable_index(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    make_big_workspace(ws, 300)
    state = tmp_path / "state"
    with open_memory(ws, state) as mem:
        first = mem.sync()
        assert first.chunks_total > 1000
        before = results(mem, ["gateway port", "item17x3", "kubernetes tokyo"])
    assert all(before)
    assert before[1][0][0].startswith("memory/2025-01-18-n17.md#L")

    # Kill in the middle of indexing into the temporary database, then at spread-out
    # moments of later rebuilds (indexing, the copy into the live file, the swap).
    moments = [("MID", 0.0), ("START", 0.15), ("DONE", 0.25), ("DONE", 0.4)]
    for wait_for, delay in moments:
        kill_during_rebuild(ws, state, wait_for=wait_for, delay=delay)
        db = state / "memory" / "main.sqlite"
        assert db_rows(db, "PRAGMA integrity_check") == [("ok",)]
        no_sync = KEYWORD_ONLY.replace(sync=SyncConfig(on_search=False))
        with open_memory(ws, state, no_sync) as mem:
            assert results(mem, ["gateway port", "item17x3", "kubernetes tokyo"]) == before
            assert mem.status().chunks == first.chunks_total
    # The first kill landed mid-rebuild: its temporary database is an orphan...
    # ...which the next sync removes.
    with open_memory(ws, state) as mem:
        report = mem.sync()
        assert not report.full_rebuild
        assert tmp_files(state) == []
        assert results(mem, ["gateway port", "item17x3", "kubernetes tokyo"]) == before


def test_sigkill_mid_rebuild_leaves_an_orphan_that_is_cleaned(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    make_big_workspace(ws, 200)
    state = tmp_path / "state"
    with open_memory(ws, state) as mem:
        mem.sync()
    kill_during_rebuild(ws, state, wait_for="MID", delay=0.0)
    assert len(tmp_files(state)) >= 1
    with open_memory(ws, state) as mem:
        mem.sync()
    assert tmp_files(state) == []


# -- names and files never stop a sync (issue 9, item 3) ----------------------------------


def issue_paths(mem: Memory) -> dict[str, str]:
    return {i["path"]: i["reason"] for i in mem.status().to_dict()["scan"]["issues"]}


def test_an_undecodable_file_name_is_reported_and_skipped(ws: Path, tmp_path: Path) -> None:
    bad = os.path.join(os.fsencode(ws / "memory"), b"caf\xe9.md")
    with open(bad, "wb") as fh:
        fh.write(b"Latin-1 named note about espresso.\n")
    with open_memory(ws, tmp_path / "s") as mem:
        report = mem.sync()
        assert report.files_added == 4
        assert any("caf\\xe9.md" in i.path for i in report.issues)
        assert "memory/caf\\xe9.md" in issue_paths(mem)
        assert mem.search("kubernetes migration")[0].path == "memory/2026-01-02.md"


def bounded(fn: Callable[[], object], fifo: Path, timeout: float = 5.0) -> object:
    """Run ``fn`` in a thread; fail (after unblocking a stuck FIFO reader) if it hangs."""
    box: list[object] = []

    def run() -> None:
        try:
            box.append(fn())
        except BaseException as exc:
            box.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(timeout)
        pytest.fail("blocked on a FIFO")
    return box[0]


def test_a_fifo_named_md_is_reported_and_never_read(ws: Path, tmp_path: Path) -> None:
    fifo = ws / "memory" / "pipe.md"
    os.mkfifo(fifo)
    with open_memory(ws, tmp_path / "s") as mem:
        report = bounded(mem.sync, fifo)
        assert isinstance(report, SyncReport) and report.files_added == 4
        assert issue_paths(mem)["memory/pipe.md"].startswith("not a regular file")


def test_read_markdown_refuses_a_fifo_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "x.md"
    os.mkfifo(fifo)
    outcome = bounded(lambda: read_markdown(fifo), fifo)
    assert isinstance(outcome, FileReadError) and "not a regular file" in str(outcome)


def test_a_folder_that_cannot_be_listed_keeps_its_indexed_files(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with open_memory(ws, tmp_path / "s") as mem:
        mem.sync()
        real_scandir = os.scandir
        topics = str(ws / "memory" / "topics")

        def scandir(path: object = ".") -> object:
            if os.fspath(path) == topics:  # type: ignore[arg-type]
                raise PermissionError(13, "Permission denied", topics)
            return real_scandir(path)  # type: ignore[arg-type]

        monkeypatch.setattr(os, "scandir", scandir)
        report = mem.sync()
        assert report.files_removed == 0
        assert mem.search("basil")[0].path == "memory/topics/garden.md"
        assert "Permission denied" in issue_paths(mem)["memory/topics/"]


def test_a_workspace_renamed_mid_sync_drops_nothing(ws: Path, tmp_path: Path) -> None:
    with open_memory(ws, tmp_path / "s") as mem:
        mem.sync()
        ws.rename(tmp_path / "ws-renamed")
        with pytest.raises(IndexStoreError, match="gone"):
            mem.sync()
        (tmp_path / "ws-renamed").rename(ws)
        assert mem.status().files == 4


def test_an_undecodable_transcript_name_never_stops_a_sync(tmp_path: Path) -> None:
    from memmw.workspace.transcript_source import is_transcript_file

    assert not is_transcript_file("caf\udce9.jsonl")
    assert is_transcript_file("café.jsonl")


def age(root: Path, seconds: float) -> None:
    """Set every note's mtime ``seconds`` into the past (as if written long before)."""
    for path in root.rglob("*.md"):
        os.utime(path, (time.time() - seconds, time.time() - seconds))


def test_an_incremental_sync_reads_only_notes_whose_stat_changed(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    age(ws, 3600)
    read: list[str] = []
    real = sync_mod.read_note_bytes  # every note's read goes through it

    def counting(path: Path) -> tuple[bytes, str, float, int]:
        read.append(path.name)
        return real(path)

    monkeypatch.setattr(sync_mod, "read_note_bytes", counting)
    with open_memory(ws, tmp_path / "state") as mem:
        mem.sync()
        assert len(read) == 4
        read.clear()
        assert mem.sync().files_changed == 0
        assert read == []  # size and mtime match, recorded long after the write
        write(ws / "memory" / "2026-01-03.md", "# Jan 3\nBob fixed the backup cron job, twice.\n")
        report = mem.sync()
        assert read == ["2026-01-03.md"] and report.files_changed == 1
        assert "twice" in mem.search("backup cron")[0].snippet


def test_a_same_size_rewrite_within_the_mtime_resolution_is_still_seen(
    ws: Path, tmp_path: Path
) -> None:
    note = ws / "memory" / "2026-01-02.md"
    with open_memory(ws, tmp_path / "state") as mem:
        mem.sync()  # the note was written just now: its record is "racy"
        before = os.stat(note)
        note.write_text(note.read_text(encoding="utf-8").replace("kubernetes", "kuberneteZ"))
        # The same size and, as on a coarse clock, the same mtime as recorded.
        os.utime(note, ns=(before.st_atime_ns, before.st_mtime_ns))
        assert os.stat(note).st_size == before.st_size
        mem.sync()
        assert mem.search("kuberneteZ"), "a rewrite inside the racy window was missed"
        # Once the record is older than the window, stat alone decides.
        age(ws, 3600)
        mem.sync()
        mem.sync()
        with open(note, "r+", encoding="utf-8") as fh:
            text = fh.read()
        stat = os.stat(note)
        note.write_text(text.replace("kuberneteZ", "kubernetes"), encoding="utf-8")
        os.utime(note, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        mem.sync()
        assert mem.search("kuberneteZ"), "stat unchanged and outside the window: not re-read"
        mem.sync(force=True)  # a forced sync reads everything
        assert not mem.search("kuberneteZ")


# -- one bad input never stops the whole index ---------------------------------------------

SESSIONS = MemoryConfig(provider="none", sources=("memory", "sessions"))


def _message(text: str, role: str = "user") -> bytes:
    record = {"type": "message", "message": {"role": role, "content": text}}
    return json.dumps(record, ensure_ascii=False).encode("utf-8")


def _transcript(state: Path, name: str, lines: list[bytes], end: bytes = b"\n") -> Path:
    path = transcripts_dir(state, "main") / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(line + end for line in lines))
    return path


def test_a_deeply_nested_transcript_line_is_skipped_and_the_rest_syncs(ws: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    _transcript(state, "s1.jsonl", [
        _message("we chose postgres for the ledger"),
        b"[" * 1000 + b"]" * 1000,
        _message("the ledger ships friday", "assistant"),
    ])
    with open_memory(ws, state, SESSIONS) as mem:
        report = mem.sync()
        assert [(i.path, i.line, i.reason) for i in report.issues] == [
            ("sessions/s1.jsonl", 2, "JSON nested deeper than 256 levels")
        ]
        hits = mem.search("ledger ships friday")
        assert [(h.path, h.end_line) for h in hits] == [("sessions/s1.jsonl", 3)]
        assert [h.path for h in mem.search("kubernetes")] == ["memory/2026-01-02.md"]
        # status keeps listing the skipped line while the transcript is unchanged.
        mem.sync()
        assert [(i.path, i.line) for i in mem.status().issues] == [("sessions/s1.jsonl", 2)]


def test_line_separators_in_transcripts_are_indexed_and_cited_on_their_line(ws: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    path = _transcript(state, "s1.jsonl", [
        _message("pasted from the PDF:\u2028the vendor is zephyrcorp"),
        _message("next\x85paragraph mentions quokkas"),
        _message("the last line is about wombats", "assistant"),
    ])
    n_lines = path.read_bytes().count(b"\n")
    with open_memory(ws, state, SESSIONS) as mem:
        assert mem.sync().issues == ()
        (chunk,) = mem.search("zephyrcorp quokkas wombats")
        # One message a line: the chunk's pieces are the messages, on their JSONL lines.
        assert (chunk.path, chunk.chunk_start_line, chunk.chunk_end_line) == ("sessions/s1.jsonl", 1, 3)
        assert n_lines == 3
        for word in ("zephyrcorp", "quokkas", "wombats"):
            (hit,) = mem.search(word)
            assert word in hit.snippet and hit.end_line <= n_lines


@pytest.mark.parametrize(
    "exc",
    [RecursionError("deep"), MemoryError(), ValueError("bad"),
     UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"), KeyError("k")],
    ids=lambda e: type(e).__name__,
)
def test_any_parse_failure_of_a_note_is_a_reported_skip(
    ws: Path, tmp_path: Path, monkeypatch, exc: BaseException
) -> None:
    write(ws / "memory" / "poison.md", "POISON pill\n")
    real = sync_mod.chunk_text

    def chunk_text(text: str, **kw: object):
        if "POISON" in text:
            raise exc
        return real(text, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(sync_mod, "chunk_text", chunk_text)
    with open_memory(ws, tmp_path / "state") as mem:
        report = mem.sync()
        assert [(i.path, i.line) for i in report.issues] == [("memory/poison.md", None)]
        assert type(exc).__name__ in report.issues[0].reason
        assert [h.path for h in mem.search("basil")] == ["memory/topics/garden.md"]
        assert [i.path for i in mem.status().issues] == ["memory/poison.md"]


@pytest.mark.parametrize("where", ["transcript_document", "chunks"])
def test_any_parse_failure_of_a_transcript_is_a_reported_skip(
    ws: Path, tmp_path: Path, monkeypatch, where: str
) -> None:
    state = tmp_path / "state"
    _transcript(state, "bad.jsonl", [_message("doomed words")])
    _transcript(state, "good.jsonl", [_message("the heron database")])
    real = sync_mod.transcript_document

    def transcript_document(path: Path):
        if path.name == "bad.jsonl" and where == "transcript_document":
            raise RecursionError("maximum recursion depth exceeded")
        doc = real(path)
        if path.name == "bad.jsonl":
            def boom(**_kw: object) -> None:
                raise MemoryError
            object.__setattr__(doc, "chunks", boom)
        return doc

    monkeypatch.setattr(sync_mod, "transcript_document", transcript_document)
    with open_memory(ws, state, SESSIONS) as mem:
        report = mem.sync()
        assert [(i.path, i.line) for i in report.issues] == [("sessions/bad.jsonl", None)]
        assert [h.path for h in mem.search("heron database")] == ["sessions/good.jsonl"]
        assert mem.search("doomed") == []


def test_transcripts_indexed_before_the_line_fix_are_read_again(
    ws: Path, tmp_path: Path, monkeypatch
) -> None:
    state = tmp_path / "state"
    reads: list[str] = []
    real = sync_mod.transcript_document

    def counting(path: Path):
        reads.append(path.name)
        return real(path)

    _transcript(state, "s1.jsonl", [_message("a\u2028b"), _message("tapir facts")])
    with open_memory(ws, state, SESSIONS) as mem:
        mem.sync()
        assert [h.end_line for h in mem.search("tapir")] == [2]
        # An index made by the old reader (rows with shifted lines) has no version mark.
        with mem.store.write() as writer, writer.transaction():
            writer.set_meta(sync_mod.TRANSCRIPTS_VERSION_KEY, "1")
        monkeypatch.setattr(sync_mod, "transcript_document", counting)
        mem.sync()
        assert reads == ["s1.jsonl"]  # read again although its size and mtime did not change
        mem.sync()
        assert reads == ["s1.jsonl"]  # then trusted again
        with mem.store.read() as reader:
            assert reader.get_meta(sync_mod.TRANSCRIPTS_VERSION_KEY) == sync_mod.TRANSCRIPTS_VERSION


# -- every surface counts the same lines -----------------------------------------------------

_WORDS = ["alpha", "beta", "gamma", "delta", "café", "字", "", " "]
_ODD = list(NOT_LINE_BREAKS)  # characters str.splitlines breaks on and memmw does not


def _shown(result: ReadResult) -> str:
    """The lines a memory_get window shows, without its ``[truncated: ...]`` notice."""
    if result.truncated:
        return result.text[: result.text.rindex("\n\n[truncated: ")]
    return result.text


@st.composite
def _note_lines(draw: st.DrawFn) -> tuple[list[str], str]:
    """Lines (each with a unique marker word, or blank) and the file text joining them."""
    n = draw(st.integers(min_value=1, max_value=40))
    lines: list[str] = []
    for i in range(n):
        if draw(st.integers(0, 5)) == 0:
            lines.append(draw(st.sampled_from(["", " ", *_ODD])))
            continue
        parts = draw(st.lists(st.sampled_from(_WORDS + _ODD), max_size=6))
        marker = "mk" + "".join(chr(ord("a") + int(d)) for d in f"{i:02d}")
        lines.append(" ".join([*parts[:3], marker, *parts[3:]]))
    ends = [draw(st.sampled_from(["\n", "\r\n", "\r"])) for _ in lines]
    for i in range(1, len(lines)):  # "\r" + an empty line ended by "\n" would be one CRLF
        if ends[i - 1] == "\r" and lines[i] == "" and ends[i] == "\n":
            ends[i] = "\r\n"
    return lines, "".join(line + end for line, end in zip(lines, ends, strict=True))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=_note_lines(), curated=st.booleans())
def test_indexer_chunks_citations_and_memory_get_count_the_same_lines(
    tmp_path: Path, case: tuple[list[str], str], curated: bool
) -> None:
    lines, text = case
    root = tmp_path / f"ws-{uuid.uuid4().hex}"
    rel = "MEMORY.md" if curated else "memory/notes.md"
    (root / "memory").mkdir(parents=True)
    (root / rel).write_bytes(text.encode("utf-8"))
    config = MemoryConfig(provider="none", chunking=ChunkingConfig(tokens=40, overlap=10))
    with make_memory(workspace=root, state_dir=root.with_suffix(".state"), config=config) as mem:
        assert mem.sync().issues == ()
        # memory_get: the oracle's lines, one at a time and as a whole.
        whole = mem.get(rel, 1, len(lines) + 5)
        assert whole.total_lines == len(lines) and whole.text == "\n".join(lines)
        for n, line in enumerate(lines, start=1):
            assert _shown(mem.get(rel, n, 1)) == line
        # The indexer's chunks: every piece is the oracle's line of its number.
        rows = db_rows(mem.db_path, "SELECT start_line, end_line, text, line_map FROM chunks")
        covered: set[int] = set()
        for start, end, body, line_map in rows:
            numbers = json.loads(line_map) if line_map else list(range(start, end + 1))
            pieces = body.split("\n")
            assert len(pieces) == len(numbers) and 1 <= start <= end <= len(lines)
            for number, piece in zip(numbers, pieces, strict=True):
                assert piece == lines[number - 1]
                covered.add(number)
        assert {n for n, line in enumerate(lines, 1) if line.strip()} <= covered
        # Citations: the hit for a line's marker cites a range holding that line, and
        # memory_get of the cited range shows the snippet.
        for n, line in enumerate(lines, start=1):
            marker = next((w for w in line.split(" ") if w.startswith("mk")), None)
            if marker is None:
                continue
            hits = [h for h in mem.search(marker, max_results=50) if marker in h.snippet]
            assert hits, (marker, line)
            hit = hits[0]
            assert hit.chunk_start_line <= n <= hit.chunk_end_line
            assert hit.start_line <= n <= hit.end_line <= len(lines)
            window = _shown(mem.get(rel, hit.start_line, hit.end_line - hit.start_line + 1))
            assert hit.snippet.strip() in window


# -- hostile input: generated bad files and transcript lines among good ones ---------------

#: Transcript lines that must be skipped and listed (kind -> the line's bytes).

def _parses_as_json(line: bytes) -> bool:
    """Whether a generated "not JSON" line happens to be JSON (``{}``): then it is no issue."""
    try:
        json.loads(line)
    except (ValueError, RecursionError):
        return False
    return True

_BAD_LINES = {
    "deep": st.integers(257, 4000).map(lambda d: b"[" * d + b"]" * d),
    "deep-content": st.integers(256, 3000).map(
        lambda d: b'{"type":"message","message":{"role":"user","content":'
        + b"[" * d + b"]" * d + b"}}"
    ),
    "not-utf8": st.sampled_from([b"\xff", b"\xc3(", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80"]).map(
        lambda bad: b'{"type":"message","message":{"role":"user","content":"x' + bad + b'"}}'
    ),
    "not-json": st.binary(min_size=1, max_size=40)
    .map(lambda b: b"{" + b.replace(b"\n", b"").replace(b"\r", b""))
    .filter(lambda b: b.strip() != b"" and not _parses_as_json(b)),
    "huge-int": st.just(b'{"type":"message","n":' + b"9" * 5000 + b"}"),
    "too-long": st.just(
        b'{"type":"message","message":{"role":"user","content":"' + b"y" * 9000 + b'"}}'
    ),
}
#: Odd lines that parse: skipped or indexed, but never fatal (not necessarily listed).
_ODD_LINES = st.sampled_from([
    b"",
    b"   ",
    b"[]",
    b"null",
    b'"just a string"',
    b'{"type":"message"}',
    b'{"type":"message","message":[]}',
    b'{"type":"message","message":{"role":5,"content":"r"}}',
    b'{"type":"message","message":{"role":"user","content":7,"tool_calls":5}}',
    b'{"type":"message","message":{"role":"user","content":{"text":["x"]}}}',
    b'{"type":"message","message":{"role":"user","content":"lone \\ud83d half emoji"}}',
    b'{"type":"message","message":{"role":"user","content":"nul \\u0000 byte"}}',
    b'{"type":"message","message":{"role":"assistant","content":NaN}}',
    b'{"type":"message","timestamp":' + b"[" * 900 + b"]" * 900
    + b',"message":{"role":"user","content":"deep stamp"}}',
])
#: Markdown files that must be skipped and listed.
_BAD_NOTES = st.sampled_from([
    b"\x89PNG\r\n\x1a\n\x00\x00",
    "caf\u00e9 cr\u00e8me\n".encode("latin-1"),
    b"ok start \xff\xfe then garbage\n",
    b"x" * 5000,  # over the patched size limit
])
_ODD_NOTES = st.sampled_from([
    b"",
    b"\xef\xbb\xbf# BOM only\n",
    ("  " * 2000 + "- deeply indented\n").encode(),
    ("- a\n" + "  - b\n" * 500).encode(),
    ("<!-- importance: 9 -->" * 300 + "\n").encode(),
    ("#" * 5000 + " title\n").encode(),
    ("~~" * 2000 + "\n").encode(),
    "\u2028\u2029\x85\x0b\x0c\x1c\x1d\x1e\n".encode(),
    b"\r\r\r\n\n\r",
])


@st.composite
def _hostile_workspace(draw: st.DrawFn) -> dict[str, object]:
    transcripts: dict[str, list[tuple[str, bytes]]] = {}
    for t in range(draw(st.integers(1, 3))):
        lines: list[tuple[str, bytes]] = []
        for i in range(draw(st.integers(1, 8))):
            kind = draw(st.sampled_from(["good", "good", "bad", "odd"]))
            if kind == "good":
                sep = draw(st.sampled_from(["", *NOT_LINE_BREAKS]))
                marker = f"tk{chr(97 + t)}{chr(97 + i)}"
                role = draw(st.sampled_from(["user", "assistant"]))
                lines.append((marker, _message(f"note{sep}about {marker} {sep}here", role)))
            elif kind == "bad":
                bad_kind = draw(st.sampled_from(sorted(_BAD_LINES)))
                lines.append(("bad:" + bad_kind, draw(_BAD_LINES[bad_kind])))
            else:
                lines.append(("odd", draw(_ODD_LINES)))
        transcripts[f"s{t}.jsonl"] = lines
    notes = {
        f"memory/bad{i}.md": draw(_BAD_NOTES) for i in range(draw(st.integers(0, 2)))
    }
    odd = {f"memory/odd{i}.md": draw(_ODD_NOTES) for i in range(draw(st.integers(0, 2)))}
    end = draw(st.sampled_from([b"\n", b"\r\n"]))
    return {"transcripts": transcripts, "bad_notes": notes, "odd_notes": odd, "end": end}


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=_hostile_workspace())
def test_hostile_files_and_lines_never_stop_the_sync(
    tmp_path: Path, case: dict[str, object]
) -> None:
    from memmw.workspace import transcripts as transcripts_mod

    root = tmp_path / f"ws-{uuid.uuid4().hex}"
    state = root.with_suffix(".state")
    write(root / "memory" / "2026-01-02.md", "# Jan 2\nWe planned the kubernetes migration.\n")
    for rel, data in {**case["bad_notes"], **case["odd_notes"]}.items():  # type: ignore[dict-item]
        (root / rel).write_bytes(data)
    end: bytes = case["end"]  # type: ignore[assignment]
    transcripts: dict[str, list[tuple[str, bytes]]] = case["transcripts"]  # type: ignore[assignment]
    for name, lines in transcripts.items():
        _transcript(state, name, [data for _kind, data in lines], end)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(reading_mod, "CAPS", ReadCaps(index=4096))
        mp.setattr(transcripts_mod, "MAX_TRANSCRIPT_LINE_BYTES", 8192)
        with make_memory(workspace=root, state_dir=state, config=SESSIONS) as mem:
            report = mem.sync()  # never raises
            listed = {(i.path, i.line) for i in mem.status().issues}
            assert {(i.path, i.line) for i in report.issues} == listed
            assert [h.path for h in mem.search("kubernetes")] == ["memory/2026-01-02.md"]
            for rel in case["bad_notes"]:  # type: ignore[attr-defined]
                assert (rel, None) in listed
            for name, lines in transcripts.items():
                path = f"sessions/{name}"
                n_lines = len(lines)
                for number, (kind, _data) in enumerate(lines, start=1):
                    if kind.startswith("bad:"):
                        assert (path, number) in listed, kind
                    elif kind.startswith("tk"):
                        hits = [h for h in mem.search(kind, max_results=20) if kind in h.snippet]
                        assert [h.path for h in hits] == [path], kind
                        assert hits[0].chunk_start_line <= number <= hits[0].chunk_end_line
                        assert hits[0].end_line <= n_lines
                    assert (path, None) not in listed  # one bad line never costs the file
