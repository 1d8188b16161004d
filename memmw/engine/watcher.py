"""File watcher: debounced change notifications for the memory files and transcripts."""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from memmw.config import ExtraPath, Source
from memmw.errors import ConfigError
from memmw.workspace.files import MEMORY_DIR, ROOT_FILES, is_ignored_dir, resolve_extra_path
from memmw.workspace.transcript_source import is_transcript_file

log = logging.getLogger(__name__)

WatcherState = Literal["stopped", "watching", "fallback", "failed"]

#: ``errno`` values meaning "the OS cannot give us more watches" (limit of watches or
#: of inotify instances): the watcher gives up and the caller syncs on search instead.
WATCH_EXHAUSTED_ERRNOS = frozenset({errno.ENOSPC, errno.EMFILE})

_INSTALL_HINT = "file watching needs watchdog: pip install 'memmw[watch]'"


@dataclass(frozen=True, kw_only=True)
class WatchTarget:
    """One directory handed to the OS watcher.

    Attributes:
        path: Absolute directory.
        recursive: Watch the whole tree (``memory/``, extra directories) or only the
            directory itself (the workspace root, the parent of an extra file).
        kind: :attr:`Source.MEMORY` (Markdown files) or :attr:`Source.TRANSCRIPTS` (JSONL
            transcripts).
        names: When set, only these file names directly inside ``path`` matter.
    """

    path: Path
    recursive: bool
    kind: Source = Source.MEMORY
    names: frozenset[str] | None = None


@dataclass(frozen=True, kw_only=True)
class WatchBatch:
    """What changed during one debounce window.

    Attributes:
        memory_paths: Absolute paths of Markdown files created, changed, moved or deleted.
        transcript_paths: Absolute paths of transcript files that changed.
        rescan: A directory appeared, moved or vanished (a full discovery is needed:
            files moved in with it may not have produced events of their own).
        events: Number of relevant raw events folded into this batch.
    """

    memory_paths: frozenset[str] = frozenset()
    transcript_paths: frozenset[str] = frozenset()
    rescan: bool = False
    events: int = 0

    @property
    def memory_changed(self) -> bool:
        """True when the Markdown side needs a sync."""
        return self.rescan or bool(self.memory_paths)


def watch_targets(
    workspace: Path,
    extra_paths: Iterable[ExtraPath] = (),
    transcripts_dir: Path | None = None,
) -> list[WatchTarget]:
    """The directories to watch for a workspace.

    The workspace root non-recursively (for ``MEMORY.md``, ``USER.md`` and the creation
    of ``memory/``), ``memory/`` recursively, extra directories recursively, the folder
    of each extra file non-recursively, and the sessions folder when given. Missing
    paths and symlinks are left out (a later rescan picks them up).
    """
    workspace = Path(os.path.abspath(workspace))
    targets: list[WatchTarget] = [
        WatchTarget(
            path=workspace, recursive=False, names=frozenset((*ROOT_FILES, MEMORY_DIR))
        )
    ]
    memory_dir = workspace / MEMORY_DIR
    if memory_dir.is_dir() and not memory_dir.is_symlink():
        targets.append(WatchTarget(path=memory_dir, recursive=True))
    for entry in extra_paths:
        target = Path(os.path.abspath(resolve_extra_path(entry, workspace)))
        if target.is_symlink():
            continue
        if target.is_dir():
            targets.append(WatchTarget(path=target, recursive=True))
        elif target.is_file() and target.suffix.lower() == ".md":
            targets.append(
                WatchTarget(path=target.parent, recursive=False, names=frozenset({target.name}))
            )
    if transcripts_dir is not None and transcripts_dir.is_dir():
        targets.append(
            WatchTarget(path=Path(os.path.abspath(transcripts_dir)), recursive=False, kind=Source.TRANSCRIPTS)
        )
    return _merge_targets(targets)


def _merge_targets(targets: Sequence[WatchTarget]) -> list[WatchTarget]:
    """Drop targets covered by a recursive one of the same kind; merge name filters."""
    out: list[WatchTarget] = []
    for t in targets:
        covered = any(
            o.recursive and o.kind == t.kind and o is not t and _is_within(t.path, o.path)
            and (o.path != t.path or not t.recursive)
            for o in targets
        )
        if covered:
            continue
        same = next(
            (i for i, o in enumerate(out)
             if o.path == t.path and o.kind == t.kind and o.recursive == t.recursive),
            None,
        )
        if same is None:
            out.append(t)
            continue
        prev = out[same]
        names = None if prev.names is None or t.names is None else prev.names | t.names
        out[same] = WatchTarget(path=t.path, recursive=t.recursive, kind=t.kind, names=names)
    return out


def _is_within(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
    except ValueError:
        return False
    return True


def classify(path: str, target: WatchTarget, *, is_directory: bool) -> str | None:
    """How an event path matters for ``target``.

    Returns:
        :attr:`Source.MEMORY` for a Markdown file, :attr:`Source.TRANSCRIPTS` for a
        transcript, ``"rescan"`` for
        a relevant directory, or None when the event is to be ignored (other files,
        ignored tool folders, paths outside the target).
    """
    p = Path(path)
    try:
        rel = p.relative_to(target.path)
    except ValueError:
        return None
    parts = rel.parts
    if not parts:
        # The watched directory itself (deleted or moved away): look again.
        return "rescan" if is_directory else None
    if any(is_ignored_dir(part) for part in parts[:-1]):
        return None
    if not target.recursive and len(parts) > 1:
        return None
    name = parts[-1]
    if target.names is not None and name not in target.names:
        return None
    if target.kind == Source.TRANSCRIPTS:
        return None if is_directory else (Source.TRANSCRIPTS if is_transcript_file(name) else None)
    if is_directory:
        return None if is_ignored_dir(name) else "rescan"
    return Source.MEMORY if name.lower().endswith(".md") else None


def _load_watchdog() -> tuple[Any, Any]:
    """Import watchdog lazily: ``(Observer class, FileSystemEventHandler class)``."""
    try:
        from watchdog.events import FileSystemEventHandler
        from watchdog.observers import Observer
    except ImportError as exc:
        raise ConfigError(_INSTALL_HINT) from exc
    # watchdog's inotify emitter warns (in its own thread) when nested folders appear at
    # once and it registers one twice; it then replaces the duplicate, so nothing is
    # lost. Under ``-W error`` that warning would kill the observer thread.
    warnings.filterwarnings(
        "ignore", message="Callback with id .* already exists", category=RuntimeWarning
    )
    return Observer, FileSystemEventHandler


class MemoryWatcher:
    """Watches the memory files (and optionally transcripts) and reports debounced batches.

    Events are filtered (Markdown files, transcripts, non-ignored directories), folded
    into one :class:`WatchBatch`, and ``callback`` is called from the watcher's own
    thread once no event arrived for ``debounce_ms`` (or ``max_wait_ms`` after the first
    event of a burst, so a file written without pause is still picked up). Calls never
    overlap: events arriving during a callback form the next batch.

    When the OS runs out of watches (``ENOSPC``/``EMFILE``), one warning is logged, all
    watches are dropped and :attr:`state` becomes ``"fallback"``: the caller should
    sync on search instead. Any other failure to start gives ``"failed"``.

    Example:
        >>> w = MemoryWatcher(Path("ws"), lambda batch: None)  # doctest: +SKIP
        >>> w.start()  # doctest: +SKIP
        'watching'

    Args:
        workspace: The agent workspace.
        callback: Receives each :class:`WatchBatch`; exceptions are logged and swallowed.
        extra_paths: Configured extra paths (watched too).
        transcripts_dir: Transcript folder to watch, if the sessions source is on.
        debounce_ms: Quiet time before a batch is delivered.
        max_wait_ms: Longest delay of a batch under a continuous stream of events
            (default four times ``debounce_ms``).
        on_fallback: Called once (with the error) when watching falls back.
    """

    def __init__(
        self,
        workspace: str | os.PathLike[str],
        callback: Callable[[WatchBatch], None],
        *,
        extra_paths: Iterable[ExtraPath] = (),
        transcripts_dir: str | os.PathLike[str] | None = None,
        debounce_ms: int = 1500,
        max_wait_ms: int | None = None,
        on_fallback: Callable[[OSError], None] | None = None,
    ) -> None:
        if debounce_ms < 0:
            raise ConfigError(f"debounce_ms must be >= 0; got {debounce_ms}")
        self.workspace = Path(os.path.abspath(workspace))
        self.extra_paths = tuple(extra_paths)
        self.transcripts_dir = Path(os.path.abspath(transcripts_dir)) if transcripts_dir else None
        self.debounce_s = debounce_ms / 1000.0
        self.max_wait_s = (
            max(self.debounce_s, max_wait_ms / 1000.0) if max_wait_ms is not None
            else max(4 * self.debounce_s, 0.5)
        )
        self._callback = callback
        self._on_fallback = on_fallback
        self._state: WatcherState = "stopped"
        self._error: str | None = None
        self._observer: Any = None
        self._targets: list[WatchTarget] = []
        self._cond = threading.Condition()
        self._memory: set[str] = set()
        self._transcripts: set[str] = set()
        self._rescan = False
        self._replan = False
        self._events = 0
        self._first_at: float | None = None
        self._last_at = 0.0
        self._stopping = False
        self._run_id = 0
        self._worker: threading.Thread | None = None
        self._start_stop = threading.RLock()
        self.batches = 0
        self.events_seen = 0

    # -- public ----------------------------------------------------------------------
    @property
    def state(self) -> WatcherState:
        """``stopped``, ``watching``, ``fallback`` (watches exhausted) or ``failed``."""
        return self._state

    @property
    def error(self) -> str | None:
        """Why watching stopped, for ``fallback`` and ``failed``."""
        return self._error

    @property
    def targets(self) -> list[WatchTarget]:
        """The directories currently watched."""
        return list(self._targets)

    @property
    def pending(self) -> bool:
        """True when events are waiting for their debounce window to close."""
        with self._cond:
            return self._first_at is not None

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``status``."""
        return {
            "state": self._state,
            "error": self._error,
            "debounceMs": int(self.debounce_s * 1000),
            "targets": [str(t.path) for t in self._targets],
            "batches": self.batches,
            "events": self.events_seen,
            "pending": self.pending,
        }

    def start(self) -> WatcherState:
        """Start watching (idempotent). Returns the resulting :attr:`state`.

        Raises:
            ConfigError: watchdog is not installed (``pip install 'memmw[watch]'``).
        """
        with self._start_stop:
            if self._state in ("watching", "fallback"):
                return self._state
            observer_cls, _ = _load_watchdog()
            self._stopping = False
            self._error = None
            try:
                observer = observer_cls()
                observer.start()
            except OSError as exc:
                return self._give_up(exc, None)
            self._observer = observer
            state = self._schedule_all()
            if state != "watching":
                return state
            self._worker = threading.Thread(
                target=self._run, args=(self._run_id,),
                name=f"memmw-watch:{self.workspace.name}", daemon=True,
            )
            self._worker.start()
            log.debug("watching %d folder(s) under %s", len(self._targets), self.workspace)
            return self._state

    def stop(self, timeout: float = 10.0) -> None:
        """Stop watching and the debounce thread (idempotent). Pending events are dropped."""
        with self._start_stop:
            with self._cond:
                self._stopping = True
                self._run_id += 1  # a worker of an earlier start() exits on its own
                self._cond.notify_all()
            self._stop_observer()
            worker, self._worker = self._worker, None
            if self._state == "watching":
                self._state = "stopped"
        # Joined outside the lock: the worker may be waiting for it to re-plan watches.
        if worker is not None and worker is not threading.current_thread():
            worker.join(timeout)
        with self._cond:
            self._reset_pending()

    def __enter__(self) -> MemoryWatcher:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def flush(self) -> None:
        """Deliver pending events now instead of at the end of the debounce window."""
        with self._cond:
            if self._first_at is not None:
                self._first_at = self._last_at = float("-inf")
                self._cond.notify_all()

    # -- event intake (watchdog's dispatch thread) -------------------------------------
    def _on_event(self, event: Any) -> None:
        paths = [event.src_path]
        dest = getattr(event, "dest_path", "")
        if dest:
            paths.append(dest)
        is_dir = bool(event.is_directory)
        kind_of_event = str(getattr(event, "event_type", ""))
        if kind_of_event in ("opened", "closed_no_write") or (
            is_dir and kind_of_event == "modified"
        ):
            return  # reads and directory mtime bumps change nothing
        found: list[tuple[str, str]] = []
        for raw in paths:
            path = os.fsdecode(raw)
            for target in self._targets:
                kind = classify(path, target, is_directory=is_dir)
                if kind is not None:
                    found.append((kind, path))
                    if kind == "rescan" and target.path == self.workspace:
                        self._replan = True  # memory/ itself appeared or went away
                    if kind == "rescan" and Path(path) in {t.path for t in self._targets}:
                        self._replan = True
                    break
        if not found:
            return
        now = time.monotonic()
        with self._cond:
            for kind, path in found:
                if kind == Source.MEMORY:
                    self._memory.add(path)
                elif kind == Source.TRANSCRIPTS:
                    self._transcripts.add(path)
                else:
                    self._rescan = True
            self._events += 1
            self.events_seen += 1
            if self._first_at is None:
                self._first_at = now
            self._last_at = now
            self._cond.notify_all()

    # -- debounce thread -------------------------------------------------------------
    def _run(self, run_id: int) -> None:
        while True:
            with self._cond:
                while not self._stopping and run_id == self._run_id:
                    if self._first_at is None:
                        self._cond.wait()
                        continue
                    due = min(self._last_at + self.debounce_s, self._first_at + self.max_wait_s)
                    delay = due - time.monotonic()
                    if delay <= 0:
                        break
                    self._cond.wait(delay)
                if self._stopping or run_id != self._run_id:
                    return
                batch = WatchBatch(
                    memory_paths=frozenset(self._memory),
                    transcript_paths=frozenset(self._transcripts),
                    rescan=self._rescan,
                    events=self._events,
                )
                replan = self._replan
                self._reset_pending()
            if replan:
                self._replan_watches()
            if self._stopping or run_id != self._run_id:
                return
            self.batches += 1
            try:
                self._callback(batch)
            except Exception:
                log.warning("memory watcher callback failed", exc_info=True)

    def _reset_pending(self) -> None:
        self._memory, self._transcripts = set(), set()
        self._rescan = self._replan = False
        self._events = 0
        self._first_at = None

    # -- watches ---------------------------------------------------------------------
    def _schedule_all(self) -> WatcherState:
        """Schedule every target on the running observer; handle watch exhaustion."""
        _, handler_cls = _load_watchdog()
        watcher = self

        class _Handler(handler_cls):  # type: ignore[misc, valid-type]
            def on_any_event(self, event: Any) -> None:
                watcher._on_event(event)

        handler = _Handler()
        self._targets = watch_targets(self.workspace, self.extra_paths, self.transcripts_dir)
        for target in self._targets:
            try:
                self._observer.schedule(handler, str(target.path), recursive=target.recursive)
            except OSError as exc:
                if exc.errno in WATCH_EXHAUSTED_ERRNOS:
                    return self._give_up(exc, target)
                if not target.path.exists():
                    continue  # vanished between planning and scheduling: the rescan sees it
                return self._give_up(exc, target)
        self._state = "watching"
        return self._state

    def _replan_watches(self) -> None:
        """Re-plan the watches after a top-level watched folder appeared or vanished."""
        with self._start_stop:
            if self._state != "watching" or self._observer is None:
                return
            wanted = watch_targets(self.workspace, self.extra_paths, self.transcripts_dir)
            if wanted == self._targets:
                return
            log.debug("re-planning watches under %s", self.workspace)
            try:
                self._observer.unschedule_all()
            except Exception:  # a dead emitter must not stop the re-plan
                log.debug("unschedule_all failed", exc_info=True)
            self._schedule_all()

    def _give_up(self, exc: OSError, target: WatchTarget | None) -> WatcherState:
        where = f" on {target.path}" if target is not None else ""
        self._error = f"{exc.strerror or exc}{where}"
        self._stop_observer()
        self._targets = []
        if exc.errno in WATCH_EXHAUSTED_ERRNOS:
            self._state = "fallback"
            log.warning(
                "the OS ran out of file watches (%s); memory watching is off and the index "
                "is synced on search instead (raise fs.inotify.max_user_watches to watch)",
                self._error,
            )
        else:
            self._state = "failed"
            log.warning("memory watching failed (%s); the index is synced on search", self._error)
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._on_fallback is not None:
            try:
                self._on_fallback(exc)
            except Exception:
                log.warning("watcher fallback callback failed", exc_info=True)
        return self._state

    def _stop_observer(self) -> None:
        observer, self._observer = self._observer, None
        if observer is None:
            return
        try:
            observer.stop()
            if observer is not threading.current_thread():
                observer.join(10.0)
        except RuntimeError:  # never started
            pass
