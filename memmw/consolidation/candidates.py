"""Promotion candidates without a model: entries recalled often, by distinct queries, lately.

The evidence is what memmw already records: every search appends the lines it showed
(``cites``) and a key of its query (``q``) to the telemetry log
(:func:`memmw.graph.telemetry.recall_fields`), and fact lookups raise the activation of
the graph entries they touch. An entry of a daily note or a session archive is a
candidate when it was recalled at least ``min_recalls`` times by at least
``min_queries`` distinct queries, the last time within ``recency_days``, holds a fact or
a decision, comes from a trusted (owner or agent) note, is not already in a target file,
and scores at least ``min_score``. Every entry gets its reasons, kept or not.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memmw.config import ConsolidationConfig
from memmw.consolidation.entries import (
    citations_in,
    is_entry,
    is_retracted,
    kind_of,
    normalized,
)
from memmw.graph.telemetry import iter_events
from memmw.text.lines import split_lines
from memmw.workspace.access import SessionAccess
from memmw.workspace.files import is_ignored_dir
from memmw.workspace.layout import MEMORY_DIR, file_date

DAY_S = 86_400.0
#: Weights of the score's parts (they sum to 1).
WEIGHTS = {"frequency": 0.3, "diversity": 0.3, "recency": 0.2, "content": 0.1, "activation": 0.1}
#: The conditions of a candidate, in the order its reasons list them.
CONDITIONS = ("recalls", "queries", "recency", "content", "trusted", "promoted", "score")
#: Half-life of a recall's recency (days).
RECENCY_HALF_LIFE_DAYS = 14.0


@dataclass
class Recall:
    """How an entry was recalled: times shown, distinct query keys, last time (epoch s)."""

    count: int = 0
    queries: set[str] = field(default_factory=set)
    last: float = 0.0


@dataclass(frozen=True)
class _Evidence:
    """What a candidate's reasons are written from (formatted only when asked for)."""

    days: float
    trusted: bool
    present: bool
    parts: Mapping[str, float]
    config: ConsolidationConfig

    def reasons(self, c: Candidate) -> tuple[str, ...]:
        cfg = self.config
        days = self.days
        checks = [
            (c.recalls >= cfg.min_recalls, f"recalled {c.recalls}x (needs {cfg.min_recalls})"),
            (
                c.queries >= cfg.min_queries,
                f"by {c.queries} distinct queries (needs {cfg.min_queries})",
            ),
            (
                days <= cfg.recency_days,
                "never recalled"
                if math.isinf(days)
                else f"last recalled {days:.1f} days ago (within {cfg.recency_days:g})",
            ),
            (
                c.kind in ("fact", "decision"),
                f"holds a {c.kind}" if c.kind != "other" else "holds no fact or decision",
            ),
            (
                self.trusted,
                "trusted note"
                if self.trusted
                else "untrusted (group-written or imported): never promoted",
            ),
            (
                not self.present,
                "already in a target file" if self.present else "not yet in the target files",
            ),
            (
                c.score >= cfg.min_score,
                f"score {c.score:.2f} (needs {cfg.min_score:g}; "
                + ", ".join(f"{k} {v:.2f}" for k, v in self.parts.items())
                + ")",
            ),
        ]
        return tuple(("ok: " if passed else "no: ") + why for passed, why in checks)


@dataclass(frozen=True)
class Candidate:
    """One entry of a daily note or archive, judged for promotion.

    Attributes:
        path: The note (workspace-relative).
        line: The entry's line (1-based).
        text: The entry's text.
        kind: ``decision``, ``fact`` or ``other``.
        recalls: Times a search showed it.
        queries: Distinct queries that showed it.
        last_recall: Epoch seconds of the last recall (0 = never).
        score: 0..1.
        candidate: True when every condition holds.
        reasons: Why it is or is not a candidate, one condition each.
    """

    path: str
    line: int
    text: str
    kind: str
    recalls: int
    queries: int
    last_recall: float
    score: float
    candidate: bool
    evidence: _Evidence = field(repr=False, compare=False)

    @property
    def reasons(self) -> tuple[str, ...]:
        """Why it is or is not a candidate: one ``ok:``/``no:`` line per condition."""
        return self.evidence.reasons(self)

    @property
    def citation(self) -> str:
        """``path#Lnn``."""
        return f"{self.path}#L{self.line}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``memmw consolidate --dry-run --json``)."""
        return {
            "citation": self.citation,
            "text": self.text,
            "kind": self.kind,
            "recalls": self.recalls,
            "queries": self.queries,
            "last_recall": round(self.last_recall, 3) if self.last_recall else None,
            "score": round(self.score, 4),
            "candidate": self.candidate,
            "reasons": list(self.reasons),
        }


@dataclass(frozen=True)
class CandidateReport:
    """Every judged entry (recalled entries first), and how many were never recalled."""

    entries: tuple[Candidate, ...]
    notes: int
    never_recalled: int
    #: Condition (:data:`CONDITIONS`) -> judged entries that fail it.
    failed: Mapping[str, int] = field(default_factory=dict)

    @property
    def candidates(self) -> list[Candidate]:
        """The entries that qualify, best first."""
        return [c for c in self.entries if c.candidate]


def recalls_from_telemetry(
    path: Path, *, agent_id: str | None = None, since: float | None = None
) -> dict[str, list[tuple[int, int, str, float]]]:
    """``path -> [(start, end, query key, ts)]`` of every recall in the telemetry log."""
    out: dict[str, list[tuple[int, int, str, float]]] = {}
    for event in iter_events(path, event="search"):
        cites = event.get("cites")
        if not isinstance(cites, list):
            continue
        ts = float(event.get("ts", 0) or 0)
        if since is not None and ts < since:
            continue
        q = str(event.get("q", ""))
        for cite in cites:
            if not isinstance(cite, str):
                continue
            ns, sep, rest = cite.partition(":")
            if sep and "#" not in ns:  # another namespace's hit: not this workspace's note
                if ns != agent_id:
                    continue
                cite = rest
            rel, _, lines = cite.rpartition("#L")
            a, _, b = lines.partition("-L")
            try:
                start, end = int(a), int(b or a)
            except ValueError:
                continue
            out.setdefault(rel, []).append((start, end, q, ts))
    return out


def dated_note_paths(workspace: Path) -> list[str]:
    """Every dated note under ``memory/`` (daily notes, archives, group notes), sorted."""
    out: list[str] = []
    stack = [MEMORY_DIR]
    while stack:
        rel_dir = stack.pop()
        try:
            items = list(os.scandir(os.path.join(workspace, rel_dir)))
        except OSError:
            continue
        for item in items:
            if item.is_symlink():
                continue
            rel = f"{rel_dir}/{item.name}"
            if item.is_dir():
                if not is_ignored_dir(item.name):
                    stack.append(rel)
            elif (
                item.name.endswith(".md")
                and item.name[:1].isdigit()
                and item.is_file()
                and file_date(rel) is not None
            ):
                out.append(rel)
    return sorted(out)


def _score(recall: Recall, kind: str, activation: float, now: float) -> tuple[float, dict[str, float]]:
    days = (now - recall.last) / DAY_S if recall.last else math.inf
    parts = {
        "frequency": 1.0 - math.exp(-recall.count / 3.0),
        "diversity": min(1.0, len(recall.queries) / 3.0),
        "recency": 0.0 if math.isinf(days) else 0.5 ** (max(0.0, days) / RECENCY_HALF_LIFE_DAYS),
        "content": {"decision": 1.0, "fact": 0.8}.get(kind, 0.0),
        "activation": min(1.0, max(0.0, activation - 1.0) / 2.0),
    }
    return sum(WEIGHTS[k] * v for k, v in parts.items()), parts


def find_candidates(
    workspace: Path,
    telemetry: Path,
    config: ConsolidationConfig,
    *,
    agent_id: str | None = None,
    promoted: Iterable[str] = (),
    activation: Mapping[tuple[str, int], float] | None = None,
    access: SessionAccess | None = None,
    now: float | None = None,
    include_unrecalled: bool = False,
) -> CandidateReport:
    """Judge every entry of the dated notes for promotion.

    Args:
        workspace: The workspace root.
        telemetry: The agent's telemetry log.
        config: Thresholds.
        agent_id: This agent (its namespace's hits count, others' do not).
        promoted: Texts already in the target files (an entry found there is skipped).
        activation: ``(path, line) -> activation`` of graph entries (1.0 = untouched).
        access: The privacy gate deciding trust (default a direct session's).
        now: Epoch seconds (default the clock).
        include_unrecalled: Also list entries never recalled (else only counted).
    """
    workspace = Path(workspace)
    now = time.time() if now is None else now
    gate = access or SessionAccess(workspace=workspace, private=True)
    recalls = recalls_from_telemetry(telemetry, agent_id=agent_id)
    known = _Promoted(promoted)
    activation = activation or {}
    judged: list[Candidate] = []
    failed: dict[str, int] = {}
    never = 0
    paths = dated_note_paths(workspace)
    for rel in paths:
        verdict = gate.check(rel)
        if not verdict.readable:  # another person's or a group's notes: never judged,
            continue  # never shown to the model or in a dry run
        hits = recalls.get(rel, ())
        if not hits and not include_unrecalled:
            with contextlib.suppress(OSError):  # counted only: most notes were never recalled
                never += _count_entries(workspace / rel)
            continue
        try:
            text = (workspace / rel).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        lines = split_lines(text)
        by_line: dict[int, Recall] = {}
        for start, end, q, ts in hits:  # each hit credits every entry of its chunk
            for n in range(max(1, start), min(end, len(lines)) + 1):
                recall = by_line.get(n)
                if recall is None:
                    recall = by_line[n] = Recall()
                recall.count += 1
                recall.queries.add(q)
                if ts > recall.last:
                    recall.last = ts
        for n, line in enumerate(lines, 1):
            if not is_entry(line) or is_retracted(line):
                continue
            recall = by_line.get(n) or Recall()
            if recall.count == 0:
                never += 1
                if not include_unrecalled:
                    continue
            judged.append(
                _judge(rel, n, line, recall, verdict.trusted, known, activation, config, now, failed)
            )
    judged.sort(key=lambda c: (not c.candidate, -c.score, c.path, c.line))
    return CandidateReport(
        entries=tuple(judged), notes=len(paths), never_recalled=never, failed=failed
    )


class _Promoted:
    """The target files' entries: an entry is promoted when one cites it or holds its text."""

    def __init__(self, entries: Iterable[str]) -> None:
        entries = list(entries)
        # One haystack, entries apart: a substring search in C instead of one per entry.
        self.texts = "\x00".join(normalized(e) for e in entries)
        self.cites = {
            (c.path, n) for e in entries for c in citations_in(e) for n in range(c.start, c.end + 1)
        }

    def has(self, path: str, line: int, text: str) -> bool:
        folded = normalized(text)
        return (path, line) in self.cites or (bool(folded) and folded in self.texts)


def _count_entries(path: Path) -> int:
    with open(path, encoding="utf-8", errors="replace") as fh:
        return sum(1 for line in split_lines(fh.read()) if is_entry(line) and not is_retracted(line))


def _judge(
    rel: str,
    n: int,
    line: str,
    recall: Recall,
    trusted: bool,
    known: _Promoted,
    activation: Mapping[tuple[str, int], float],
    config: ConsolidationConfig,
    now: float,
    failed: dict[str, int],
) -> Candidate:
    kind = kind_of(line)
    present = known.has(rel, n, line)
    score, parts = _score(recall, kind, activation.get((rel, n), 1.0), now)
    days = (now - recall.last) / DAY_S if recall.last else math.inf
    checks = (
        recall.count >= config.min_recalls,
        len(recall.queries) >= config.min_queries,
        days <= config.recency_days,
        kind in ("fact", "decision"),
        trusted,
        not present,
        score >= config.min_score,
    )
    ok = all(checks)
    if not ok:
        for name, passed in zip(CONDITIONS, checks, strict=True):
            if not passed:
                failed[name] = failed.get(name, 0) + 1
    return Candidate(
        path=rel,
        line=n,
        text=line.strip(),
        kind=kind,
        recalls=recall.count,
        queries=len(recall.queries),
        last_recall=recall.last,
        score=score,
        candidate=ok,
        evidence=_Evidence(days, trusted, present, parts, config),
    )
