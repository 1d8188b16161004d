"""Freshness end to end: background sync on search, the watcher, fallbacks, processes."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memmw import Memory, MemoryConfig
from memmw.config import SyncConfig
from memmw.engine.indexer import Indexer
from memmw.testing import require_optional
from memmw.types import SyncReport
from memmw.workspace.transcripts import TranscriptStore

from ..conftest import make_memory, write

KEYWORD_ONLY = MemoryConfig(provider="none")
FAST = MemoryConfig(provider="none", sync=SyncConfig(watch_debounce_ms=200))
REPO = Path(__file__).resolve().parents[1]


def wait_until(pred: Callable[[], bool], timeout: float = 5.0, step: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(step)
    return pred()


def fingerprint(db: Path) -> tuple[list[Any], list[Any]]:
    """Files and chunks of an index, comparable across databases."""
    conn = sqlite3.connect(db)
    try:
        files = conn.execute("SELECT path, source, hash, size FROM files ORDER BY 1, 2").fetchall()
        chunks = conn.execute(
            "SELECT path, source, start_line, end_line, hash FROM chunks ORDER BY 1, 2, 3, 4, 5"
        ).fetchall()
    finally:
        conn.close()
    return files, chunks


def fresh_fingerprint(ws: Path, tmp: Path, config: MemoryConfig = KEYWORD_ONLY) -> Any:
    db = tmp / f"fresh-{time.monotonic_ns()}.sqlite"
    Indexer(db_path=db, workspace=ws, config=config).sync(force=True)
    return fingerprint(db)


def memmw_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("memmw-")]


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    write(root / "MEMORY.md", "- The gateway runs on port 8080.\n")
    write(root / "memory" / "2026-01-01.md", "Planted tomatoes.\n")
    return root


@pytest.fixture()
def watchdog_installed() -> None:
    require_optional("watchdog", "watch")


# -- background sync on search -----------------------------------------------------------


def test_search_never_waits_for_a_sync(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with make_memory(workspace=ws, state_dir=tmp_path / "state", config=KEYWORD_ONLY) as mem:
        mem.sync()
        write(ws / "memory" / "2026-01-02.md", "The heron nests by the lake.\n")
        mem.sync_in_background()
        mem.wait_for_sync(10)
        assert mem.search("heron lake")
        real = Indexer.sync
        gate = threading.Event()

        def slow_sync(self: Indexer, **kwargs: Any) -> SyncReport:
            gate.wait(10)
            return real(self, **kwargs)

        monkeypatch.setattr(Indexer, "sync", slow_sync)
        write(ws / "memory" / "2026-01-03.md", "The kingfisher dives for fish.\n")
        mem.sync_in_background()  # stuck behind the gate
        started = time.perf_counter()
        assert mem.search("kingfisher") == []  # the last published index
        assert mem.search("heron lake")
        assert time.perf_counter() - started < 1.0
        # The worker may still be waiting out its one-sync-per-second rate limit.
        deadline = time.monotonic() + 5
        while not mem.status().to_dict()["sync"]["running"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert mem.status().to_dict()["sync"]["running"] is True
        assert mem.search("kingfisher") == []  # still the last published index
        gate.set()
        assert mem.wait_for_sync(10)
        assert mem.search("kingfisher")


def test_dirty_search_starts_one_background_sync(ws: Path, tmp_path: Path) -> None:
    with make_memory(workspace=ws, state_dir=tmp_path / "state", config=KEYWORD_ONLY) as mem:
        assert mem.dirty  # dirty from construction
        assert mem.search("gateway port")  # no index yet: built synchronously
        assert not mem.dirty
        make_memory(workspace=ws, state_dir=tmp_path / "state", config=KEYWORD_ONLY).close()
    write(ws / "memory" / "2026-01-04.md", "The otter visited.\n")
    with make_memory(workspace=ws, state_dir=tmp_path / "state", config=KEYWORD_ONLY) as mem:
        assert mem.dirty
        assert mem.search("otter") == []  # stale, and a background sync started
        assert mem.wait_for_sync(10)
        assert not mem.dirty
        assert mem.search("otter")
        status = mem.status().to_dict()
        assert status["dirty"] is False
        assert status["lastSync"] is not None
        assert status["sync"]["backgroundSyncs"] == 1
        assert status["watcher"]["state"] == "stopped"


def test_on_search_off_leaves_the_index_alone(ws: Path, tmp_path: Path) -> None:
    cfg = MemoryConfig(provider="none", sync=SyncConfig(on_search=False))
    with make_memory(workspace=ws, state_dir=tmp_path / "state", config=cfg) as mem:
        mem.sync()
        mem.sync_in_background()
        mem.wait_for_sync(10)
        write(ws / "memory" / "2026-01-05.md", "The badger dug.\n")
        mem.search("badger")
        assert mem.wait_for_sync(10)
        assert mem.status().to_dict()["sync"]["backgroundSyncs"] == 1


def test_background_failures_are_logged_and_counted(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with make_memory(workspace=ws, state_dir=tmp_path / "state", config=KEYWORD_ONLY) as mem:
        mem.sync()

        def broken(self: Indexer, **kwargs: Any) -> SyncReport:
            raise OSError(errno.EIO, "disk on fire")

        monkeypatch.setattr(Indexer, "sync", broken)
        mem.sync_in_background()
        assert mem.wait_for_sync(10)
        sync = mem.status().to_dict()["sync"]
        assert sync["failures"] == 1 and "disk on fire" in sync["lastError"]
        assert mem.dirty  # still dirty: the next search retries
        assert "background sync failed: OSError" in caplog.text
        assert mem.search("gateway")  # searches keep working


def test_interval_sync(ws: Path, tmp_path: Path) -> None:
    cfg = MemoryConfig(
        provider="none", sync=SyncConfig(on_search=False, interval_minutes=0.005)
    )  # 0.3 s
    with make_memory(workspace=ws, state_dir=tmp_path / "state", config=cfg) as mem:
        mem.sync()
        write(ws / "memory" / "2026-01-06.md", "The lynx prowled.\n")
        assert wait_until(lambda: bool(mem.search("lynx")), timeout=5)


def test_compaction_forces_a_session_sync(ws: Path, tmp_path: Path) -> None:
    cfg = MemoryConfig(provider="none", sources=("memory", "sessions"))
    state = tmp_path / "state"
    with make_memory(workspace=ws, state_dir=state, config=cfg) as mem:
        mem.sync()
        TranscriptStore(state, "main").append("s1", "user", "remember the narwhal tusk")
        assert mem.notify_transcript(
            TranscriptStore(state, "main").path("s1")
        ) is False  # under the thresholds
        assert mem.notify_compaction() is True
        assert mem.wait_for_sync(10)
        assert mem.search("narwhal tusk")[0].source == "sessions"
    with make_memory(workspace=ws, state_dir=state, config=KEYWORD_ONLY) as mem:
        assert mem.notify_compaction() is False  # sessions source off


# -- watching ----------------------------------------------------------------------------


@pytest.mark.optional
def test_a_new_line_is_found_without_an_explicit_sync(
    ws: Path, tmp_path: Path, watchdog_installed: None
) -> None:
    # Default debounce (1500 ms): the "searchable within 3 s".
    with Memory(ws, tmp_path / "state", config=KEYWORD_ONLY, watch=True) as mem:
        assert mem.watcher_state == "watching"
        mem.sync()
        started = time.monotonic()
        with (ws / "memory" / "2026-01-01.md").open("a", encoding="utf-8") as fh:
            fh.write("The quetzal feather is in the blue box.\n")
        assert wait_until(lambda: bool(mem.search("quetzal feather")), timeout=6)
        assert time.monotonic() - started < 3.0
        status = mem.status().to_dict()
        assert status["watcher"]["state"] == "watching"
        assert status["dirty"] is False


@pytest.mark.optional
def test_watch_tracks_creates_moves_and_deletes(
    ws: Path, tmp_path: Path, watchdog_installed: None
) -> None:
    with Memory(ws, tmp_path / "state", config=FAST, watch=True) as mem:
        mem.sync()
        folder = ws / "memory" / "projects"
        folder.mkdir()
        draft = write(tmp_path / "draft.md", "The ibis project starts Monday.\n")
        draft.rename(folder / "ibis.md")  # moved into a just-created folder
        assert wait_until(lambda: bool(mem.search("ibis project")))
        (folder / "ibis.md").rename(folder / "ibis-renamed.md")
        assert wait_until(
            lambda: [h.path for h in mem.search("ibis project")]
            == ["memory/projects/ibis-renamed.md"]
        )
        (ws / "memory" / "2026-01-01.md").unlink()
        assert wait_until(lambda: not mem.search("tomatoes"))
        write(ws / "USER.md", "- Prefers oolong tea.\n")
        assert wait_until(lambda: bool(mem.search("oolong")))
        assert wait_until(lambda: not mem.dirty)
        assert fingerprint(mem.db_path) == fresh_fingerprint(ws, tmp_path)


@pytest.mark.optional
def test_context_manager_stops_every_thread(
    ws: Path, tmp_path: Path, watchdog_installed: None
) -> None:
    before = set(memmw_threads())
    with Memory(ws, tmp_path / "state", config=FAST, watch=True) as mem:
        mem.search("gateway")
        write(ws / "MEMORY.md", "- changed\n")
        time.sleep(0.4)
        assert set(memmw_threads()) - before
        assert mem.start_watching() == "watching"  # idempotent
    assert wait_until(lambda: set(memmw_threads()) <= before, timeout=5)
    with make_memory(workspace=ws, state_dir=tmp_path / "state", config=FAST) as mem:
        assert mem.start_watching() == "watching"
        mem.stop_watching()
        mem.stop_watching()
        assert mem.watcher_state == "stopped"


@pytest.mark.optional
def test_watch_exhaustion_falls_back_to_sync_on_search(
    ws: Path,
    tmp_path: Path,
    watchdog_installed: None,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from watchdog.observers.api import BaseObserver

    def exhausted(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise OSError(errno.ENOSPC, "inotify watch limit reached")

    monkeypatch.setattr(BaseObserver, "schedule", exhausted)
    with make_memory(workspace=ws, state_dir=tmp_path / "state", config=FAST) as mem:
        mem.sync()
        assert mem.start_watching() == "fallback"
        assert caplog.text.count("ran out of file watches") == 1
        write(ws / "memory" / "2026-01-07.md", "The marmot whistled.\n")
        time.sleep(1.1)  # past the fallback rate limit
        mem.search("marmot")  # triggers a background sync, does not wait
        assert mem.wait_for_sync(10)
        assert mem.search("marmot")
        assert mem.status().to_dict()["watcher"]["state"] == "fallback"


@pytest.mark.optional
def test_watched_transcripts_are_indexed_after_50_messages(
    ws: Path, tmp_path: Path, watchdog_installed: None
) -> None:
    cfg = MemoryConfig(
        provider="none", sources=("memory", "sessions"), sync=SyncConfig(watch_debounce_ms=200)
    )
    state = tmp_path / "state"
    store = TranscriptStore(state, "main")
    with Memory(ws, state, config=cfg, watch=True) as mem:
        mem.sync()
        for i in range(10):
            store.append("s1", "user", f"the okapi enclosure, note {i}")
        time.sleep(0.8)
        assert mem.search("okapi enclosure") == []  # under 50 messages, 100 kB
        for i in range(40):
            role = "assistant" if i % 2 else "user"
            store.append("s1", role, f"okapi note {i}; Authorization: Bearer tok_{i:04d}abcdefgh")
        assert wait_until(lambda: bool(mem.search("okapi enclosure")), timeout=5)
        hits = mem.search("okapi note bearer", max_results=20)
        assert hits and all(h.source == "sessions" for h in hits)
        assert all("abcdefgh" not in h.snippet for h in hits)


@pytest.mark.optional
def test_cli_watch_exits_cleanly_on_ctrl_c(ws: Path, tmp_path: Path, watchdog_installed: None) -> None:
    env = {**os.environ, "MEMMW_PROVIDER": "none", "MEMMW__SYNC__WATCH_DEBOUNCE_MS": "200"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "memmw", "-w", str(ws), "--state-dir", str(tmp_path / "st"),
         "watch"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=REPO,
    )
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline(), proc.stdout.readline()]
        assert lines[0].startswith("Indexed:") and lines[1].startswith("Watching"), lines
        write(ws / "memory" / "2026-01-08.md", "The tapir bathed.\n")
        found = wait_until(
            lambda: subprocess.run(
                [sys.executable, "-m", "memmw", "-w", str(ws), "--state-dir",
                 str(tmp_path / "st"), "search", "tapir"],
                capture_output=True, text=True, env=env, cwd=REPO,
            ).stdout.split("  ")[-1].startswith("memory/2026-01-08.md"),
            timeout=10, step=0.3,
        )
        assert found
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, out
    assert "Stopped watching." in out
    assert "Traceback" not in out


# -- processes ---------------------------------------------------------------------------

_KILL_CHILD = textwrap.dedent(
    """
    import sys
    from memmw import Memory, MemoryConfig
    ws, state, force = sys.argv[1], sys.argv[2], sys.argv[3] == "force"
    mem = Memory(ws, state, config=MemoryConfig(provider="none"))
    i = 0
    while True:
        with open(f"{ws}/memory/churn-{i % 7}.md", "w") as fh:
            fh.write(f"churn round {i}\\n" * 200)
        print("sync", flush=True)
        mem.sync(force=force)
        i += 1
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["incremental", "force"])
def test_sigkill_mid_sync_leaves_a_repairable_index(ws: Path, tmp_path: Path, mode: str) -> None:
    for i in range(150):
        write(ws / "memory" / f"topic-{i:03d}.md", f"Topic {i} notes.\n" + "filler line\n" * 300)
    state = tmp_path / "state"
    with make_memory(workspace=ws, state_dir=state, config=KEYWORD_ONLY) as mem:
        mem.sync()
    proc = subprocess.Popen(
        [sys.executable, "-c", _KILL_CHILD, str(ws), str(state), mode],
        stdout=subprocess.PIPE, text=True, cwd=REPO,
    )
    assert proc.stdout is not None
    for _ in range(3):
        assert proc.stdout.readline() == "sync\n"
    time.sleep(0.05)  # inside the fourth sync
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    db = state / "memory" / "main.sqlite"
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    with make_memory(workspace=ws, state_dir=state, config=KEYWORD_ONLY) as mem:
        assert mem.search("Topic 42 notes")  # the previous generation is readable
        mem.sync()
        assert not list((state / "memory").glob("*.tmp-*"))  # orphans removed
        assert fingerprint(db) == fresh_fingerprint(ws, tmp_path)


_SOAK_WRITER = textwrap.dedent(
    """
    import sys, time
    from memmw import Memory, MemoryConfig
    ws, state, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    mem = Memory(ws, state, config=MemoryConfig(provider="none"))
    end = time.monotonic() + seconds
    i = 0
    while time.monotonic() < end:
        with open(f"{ws}/memory/w-{i:05d}.md", "w") as fh:
            fh.write(f"writer file {i} token{i}x\\n")
        mem.sync()
        i += 1
    mem.close()
    print(i)
    """
)


@pytest.mark.slow
def test_two_processes_neither_corrupt_nor_lose(ws: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    env = {**os.environ, "MEMMW_PROVIDER": "none"}
    writer = subprocess.Popen(
        [sys.executable, "-c", _SOAK_WRITER, str(ws), str(state), "4"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, env=env,
    )
    base = [sys.executable, "-m", "memmw", "-w", str(ws), "--state-dir", str(state)]
    errors: list[str] = []
    rounds = 0
    while writer.poll() is None:
        for args in (["index"], ["search", "writer file"], ["index", "--force"]):
            r = subprocess.run(base + args, capture_output=True, text=True, cwd=REPO, env=env)
            if r.returncode != 0:
                errors.append(f"{args}: {r.stderr.strip()}")
        rounds += 1
    out, err = writer.communicate()
    assert writer.returncode == 0, err
    assert errors == []
    written = int(out.strip())
    assert written > 5 and rounds >= 1
    with make_memory(workspace=ws, state_dir=state, config=KEYWORD_ONLY) as mem:
        mem.sync()
        paths = {row[0] for row in fingerprint(mem.db_path)[0]}
    assert {f"memory/w-{i:05d}.md" for i in range(written)} <= paths
    assert fingerprint(state / "memory" / "main.sqlite") == fresh_fingerprint(ws, tmp_path)


@pytest.fixture(autouse=True)
def _no_leaked_threads() -> Iterator[None]:
    before = set(memmw_threads())
    yield
    assert wait_until(lambda: set(memmw_threads()) <= before, timeout=5), memmw_threads()


def test_a_background_sync_waits_for_a_burst_of_searches_to_pause(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sync a search requests starts once searches pause (not while they compete)."""
    import memmw.engine.freshness as freshness

    monkeypatch.setattr(freshness, "SEARCH_QUIET_S", 0.3)
    started: list[float] = []
    real = Indexer.sync

    def timed_sync(self: Indexer, **kwargs: Any) -> SyncReport:
        started.append(time.monotonic())
        return real(self, **kwargs)

    with make_memory(workspace=ws, state_dir=tmp_path / "state", config=KEYWORD_ONLY) as mem:
        mem.sync()
    monkeypatch.setattr(Indexer, "sync", timed_sync)
    with make_memory(workspace=ws, state_dir=tmp_path / "state", config=KEYWORD_ONLY) as mem:
        last = 0.0
        end = time.monotonic() + 1.0
        while time.monotonic() < end:  # a burst of searches for a second
            mem.search("gateway port")
            last = time.monotonic()
            time.sleep(0.05)
        assert mem.wait_for_sync(10)
        assert len(started) == 1
        assert started[0] >= last  # not before the burst ended
    # Searches that never pause still get their sync, after SEARCH_QUIET_MAX_S.
    monkeypatch.setattr(freshness, "SEARCH_QUIET_MAX_S", 0.5)
    started.clear()
    with make_memory(workspace=ws, state_dir=tmp_path / "state", config=KEYWORD_ONLY) as mem:
        first = time.monotonic()
        while not started and time.monotonic() < first + 5:
            mem.search("gateway port")
            time.sleep(0.05)
        assert started and started[0] - first < 2.0


# -- a running background sync steps aside for searches ----------------------------------


def _stepping_freshness(tmp_path: Path, steps: list[float], n: int = 5) -> Any:
    """A Freshness whose sync is ``n`` steps, each after a ``yield_to_searches``."""
    from memmw.engine.freshness import Freshness, yield_to_searches

    def run_sync() -> SyncReport:
        for _ in range(n):
            yield_to_searches()
            steps.append(time.monotonic())
        return SyncReport()

    return Freshness(run_sync=run_sync, workspace=tmp_path)


def test_a_running_background_sync_makes_no_step_while_a_search_reads(tmp_path: Path) -> None:
    import memmw.engine.freshness as freshness

    steps: list[float] = []
    fresh = _stepping_freshness(tmp_path, steps)
    try:
        with fresh.searching():
            fresh.request()
            assert not fresh.wait_idle(0.4)  # waiting at its first step
            assert steps == []
            ended = time.monotonic()
        assert fresh.wait_idle(5)
        assert len(steps) == 5
        assert min(steps) >= ended + freshness.SEARCH_RESUME_S * 0.9
    finally:
        fresh.close()


def test_searches_that_never_pause_delay_a_sync_by_its_budget_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import memmw.engine.freshness as freshness

    monkeypatch.setattr(freshness, "SEARCH_YIELD_MAX_S", 0.3)
    steps: list[float] = []
    fresh = _stepping_freshness(tmp_path, steps, n=50)
    try:
        with fresh.searching():  # a search that never ends
            asked = time.monotonic()
            fresh.request()
            assert fresh.wait_idle(5)
            assert len(steps) == 50
            assert steps[0] - asked >= 0.3 * 0.9
            # The budget is per sync: the next one waits again.
            steps.clear()
            fresh.request()
            assert not fresh.wait_idle(0.1)
            assert fresh.wait_idle(5) and len(steps) == 50
    finally:
        fresh.close()


def test_closing_stops_a_sync_from_waiting_for_searches(tmp_path: Path) -> None:
    steps: list[float] = []
    fresh = _stepping_freshness(tmp_path, steps)
    with fresh.searching():
        fresh.request()
        assert not fresh.wait_idle(0.2)
        started = time.monotonic()
        fresh.close()
        assert time.monotonic() - started < 2.0
        assert len(steps) == 5  # the sync it was running finished at once


def test_a_sync_the_caller_waits_on_never_waits_for_searches(ws: Path, tmp_path: Path) -> None:
    from memmw.engine.freshness import yield_to_searches

    with make_memory(workspace=ws, state_dir=tmp_path / "state", config=KEYWORD_ONLY) as mem:
        mem.sync()
        write(ws / "memory" / "2026-01-05.md", "The badger dug a new sett.\n")
        with mem._freshness.searching():
            started = time.monotonic()
            yield_to_searches()  # not a background sync's thread: returns at once
            report = mem.sync()  # in the caller's thread: never steps aside
            assert time.monotonic() - started < 5.0
            assert report.files_added == 1


def test_a_background_sync_of_a_memory_steps_aside_while_its_search_reads(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """End to end: ``Memory.search`` marks its reads, and the indexer's walk and file loop
    step aside for them."""
    from memmw.search.retriever import AgentSearch

    reading: list[int] = []
    real_run = AgentSearch.run

    def run(self: AgentSearch, *args: Any, **kwargs: Any) -> Any:
        reading.append(mem._freshness._reading)
        return real_run(self, *args, **kwargs)

    monkeypatch.setattr(AgentSearch, "run", run)
    with make_memory(workspace=ws, state_dir=tmp_path / "state", config=KEYWORD_ONLY) as mem:
        mem.sync()
        assert mem.search("gateway port") and reading == [1]
        for i in range(3):
            write(ws / "memory" / f"2026-02-0{i + 1}.md", f"The wren {i} sang at dawn.\n")
        with mem._freshness.searching():  # a search reading on another thread
            mem.sync_in_background()
            assert not mem.wait_for_sync(0.5)
        assert mem.wait_for_sync(10)
        assert len(mem.search("wren dawn")) == 3


@contextlib.contextmanager
def _memory_with_three_new_notes(ws: Path, tmp_path: Path, line: str) -> Iterator[Memory]:
    """A synced Memory, then three notes it has not indexed (``line`` with 0, 1, 2)."""
    with make_memory(workspace=ws, state_dir=tmp_path / "state", config=KEYWORD_ONLY) as mem:
        mem.sync()
        for i in range(3):
            write(ws / "memory" / f"2026-05-0{i + 1}.md", line.format(i) + "\n")
        yield mem


def test_a_sync_stepping_aside_for_searches_keeps_no_other_writer_waiting(
    ws: Path, tmp_path: Path
) -> None:
    with _memory_with_three_new_notes(ws, tmp_path, "The finch {} left early.") as mem:
        with mem._freshness.searching():
            mem.sync_in_background()
            time.sleep(0.3)  # the sync is waiting for the search
            assert not mem.wait_for_sync(0)
            started = time.monotonic()
            with mem.store.writer_lock(timeout=2.0, what="test"):  # another writer
                assert time.monotonic() - started < 1.0
        assert mem.wait_for_sync(10)
        assert len(mem.search("finch left")) == 3


def test_a_sync_holding_the_writer_lock_never_waits_for_searches(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import memmw.engine.indexer as indexer

    real = indexer.discover_all
    # The listing without its pauses: whatever waits now is in the locked part.
    monkeypatch.setattr(indexer, "discover_all", lambda *a, **kw: real(*a))
    with _memory_with_three_new_notes(ws, tmp_path, "The heron {} fished.") as mem:
        with mem._freshness.searching():
            mem.sync_in_background()
            assert mem.wait_for_sync(2.0)  # finished while the search still reads
        assert len(mem.search("heron fished")) == 3
