"""``memmw stats``: the telemetry summary (latency, hit and injection rates)."""

from __future__ import annotations

import datetime as dt
import math
import re
import time
from typing import Any

import click

from memmw.cli.common import EXIT_OK, camelize, command, emit_json, iso, out, settings, with_memory
from memmw.engine.memory import Memory

HELP = """Summarise the telemetry log: how fast searches, fact searches and injections were,
how often they found something, and how often memory was injected before a model call.

Events are appended by the library as agents use memory (active_memory.telemetry, on by
default) to <state folder>/telemetry/<agent>.jsonl; this command only reads that log.

\b
Examples:
  memmw stats
  memmw stats --since 24h          # the last day (units: s, m, h, d, w)
  memmw stats --since 2026-05-01   # since a date or ISO time (UTC unless it says)
  memmw stats --json
  memmw stats --principal telegram-7   # one principal's sessions ('owner': the owner's)

Exit codes: 0 ok (also with an empty log), 1 error, 2 bad usage.
"""

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$", re.IGNORECASE)
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
#: 9999-12-31T23:59:59Z: later ISO times (a far timezone offset) still print as ISO.
_LATEST = 253402300799.0


def parse_since(value: str, now: float | None = None) -> float:
    """``24h`` / ``7d`` / an ISO date or time -> epoch seconds (clamped to 1970..9999).

    Raises:
        click.BadParameter: neither a duration nor an ISO date/time.
    """
    m = _DURATION.match(value)
    if m:
        start = (time.time() if now is None else now) - float(m.group(1)) * _UNITS[
            m.group(2).lower()
        ]
        # "since 10000 years ago" means everything: the log holds nothing before 1970.
        return max(start, 0.0) if math.isfinite(start) else 0.0
    try:
        stamp = dt.datetime.fromisoformat(value.strip())
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is neither a duration (30m, 24h, 7d) nor an ISO date/time",
            param_hint="--since",
        ) from None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=dt.timezone.utc)
    return min(max(stamp.timestamp(), 0.0), _LATEST)


def _fmt(value: Any, suffix: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and suffix == "%":
        return f"{value * 100:.0f}%"
    if isinstance(value, float):
        return f"{value:.1f}{suffix}"
    return f"{value}{suffix}"


@command(name="stats", help=HELP, short_help="Summarise memory telemetry (latency, hit rates).")
@click.option(
    "--since", metavar="DURATION|ISO",
    help="Only events since then: a duration back from now (24h, 7d) or an ISO date/time.",
)
@click.option(
    "--principal", metavar="ID",
    help="Only that principal's sessions (injection events); 'owner' for the owner's.",
)
@with_memory(one_shot=True)
def stats(mem: Memory, since: str | None, principal: str | None) -> int:
    """Read the telemetry log and print the summary."""
    start = parse_since(since) if since else None
    if principal is None:
        summary = mem.stats(since=start)
    else:
        from memmw.chat_type import check_principal_id
        from memmw.errors import ConfigError
        from memmw.graph.telemetry import summarize_telemetry

        try:
            principal = check_principal_id(principal)
        except ConfigError as exc:
            raise click.BadParameter(str(exc), param_hint="--principal") from None
        summary = summarize_telemetry(
            mem.graph_engine.telemetry.path, since=start, principal=principal
        )
    data: dict[str, Any] = camelize(summary)
    data["since"] = iso(start)
    data["enabled"] = mem.config.active_memory.telemetry
    if principal is not None:
        data["principal"] = principal
    if settings().json:
        emit_json(data)
        return EXIT_OK
    out(f"Log      {data['path']}" + ("" if data["enabled"] else "  (telemetry is off)"))
    if start is not None:
        out(f"Since    {data['since']}")
    if principal is not None:
        out(f"Principal {principal}")
    if data.get("badLines"):
        out(f"Skipped  {data['badLines']} unreadable lines")
    by_event: dict[str, dict[str, Any]] = data["byEvent"]
    if not by_event:
        out("")
        out("No events recorded" + (" in that period." if start is not None else " yet."))
        return EXIT_OK
    header = ("Event", "Count", "p50 ms", "p95 ms", "Hit rate", "Avg hits")
    rows = [header] + [
        (name, str(e["count"]), _fmt(e["p50Ms"]), _fmt(e["p95Ms"]), _fmt(e["hitRate"], "%"),
         _fmt(e["avgHits"]))
        for name, e in by_event.items()
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    out("")
    for row in rows:
        cells = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)]
        out("  ".join(cells).rstrip())
    inj = data["injection"]
    if inj.get("turns"):
        out("")
        out(f"Injection  {inj['injectedTurns']} of {inj['turns']} turns "
            f"({_fmt(inj['injectionRate'], '%')}); {_fmt(inj['avgTokens'])} tokens per turn "
            f"on average; {inj['deadlineHits']} hit the deadline")
    return EXIT_OK
