"""Keeping the index fresh: dirty tracking, background syncs, the watcher and timers."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from memmw.config import ExtraPath, SyncConfig
from memmw.engine.watcher import MemoryWatcher, WatchBatch, WatcherState
from memmw.types import SyncReport
from memmw.workspace.transcript_source import (
    DeltaThresholds,
    SessionDeltaTracker,
    list_transcript_files,
)

log = logging.getLogger(__name__)

#: In fallback mode (no watcher), at most one on-search sync per this many seconds.
FALLBACK_MIN_INTERVAL_S = 1.0
#: A background sync starts once no search has started for this long: searches come in
#: bursts (an agent's turn), and a sync hashing notes meanwhile holds the interpreter
#: the searches need. At most SEARCH_QUIET_MAX_S of waiting, so it always runs.
SEARCH_QUIET_S = 0.3
SEARCH_QUIET_MAX_S = 3.0
#: Once running, a background sync steps aside between notes while it lists them (before
#: it takes the writer lock) as long as a search of its Memory reads, until none has read
#: for SEARCH_RESUME_S (a turn's searches come together), in all for at most
#: SEARCH_YIELD_MAX_S per sync: a stream of searches slows a sync down but never stops it.
SEARCH_RESUME_S = 0.01
SEARCH_YIELD_MAX_S = 3.0

#: The Freshness whose background syncs this thread runs (unset in every other thread).
_sync_thread = threading.local()


def yield_to_searches() -> None:
    """A point between two steps of a sync where it may wait for searches (never call it
    holding the writer lock: other writers would wait too).

    In a background sync's thread, returns once no search of that Memory has read for
    ``SEARCH_RESUME_S`` (or its sync's ``SEARCH_YIELD_MAX_S`` is spent); anywhere else (a
    sync the caller asked for and waits on), returns at once. Measured at 1.41M chunks:
    a fresh process's startup sync (49,581 notes to list) running among its 320 questions
    took their p95 from 44-55 to 67-113 ms (README, issue 25).
    """
    owner: Freshness | None = getattr(_sync_thread, "owner", None)
    if owner is not None:
        owner.pause_for_searches()


class Freshness:
    """Decides when the index is synced, and runs those syncs in one background thread.

    The index is *dirty* from construction until a sync succeeds, and again whenever the
    watcher reports a change, a transcript grows past its thresholds, a compaction is
    reported or the interval elapses. :meth:`on_search` starts a background sync when
    the index is dirty and returns at once: a search never waits for a sync and reads
    the last published index. Requests coalesce: at most one sync runs, and at most one
    more is queued behind it.

    When the watcher cannot run (no OS watches left), every search counts as a possible
    change (rate-limited to one sync per second).

    Args:
        run_sync: Performs one incremental sync (it calls :meth:`sync_started` and
            :meth:`sync_finished` itself, as ``Memory.sync`` does).
        workspace: The agent workspace (watched).
        extra_paths: Extra paths (watched).
        transcripts_dir: Transcript folder, when ``Source.TRANSCRIPTS`` is on.
        config: The ``sync`` settings.
        name: Thread name suffix.
    """

    def __init__(
        self,
        *,
        run_sync: Callable[[], SyncReport],
        workspace: Path,
        extra_paths: Iterable[ExtraPath] = (),
        transcripts_dir: Path | None = None,
        config: SyncConfig | None = None,
        name: str = "main",
    ) -> None:
        self.config = config or SyncConfig()
        self.workspace = workspace
        self.extra_paths = tuple(extra_paths)
        self.transcripts_dir = transcripts_dir
        self.name = name
        self._run_sync = run_sync
        self.tracker = SessionDeltaTracker(
            DeltaThresholds(
                delta_bytes=self.config.sessions.delta_bytes,
                delta_messages=self.config.sessions.delta_messages,
            )
        )
        self._cond = threading.Condition()
        self._dirty_seq = 1  # dirty from construction
        self._clean_seq = 0
        self._requested = False
        self._running = False
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._watcher: MemoryWatcher | None = None
        self._watch_state: WatcherState = "stopped"
        self._watch_error: str | None = None
        self._last_finished = 0.0
        self._last_search = 0.0
        self._reading = 0  # searches of this Memory reading the index right now
        self._read_ended = 0.0  # when the last of them finished (monotonic)
        self._yield_left = SEARCH_YIELD_MAX_S  # of the running background sync
        self._urgent = False  # a queued request for a known change: no waiting
        self.last_local_sync: float | None = None
        self.background_syncs = 0
        self.failures = 0
        self.last_error: str | None = None
        if self.config.interval_minutes > 0:
            self._ensure_thread()

    # -- dirty state -----------------------------------------------------------------
    @property
    def dirty(self) -> bool:
        """True when the workspace may have changed since the last successful sync."""
        with self._cond:
            return self._dirty_seq > self._clean_seq

    def mark_dirty(self) -> None:
        """Record that the index may be stale."""
        with self._cond:
            self._dirty_seq += 1

    def sync_started(self) -> int:
        """Call before a sync; pass the result to :meth:`sync_finished`."""
        with self._cond:
            return self._dirty_seq

    def sync_finished(self, mark: int, ok: bool = True) -> None:
        """Call after a sync: changes seen before ``mark`` are now indexed when ``ok``."""
        if not ok:
            return
        with self._cond:
            self._clean_seq = max(self._clean_seq, mark)
            self.last_local_sync = time.time()
        self.tracker.indexed()

    # -- triggers --------------------------------------------------------------------
    def on_search(self) -> bool:
        """A search is about to read the index: sync in the background if dirty.

        Returns:
            True when a background sync was requested (the search does not wait for it).
        """
        self._last_search = time.monotonic()
        if self.dirty:
            return self.request(after_searches=True)
        if self._watch_state in ("fallback", "failed"):
            with self._cond:
                recent = time.monotonic() - self._last_finished < FALLBACK_MIN_INTERVAL_S
                if recent or self._running:
                    return False
            self.mark_dirty()
            return self.request(after_searches=True)
        return False

    @contextlib.contextmanager
    def searching(self) -> Iterator[None]:
        """Around a search's reads: a background sync steps aside meanwhile."""
        with self._cond:
            self._reading += 1
        try:
            yield
        finally:
            with self._cond:
                self._reading -= 1
                self._read_ended = time.monotonic()

    def pause_for_searches(self) -> None:
        """Wait while searches read (``yield_to_searches``), from the sync's budget."""
        if not self._reading and time.monotonic() - self._read_ended >= SEARCH_RESUME_S:
            return  # the common case, without taking the lock
        with self._cond:
            while not self._stopping and self._yield_left > 0:
                now = time.monotonic()
                quiet = 0.0 if self._reading else now - self._read_ended
                if quiet >= SEARCH_RESUME_S:
                    return
                # Polled, not notified: a search's end wakes nothing mid-turn.
                self._cond.wait(min(SEARCH_RESUME_S - quiet, self._yield_left))
                self._yield_left -= time.monotonic() - now

    def request(self, *, after_searches: bool = False) -> bool:
        """Ask for a background sync (coalesced with a running or queued one).

        Args:
            after_searches: Nothing is known to have changed (a search found the index
                possibly stale): start once searches pause, at most
                ``SEARCH_QUIET_MAX_S`` later. A known change (the watcher, a
                transcript, an explicit request) starts at once.
        """
        with self._cond:
            if self._stopping:
                return False
            self._requested = True
            self._urgent = self._urgent or not after_searches
            self._cond.notify_all()
        self._ensure_thread()
        return True

    def notify_transcript(self, path: str | os.PathLike[str]) -> bool:
        """A transcript changed: sync once it grew past ``sync.sessions`` thresholds.

        Returns:
            True when the thresholds were crossed and a sync was requested.
        """
        if self.transcripts_dir is None:
            return False
        if self.tracker.observe(path):
            self.mark_dirty()
            return self.request()
        return False

    def notify_compaction(self) -> bool:
        """A session was compacted: sync now when ``sync.sessions.post_compaction_force``."""
        if self.transcripts_dir is None or not self.config.sessions.post_compaction_force:
            return False
        self.mark_dirty()
        return self.request()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until no background sync is running or queued; False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._requested or self._running:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._cond.wait(remaining)
        return True

    # -- worker ----------------------------------------------------------------------
    def _ensure_thread(self) -> None:
        with self._cond:
            if self._stopping or (self._thread is not None and self._thread.is_alive()):
                return
            self._thread = threading.Thread(
                target=self._loop, name=f"memmw-sync:{self.name}", daemon=True
            )
            self._thread.start()

    def _loop(self) -> None:
        _sync_thread.owner = self
        interval = self.config.interval_minutes * 60.0
        next_tick = time.monotonic() + interval if interval > 0 else None
        while True:
            with self._cond:
                while not self._stopping and not self._requested:
                    if next_tick is None:
                        self._cond.wait()
                        continue
                    remaining = next_tick - time.monotonic()
                    if remaining <= 0:
                        self._dirty_seq += 1  # the interval elapsed: look again
                        self._requested = True
                        break
                    self._cond.wait(remaining)
                if not self._urgent:
                    self._wait_for_quiet()
                if self._stopping:
                    return
                self._requested = self._urgent = False
                self._running = True
            if next_tick is not None:
                next_tick = time.monotonic() + interval
            self._yield_left = SEARCH_YIELD_MAX_S
            try:
                report = self._run_sync()
                self.background_syncs += 1
                self.last_error = None
                if report.changed:
                    log.info(
                        "background sync: %d added, %d changed, %d removed; %d chunks (%.2fs)",
                        report.files_added, report.files_changed, report.files_removed,
                        report.chunks_total, report.seconds,
                    )
            except Exception as exc:  # logged; a search must never see it
                self.failures += 1
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.warning("background sync failed: %s", type(exc).__name__)
                log.debug("background sync failure", exc_info=True)
            finally:
                with self._cond:
                    self._running = False
                    self._last_finished = time.monotonic()
                    self._cond.notify_all()

    def _wait_for_quiet(self) -> None:
        """Hold a requested sync until searches pause (called with ``_cond`` held)."""
        deadline = time.monotonic() + SEARCH_QUIET_MAX_S
        while not self._stopping and not self._urgent:
            now = time.monotonic()
            resume = min(self._last_search + SEARCH_QUIET_S, deadline)
            if now >= resume:
                return
            self._cond.wait(resume - now)

    # -- watching --------------------------------------------------------------------
    @property
    def watcher_state(self) -> WatcherState:
        """``stopped``, ``watching``, ``fallback`` or ``failed``."""
        return self._watch_state

    def start_watching(self) -> WatcherState:
        """Start the file watcher (idempotent).

        Raises:
            ConfigError: watchdog is not installed (``pip install 'memmw[watch]'``).
        """
        if self._watcher is not None and self._watcher.state == "watching":
            return "watching"
        if self.transcripts_dir is not None:
            self.transcripts_dir.mkdir(parents=True, exist_ok=True)
            self.tracker.prime(list_transcript_files(self.transcripts_dir))
        watcher = MemoryWatcher(
            self.workspace,
            self._on_batch,
            extra_paths=self.extra_paths,
            transcripts_dir=self.transcripts_dir,
            debounce_ms=self.config.watch_debounce_ms,
            on_fallback=self._on_fallback,
        )
        self._watcher = watcher
        self._watch_state = watcher.start()
        self._watch_error = watcher.error
        return self._watch_state

    def stop_watching(self) -> None:
        """Stop the file watcher (idempotent); syncs then follow the dirty flag only."""
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.stop()
        if self._watch_state == "watching":
            self._watch_state = "stopped"

    def _on_batch(self, batch: WatchBatch) -> None:
        wanted = batch.memory_changed
        # observe() every transcript: each one keeps its own counters.
        hits = [self.tracker.observe(p) for p in sorted(batch.transcript_paths)]
        if any(hits):
            wanted = True
        if wanted:
            self.mark_dirty()
            self.request()

    def _on_fallback(self, exc: OSError) -> None:
        self._watch_state = "fallback" if self._watcher is None else self._watcher.state
        self._watch_error = str(exc)
        self.mark_dirty()

    # -- reporting and shutdown -------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Status details: ``watcher`` and ``sync`` sections."""
        watcher = self._watcher
        if watcher is not None:
            watch = watcher.to_dict()
            self._watch_state = watcher.state
        else:
            watch = {"state": self._watch_state, "error": self._watch_error}
        with self._cond:
            sync = {
                "running": self._running,
                "queued": self._requested,
                "backgroundSyncs": self.background_syncs,
                "failures": self.failures,
                "lastError": self.last_error,
                "lastLocalSync": self.last_local_sync,
                "intervalMinutes": self.config.interval_minutes,
                "pendingTranscripts": len(self.tracker.pending()),
            }
        return {"watcher": watch, "sync": sync}

    def close(self, timeout: float = 30.0) -> None:
        """Stop the watcher and the worker (a running sync is allowed to finish)."""
        self.stop_watching()
        with self._cond:
            self._stopping = True
            self._requested = False
            self._cond.notify_all()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
