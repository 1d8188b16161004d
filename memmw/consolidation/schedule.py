"""When consolidation runs besides on demand: after a ``/new`` archive, and on a schedule.

Neither ever runs inside a user's turn: the ``/new`` hook starts a background thread and
returns at once, and the scheduler is a daemon thread of a long-running host. Runs of
one workspace never overlap, in this process or across processes (the run lock of
:func:`memmw.consolidation.run.consolidate`: a busy run is skipped, not queued).
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from memmw.agent.chat import ChatModel
from memmw.consolidation.run import ConsolidationReport, consolidate
from memmw.hooks.registry import Event, HookCallback, HookContext

if TYPE_CHECKING:
    from memmw.engine.memory import Memory

log = logging.getLogger(__name__)


def run_in_background(mem: Memory, model: ChatModel, **kwargs: Any) -> threading.Thread:
    """Start one consolidation in a daemon thread and return the thread (never raises)."""

    def work() -> None:
        try:
            report = consolidate(mem, model, **kwargs)
            log.info("background consolidation: %s %s", report.status, report.gate or "")
        except Exception as exc:  # logged, never raised into a host's thread
            log.warning("background consolidation failed: %s", type(exc).__name__)
            log.debug("consolidation failure", exc_info=True)

    thread = threading.Thread(target=work, name="memmw-consolidate", daemon=True)
    thread.start()
    return thread


def consolidate_after_archive(middleware: Any, model: ChatModel) -> HookCallback:
    """Register a consolidation in the background after each ``/new`` or ``/reset`` archive.

    Args:
        middleware: A :class:`memmw.MemoryMiddleware` (its ``hooks`` and ``memory``).
        model: The agent's own model (``messages -> reply``; LangChain models through
            :func:`memmw.adapters.langchain.langchain_chat_model`).

    Returns:
        The callback (``middleware.hooks.off(Event.ARCHIVE, callback)`` removes it).
    """

    def on_archive(context: HookContext) -> None:
        if context.data.get("path") is not None:
            run_in_background(middleware.memory, model)

    middleware.hooks.on(Event.ARCHIVE, on_archive)
    return on_archive


class ConsolidationScheduler:
    """Consolidate every ``interval_hours`` in a long-running host (a daemon thread).

    Args:
        mem: The memory to consolidate.
        model: The chat model.
        interval_hours: Default ``consolidation.interval_hours`` (must be > 0).
    """

    def __init__(self, mem: Memory, model: ChatModel, *, interval_hours: float | None = None) -> None:
        hours = mem.config.consolidation.interval_hours if interval_hours is None else interval_hours
        if not hours or hours <= 0:
            raise ValueError("a consolidation schedule needs interval_hours > 0")
        self.mem = mem
        self.model = model
        self.interval_s = hours * 3600.0
        self.last: ConsolidationReport | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> ConsolidationScheduler:
        """Start the schedule (the first run after one interval)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="memmw-consolidate-schedule", daemon=True)
            self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.last = consolidate(self.mem, self.model)
            except Exception as exc:
                log.warning("scheduled consolidation failed: %s", type(exc).__name__)

    def stop(self, timeout: float | None = None) -> None:
        """Stop the schedule (a run in progress finishes)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
