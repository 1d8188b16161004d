"""Telemetry: a JSONL log of search, fact-search and injection latency and hits, and its summary."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from memmw.config import Source
from memmw.redaction import redact_secrets

log = logging.getLogger(__name__)

#: The log is rotated to ``<name>.1`` past this size, so it never grows without bound.
MAX_BYTES = 5 * 1024 * 1024


def telemetry_path(state_dir: Path, agent_id: str) -> Path:
    """``<state_dir>/telemetry/<agent_id>.jsonl``."""
    return Path(state_dir) / "telemetry" / f"{agent_id}.jsonl"


class TelemetryLog:
    """Appends one JSON object per event; failures are logged, never raised.

    Args:
        path: The JSONL file.
        enabled: False makes :meth:`record` a no-op.
    """

    def __init__(self, path: Path, *, enabled: bool = True) -> None:
        self.path = Path(path)
        self.enabled = enabled
        self._lock = threading.Lock()

    def _open(self) -> IO[str]:
        """The log opened for appending; its folder is made only when missing (a
        ``mkdir`` that finds the folder costs more than the append itself)."""
        try:
            return open(self.path, "a", encoding="utf-8")
        except FileNotFoundError:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            return open(self.path, "a", encoding="utf-8")

    def record(self, event: str, **fields: Any) -> None:
        """Append ``{"ts": ..., "event": event, **fields}``."""
        if not self.enabled:
            return
        # Text fields pass the one redaction pass: an error or label never carries a key.
        # ``q`` is memmw's own hash of a query (``query_key``), never text: sending it
        # through cost a fresh process's first search the import of the secret scanner.
        clean = {
            k: redact_secrets(v) if isinstance(v, str) and k not in OWN_KEYS else v
            for k, v in fields.items()
        }
        line = json.dumps({"ts": round(time.time(), 3), "event": event, **clean}, default=str)
        try:
            with self._lock:
                fh = self._open()
                try:
                    if os.fstat(fh.fileno()).st_size > MAX_BYTES:
                        fh.close()
                        os.replace(self.path, self.path.with_name(self.path.name + ".1"))
                        fh = self._open()
                    fh.write(line + "\n")
                finally:
                    fh.close()
        except OSError as exc:
            # A read-only or full state folder: say so once, then stop trying.
            log.warning("telemetry disabled: cannot write %s (%s)", self.path, type(exc).__name__)
            self.enabled = False


#: Fields memmw computes itself from no text a user wrote verbatim (a query hash): they
#: skip the redaction pass.
OWN_KEYS = frozenset({"q"})


def query_key(query: str) -> str:
    """A short hash of a query (case and spacing folded): distinct queries without their text."""
    folded = " ".join(query.casefold().split())
    return hashlib.sha256(folded.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def recall_fields(hits: Iterable[Any], query: str) -> dict[str, Any]:
    """What a search event records about its recall: the query's key and the cited lines.

    ``cites`` holds ``path#Lstart-Lend`` of each memory-file hit (transcripts are left
    out), prefixed ``<namespace>:`` when the hit names the index it came from (shared
    namespaces): consolidation counts how often, by how many distinct queries and how
    recently each entry was recalled.
    """
    cites = [
        (f"{h.namespace}:" if getattr(h, "namespace", None) else "")
        + f"{h.path}#L{h.start_line}-L{h.end_line}"
        for h in hits
        if getattr(h, "source", Source.MEMORY) == Source.MEMORY
    ]
    return {"q": query_key(query), "cites": cites}


def iter_events(path: Path | str, *, event: str | None = None) -> Iterator[dict[str, Any]]:
    """The events of a telemetry log, its rotated ``.1`` part first; bad lines skipped."""
    path = Path(path)
    for part in (path.with_name(path.name + ".1"), path):
        try:
            fh = open(part, encoding="utf-8", errors="replace")  # noqa: SIM115 - closed below
        except OSError:
            continue
        with fh:
            for raw in fh:
                if event is not None and f'"event": "{event}"' not in raw:
                    continue  # cheap filter before the JSON parse
                try:
                    item = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(item, dict) and (event is None or item.get("event") == event):
                    yield item


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    idx = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return round(ordered[idx], 3)


def summarize_telemetry(
    path: Path | str, *, since: float | None = None, principal: str | None = None
) -> dict[str, Any]:
    """Summarise a telemetry log (what ``memmw stats`` prints).

    With ``principal``, only the events of that principal's sessions count (the
    ``inject`` events of its sessions carry ``principal``; ``owner`` selects the owner's).

    Returns:
        ``{"path", "events", "by_event": {event: {"count", "p50_ms", "p95_ms",
        "hit_rate", "avg_hits", ...}}, "injection": {"turns", "injected_turns",
        "injection_rate", "avg_tokens", "avg_facts"}}``; unreadable lines are counted in
        ``bad_lines`` and skipped.
    """
    path = Path(path)
    by_event: dict[str, list[dict[str, Any]]] = {}
    bad = 0
    if path.exists():
        with open(path, encoding="utf-8", errors="replace") as fh:
            for raw in fh:
                try:
                    item = json.loads(raw)
                except ValueError:
                    bad += 1
                    continue
                if not isinstance(item, dict) or "event" not in item:
                    bad += 1
                    continue
                if since is not None and float(item.get("ts", 0)) < since:
                    continue
                if principal is not None and item.get("principal", "owner") != principal:
                    continue
                by_event.setdefault(str(item["event"]), []).append(item)
    summary: dict[str, Any] = {"path": str(path), "events": 0, "bad_lines": bad, "by_event": {}}
    for event, items in sorted(by_event.items()):
        ms = [float(i["ms"]) for i in items if isinstance(i.get("ms"), (int, float))]
        hits = [int(i.get("hits", 0)) for i in items]
        summary["events"] += len(items)
        summary["by_event"][event] = {
            "count": len(items),
            "p50_ms": _percentile(ms, 0.5),
            "p95_ms": _percentile(ms, 0.95),
            "hit_rate": round(sum(1 for h in hits if h > 0) / len(items), 4),
            "avg_hits": round(sum(hits) / len(items), 3),
        }
    turns = by_event.get("inject", [])
    injected = [t for t in turns if int(t.get("hits", 0)) > 0]
    summary["injection"] = {
        "turns": len(turns),
        "injected_turns": len(injected),
        "injection_rate": round(len(injected) / len(turns), 4) if turns else None,
        "avg_tokens": round(sum(int(t.get("tokens", 0)) for t in turns) / len(turns), 1)
        if turns
        else None,
        "deadline_hits": sum(1 for t in turns if t.get("deadline")),
    }
    return summary
