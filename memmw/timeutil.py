"""The user's clock: current time and date in the configured IANA timezone.

Internal module: import its public names from ``memmw``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from zoneinfo import ZoneInfo

Clock = Callable[[], dt.datetime]


def system_clock() -> dt.datetime:
    """Now, timezone-aware (UTC)."""
    return dt.datetime.now(dt.timezone.utc)


def user_now(user_timezone: str | None, clock: Clock | None = None) -> dt.datetime:
    """The current time in ``user_timezone`` (host zone when None).

    Args:
        user_timezone: IANA zone name such as ``Europe/Paris``.
        clock: Returns "now"; naive results are taken as UTC. Default the system clock.
    """
    now = (clock or system_clock)()
    if now.tzinfo is None:
        now = now.replace(tzinfo=dt.timezone.utc)
    if user_timezone:
        return now.astimezone(ZoneInfo(user_timezone))
    return now.astimezone()
