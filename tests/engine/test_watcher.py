"""The file watcher: targets, event filtering, debouncing, rescans and watch exhaustion."""

from __future__ import annotations

import builtins
import errno
import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memmw.config import ExtraPath
from memmw.engine.watcher import MemoryWatcher, WatchBatch, WatchTarget, classify, watch_targets
from memmw.errors import ConfigError
from memmw.testing import require_optional


def write(path: Path, text: str = "x\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


class Recorder:
    """Collects batches and lets a test wait for them."""

    def __init__(self) -> None:
        self.batches: list[WatchBatch] = []
        self.times: list[float] = []
        self._cond = threading.Condition()

    def __call__(self, batch: WatchBatch) -> None:
        with self._cond:
            self.batches.append(batch)
            self.times.append(time.monotonic())
            self._cond.notify_all()

    def wait_for(self, pred: Callable[[list[WatchBatch]], bool], timeout: float = 5.0) -> bool:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not pred(self.batches):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
        return True

    def memory_paths(self) -> set[str]:
        return {p for b in self.batches for p in b.memory_paths}


@pytest.fixture()
def watchdog_installed() -> None:
    require_optional("watchdog", "watch")


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    write(root / "MEMORY.md", "- fact\n")
    write(root / "memory" / "2026-01-01.md", "day one\n")
    return root


@pytest.fixture()
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture()
def watcher(
    ws: Path, recorder: Recorder, watchdog_installed: None
) -> Iterator[MemoryWatcher]:
    w = MemoryWatcher(ws, recorder, debounce_ms=200)
    assert w.start() == "watching"
    yield w
    w.stop()


# -- pure planning and filtering ---------------------------------------------------------


def test_targets_cover_root_memory_extra_paths_and_sessions(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write(ws / "MEMORY.md")
    (ws / "memory").mkdir()
    notes = tmp_path / "notes"
    write(notes / "a.md")
    single = write(tmp_path / "single" / "one.md")
    sessions = tmp_path / "state" / "sessions"
    sessions.mkdir(parents=True)
    targets = watch_targets(
        ws,
        [ExtraPath(path=str(notes)), ExtraPath(path=str(single)),
         ExtraPath(path=str(tmp_path / "missing"))],
        sessions,
    )
    by_path = {t.path: t for t in targets}
    assert by_path[ws].recursive is False and "MEMORY.md" in (by_path[ws].names or ())
    assert by_path[ws / "memory"].recursive is True
    assert by_path[notes].recursive is True
    assert by_path[single.parent].names == frozenset({"one.md"})
    assert by_path[sessions].kind == "sessions"
    assert tmp_path / "missing" not in by_path


def test_extra_path_inside_memory_is_not_watched_twice(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write(ws / "memory" / "sub" / "a.md")
    targets = watch_targets(ws, [ExtraPath(path="memory/sub")])
    assert [t.path for t in targets] == [ws, ws / "memory"]


def test_classify_filters_markdown_ignored_dirs_and_names(tmp_path: Path) -> None:
    mem = WatchTarget(path=tmp_path / "memory", recursive=True)
    root = WatchTarget(path=tmp_path, recursive=False, names=frozenset({"MEMORY.md", "memory"}))
    sess = WatchTarget(path=tmp_path / "s", recursive=False, kind="sessions")
    m = str(tmp_path / "memory")
    assert classify(f"{m}/2026-01-01.md", mem, is_directory=False) == "memory"
    assert classify(f"{m}/deep/x/Note.MD", mem, is_directory=False) == "memory"
    assert classify(f"{m}/notes.txt", mem, is_directory=False) is None
    assert classify(f"{m}/.git/x.md", mem, is_directory=False) is None
    assert classify(f"{m}/node_modules/pkg/readme.md", mem, is_directory=False) is None
    assert classify(f"{m}/new-folder", mem, is_directory=True) == "rescan"
    assert classify(f"{m}/__pycache__", mem, is_directory=True) is None
    assert classify(f"{tmp_path}/MEMORY.md", root, is_directory=False) == "memory"
    assert classify(f"{tmp_path}/README.md", root, is_directory=False) is None
    assert classify(f"{tmp_path}/memory", root, is_directory=True) == "rescan"
    assert classify(f"{tmp_path}/other/MEMORY.md", root, is_directory=False) is None
    assert classify(f"{tmp_path}/s/abc.jsonl", sess, is_directory=False) == "sessions"
    assert classify(f"{tmp_path}/s/sessions.json", sess, is_directory=False) is None
    assert classify(f"{tmp_path}/elsewhere/a.md", mem, is_directory=False) is None


def test_missing_watchdog_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_import = builtins.__import__

    def no_watchdog(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("watchdog"):
            raise ImportError("No module named 'watchdog'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_watchdog)
    w = MemoryWatcher(tmp_path, lambda b: None)
    with pytest.raises(ConfigError, match=r"pip install 'memmw\[watch\]'"):
        w.start()
    assert w.state == "stopped"


def test_negative_debounce_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="debounce_ms"):
        MemoryWatcher(tmp_path, lambda b: None, debounce_ms=-1)


# -- live watching (watchdog) ------------------------------------------------------------


@pytest.mark.optional
def test_a_burst_of_writes_is_one_batch(
    ws: Path, watcher: MemoryWatcher, recorder: Recorder
) -> None:
    target = ws / "memory" / "2026-01-01.md"
    for i in range(20):
        with target.open("a", encoding="utf-8") as fh:
            fh.write(f"line {i}\n")
        time.sleep(0.005)
    assert recorder.wait_for(lambda b: len(b) >= 1)
    time.sleep(0.5)  # nothing else is pending
    assert len(recorder.batches) == 1
    assert recorder.batches[0].memory_paths == {str(target)}
    assert recorder.batches[0].events >= 20


@pytest.mark.optional
def test_debounce_waits_for_quiet(ws: Path, recorder: Recorder, watchdog_installed: None) -> None:
    w = MemoryWatcher(ws, recorder, debounce_ms=400)
    w.start()
    try:
        start = time.monotonic()
        write(ws / "USER.md", "- prefers tea\n")
        assert recorder.wait_for(lambda b: len(b) >= 1)
        assert recorder.times[0] - start >= 0.39
    finally:
        w.stop()


@pytest.mark.optional
def test_continuous_writes_still_deliver_within_max_wait(
    ws: Path, recorder: Recorder, watchdog_installed: None
) -> None:
    w = MemoryWatcher(ws, recorder, debounce_ms=300, max_wait_ms=600)
    w.start()
    try:
        target = ws / "memory" / "stream.md"
        end = time.monotonic() + 1.6
        i = 0
        while time.monotonic() < end:
            write(target, f"tick {i}\n")
            i += 1
            time.sleep(0.05)
        # Delivered during the stream (max wait), not only after it went quiet.
        assert recorder.wait_for(lambda b: len(b) >= 2, timeout=3)
        assert len(recorder.batches) <= 5
    finally:
        w.stop()


@pytest.mark.optional
def test_ignored_folders_and_other_files_do_not_trigger(
    ws: Path, watcher: MemoryWatcher, recorder: Recorder
) -> None:
    write(ws / "memory" / ".git" / "HEAD.md")
    write(ws / "memory" / "node_modules" / "x" / "README.md")
    write(ws / "memory" / "notes.txt")
    write(ws / "README.md")
    write(ws / "src" / "app.md")
    time.sleep(0.8)
    assert recorder.memory_paths() == set()


@pytest.mark.optional
def test_new_directory_triggers_a_rescan_and_is_watched(
    ws: Path, watcher: MemoryWatcher, recorder: Recorder
) -> None:
    new_dir = ws / "memory" / "projects"
    new_dir.mkdir()
    write(new_dir / "alpha.md")
    assert recorder.wait_for(lambda b: any(x.rescan for x in b))
    recorder.batches.clear()
    write(new_dir / "beta.md")
    assert recorder.wait_for(lambda b: str(new_dir / "beta.md") in {
        p for x in b for p in x.memory_paths
    })


@pytest.mark.optional
def test_memory_folder_created_later_gets_watched(
    tmp_path: Path, recorder: Recorder, watchdog_installed: None
) -> None:
    ws = tmp_path / "bare"
    ws.mkdir()
    w = MemoryWatcher(ws, recorder, debounce_ms=150)
    w.start()
    try:
        assert [t.path for t in w.targets] == [ws]
        write(ws / "memory" / "2026-02-02.md")
        assert recorder.wait_for(lambda b: any(x.rescan for x in b))
        assert ws / "memory" in [t.path for t in w.targets]
        recorder.batches.clear()
        write(ws / "memory" / "sub" / "later.md")
        assert recorder.wait_for(lambda b: any(x.memory_changed for x in b))
    finally:
        w.stop()


@pytest.mark.optional
def test_file_moved_in_and_deleted_are_reported(
    ws: Path, watcher: MemoryWatcher, recorder: Recorder, tmp_path: Path
) -> None:
    outside = write(tmp_path / "draft.md")
    outside.rename(ws / "memory" / "moved.md")
    (ws / "memory" / "2026-01-01.md").unlink()
    assert recorder.wait_for(
        lambda b: {str(ws / "memory" / "moved.md"), str(ws / "memory" / "2026-01-01.md")}
        <= {p for x in b for p in x.memory_paths}
    )


@pytest.mark.optional
def test_start_and_stop_are_idempotent(ws: Path, recorder: Recorder, watchdog_installed: None) -> None:
    w = MemoryWatcher(ws, recorder, debounce_ms=100)
    assert w.start() == "watching"
    assert w.start() == "watching"
    w.stop()
    w.stop()
    assert w.state == "stopped"
    write(ws / "MEMORY.md", "- after stop\n")
    time.sleep(0.4)
    assert recorder.batches == []
    assert w.start() == "watching"  # restartable
    write(ws / "MEMORY.md", "- after restart\n")
    assert recorder.wait_for(lambda b: len(b) >= 1)
    w.stop()


@pytest.mark.optional
def test_callback_errors_do_not_kill_the_watcher(
    ws: Path, watchdog_installed: None, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[WatchBatch] = []

    def flaky(batch: WatchBatch) -> None:
        calls.append(batch)
        if len(calls) == 1:
            raise RuntimeError("boom")

    w = MemoryWatcher(ws, flaky, debounce_ms=100)
    w.start()
    try:
        with caplog.at_level(logging.WARNING, logger="memmw.engine.watcher"):
            write(ws / "MEMORY.md", "- one\n")
            deadline = time.monotonic() + 5
            while not calls and time.monotonic() < deadline:
                time.sleep(0.02)
            time.sleep(0.3)
            write(ws / "MEMORY.md", "- two\n")
            while len(calls) < 2 and time.monotonic() < deadline:
                time.sleep(0.02)
        assert len(calls) == 2
        assert "callback failed" in caplog.text
    finally:
        w.stop()


@pytest.mark.optional
@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EMFILE])
def test_watch_exhaustion_warns_once_and_falls_back(
    ws: Path,
    recorder: Recorder,
    watchdog_installed: None,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    code: int,
) -> None:
    from watchdog.observers.api import BaseObserver

    def exhausted(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise OSError(code, "inotify watch limit reached")

    monkeypatch.setattr(BaseObserver, "schedule", exhausted)
    fallbacks: list[OSError] = []
    w = MemoryWatcher(ws, recorder, debounce_ms=100, on_fallback=fallbacks.append)
    with caplog.at_level(logging.WARNING, logger="memmw.engine.watcher"):
        assert w.start() == "fallback"
        assert w.start() == "fallback"  # idempotent: no second warning
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "ran out of file watches" in warnings[0].getMessage()
    assert len(fallbacks) == 1 and fallbacks[0].errno == code
    assert w.error and "limit" in w.error
    assert w.targets == []
    # No thread of ours is left running.
    assert not [t for t in threading.enumerate() if t.name.startswith("memmw-watch")]
    w.stop()
    assert w.state == "fallback"


@pytest.mark.optional
def test_other_os_errors_mark_the_watcher_failed(
    ws: Path, recorder: Recorder, watchdog_installed: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from watchdog.observers.api import BaseObserver

    def denied(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(BaseObserver, "schedule", denied)
    w = MemoryWatcher(ws, recorder)
    assert w.start() == "failed"
    w.stop()
