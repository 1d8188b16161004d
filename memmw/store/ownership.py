"""Which thread of this process holds a store's writer lock (re-entry in it is free)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator


class WriterThread:
    """The thread holding a store's writer lock, if any.

    Both stores take their lock (a file lock, an advisory lock) once per thread: a writer
    that asks again from the same thread, as sync does around a backfill, just proceeds.
    """

    def __init__(self) -> None:
        self._owner: threading.Thread | None = None

    def mine(self) -> bool:
        """True when the calling thread holds the lock."""
        return self._owner is threading.current_thread()

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Mark the calling thread as the holder for the block (the lock is taken)."""
        self._owner = threading.current_thread()
        try:
            yield
        finally:
            self._owner = None
