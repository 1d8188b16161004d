"""User callbacks for middleware lifecycle events."""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)


class Event(str, enum.Enum):
    """Lifecycle events the middleware emits."""

    SESSION_START = "session_start"
    BEFORE_MODEL = "before_model"
    AFTER_MODEL = "after_model"
    COMMAND = "command"
    AUTO_RESET = "auto_reset"
    COMPACTION = "compaction"
    FLUSH = "flush"
    ARCHIVE = "archive"
    SESSION_END = "session_end"


@dataclass
class HookContext:
    """What a callback receives.

    Attributes:
        event: The event.
        session_id: Current session id.
        session_key: Current session key.
        data: Event details (``command``, ``reason``, ``decision``, ``path``, ``messages``...).
    """

    event: Event
    session_id: str
    session_key: str
    data: dict[str, Any] = field(default_factory=dict)


HookCallback = Callable[[HookContext], None]


class HookRegistry:
    """Callbacks per event, called in registration order.

    A failing callback is logged and skipped; it never breaks the agent turn.

    Example:
        >>> seen = []
        >>> hooks = HookRegistry()
        >>> _ = hooks.on("compaction", lambda ctx: seen.append(ctx.event.value))
        >>> hooks.emit(HookContext(Event.COMPACTION, "s1", "main"))
        >>> seen
        ['compaction']
    """

    def __init__(self) -> None:
        self._callbacks: dict[Event, list[HookCallback]] = {}

    def on(self, event: Event | str, callback: HookCallback) -> HookCallback:
        """Register ``callback`` for ``event`` and return it (usable as a decorator helper).

        Raises:
            ValueError: for an unknown event name.
        """
        key = Event(event)
        self._callbacks.setdefault(key, []).append(callback)
        return callback

    def off(self, event: Event | str, callback: HookCallback) -> None:
        """Unregister ``callback`` (no error if it was not registered)."""
        callbacks = self._callbacks.get(Event(event), [])
        if callback in callbacks:
            callbacks.remove(callback)

    def emit(self, context: HookContext) -> None:
        """Call the callbacks of ``context.event``."""
        for callback in list(self._callbacks.get(context.event, ())):
            try:
                callback(context)
            except Exception as exc:
                log.warning(
                    "memmw hook %r for %s failed: %s",
                    getattr(callback, "__name__", callback),
                    context.event.value,
                    type(exc).__name__,
                )
                log.debug("hook failure", exc_info=True)
