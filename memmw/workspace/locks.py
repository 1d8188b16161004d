"""Advisory inter-process locks (flock on POSIX, msvcrt on Windows)."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

try:  # POSIX
    import fcntl

    _HAVE_FCNTL = True
except ImportError:  # pragma: no cover - Windows
    _HAVE_FCNTL = False

_process_locks: dict[str, threading.Lock] = {}
_process_locks_guard = threading.Lock()


def _thread_lock(key: str) -> threading.Lock:
    with _process_locks_guard:
        return _process_locks.setdefault(key, threading.Lock())


@contextlib.contextmanager
def exclusive_lock(path: str | os.PathLike[str], *, timeout: float | None = None) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (a lock file or a directory) for the block.

    The lock is shared by threads of this process and by other processes. With a
    ``timeout`` (seconds) a ``TimeoutError`` is raised when the lock is not acquired.

    Args:
        path: A regular file (created if missing) or an existing directory to lock.
        timeout: None waits forever; 0 tries once.
    """
    key = os.path.abspath(os.fspath(path))
    tlock = _thread_lock(key)
    if not tlock.acquire(timeout=-1 if timeout is None else timeout):
        raise TimeoutError(f"lock busy: {key}")
    try:
        if not _HAVE_FCNTL:  # pragma: no cover - Windows: the thread lock is what we have
            yield
            return
        is_dir = os.path.isdir(key)
        fd = os.open(key, os.O_RDONLY if is_dir else os.O_RDWR | os.O_CREAT, 0o644)
        try:
            deadline = None if timeout is None else time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | (0 if deadline is None else fcntl.LOCK_NB))
                    break
                except BlockingIOError:
                    if deadline is not None and time.monotonic() >= deadline:
                        raise TimeoutError(f"lock busy: {key}") from None
                    time.sleep(0.02)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
    finally:
        tlock.release()


@contextlib.contextmanager
def locked_fd(fd: int, *, timeout: float, what: str = "file") -> Iterator[None]:
    """Hold an exclusive ``flock`` on an already open descriptor for the block.

    ``flock`` locks belong to the open file description, so two descriptors of one file
    exclude each other even inside one process: this serialises memmw's own threads and
    processes without a sidecar lock file. Programs that do not lock (editors, ``>>``)
    are not excluded; ``O_APPEND`` keeps their writes and ours whole.

    Raises:
        TimeoutError: the lock was not acquired within ``timeout`` seconds.
    """
    if not _HAVE_FCNTL:  # pragma: no cover - Windows: O_APPEND is what we have
        yield
        return
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise TimeoutError(f"lock busy: {what}") from None
            time.sleep(0.005)
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


def lock_path_for(path: Path) -> Path:
    """The sidecar lock file used for ``path`` (``<path>.lock``)."""
    return path.with_name(path.name + ".lock")
