"""The hard gates a consolidation passes before anything is written (one module, each named).

Every gate judges the text that would be written (:class:`~memmw.consolidation.proposal.
Proposed`), not the model's intent, so a lossy or forged reply fails the same way a
buggy applier would:

* ``keep``: every prior line is still there at its line number, unchanged, struck
  through as history (the old text kept, dated, with a reason that cites), or updated in
  place (a cited newer value first, the old value kept on the line, struck through and
  dated); new entries are only appended; at most ``max_change_fraction`` of the live
  entries change.
* ``citations``: every added or changed line cites a source, and every citation resolves
  to a non-blank line of a memory file (in a target, of the text being written), holding
  the text the model quoted from it.
* ``budget``: each target fits its bootstrap budget (``MEMORY.md``: ``max_chars_per_file``;
  ``active-context.md``: ``active_context_max_chars``).
* ``privacy``: no text moves into a file that someone may read who may not read its
  source (viewers: the direct session, group sessions, each group named), by citation or
  by copying a line the model was shown.
* ``provenance``: nothing from an untrusted file (group-written notes, extra paths,
  transcripts) is promoted, by citation or by copy.
* ``unchanged``: each target still is, byte for byte, what the run read at its start
  (checked again under the note's lock when writing).

A failed gate writes nothing and names itself.
"""

from __future__ import annotations

import hashlib
import math
import os
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from memmw.consolidation.entries import (
    citations_in,
    is_entry,
    is_retracted,
    normalized,
    retraction_of,
    updated_in_place,
)
from memmw.consolidation.proposal import Proposed
from memmw.text.analysis import utf16_len
from memmw.text.lines import split_lines
from memmw.workspace.access import SessionAccess
from memmw.workspace.layout import group_scope_of, is_memory_path

#: The gates, in the order they run.
GATES = ("keep", "citations", "budget", "privacy", "provenance", "unchanged")
#: Shortest copied text the privacy and provenance gates look for (characters, folded).
MIN_COPY_CHARS = 16


@dataclass(frozen=True)
class GateResult:
    """One gate's verdict."""

    gate: str
    passed: bool
    detail: str = ""


@dataclass(frozen=True)
class ShownLine:
    """A source line the model was shown (what a copy without a citation is compared to)."""

    path: str
    line: int
    text: str


@dataclass
class GateInput:
    """Everything the gates judge.

    Attributes:
        workspace: The workspace root.
        proposed: Each target's lines after the proposal.
        start_sha: sha256 of each target's bytes when the run started.
        budgets: Character budget of each target.
        max_change_fraction: Share of a target's live entries one run may change.
        quotes: ``(path, line) -> text`` the model quoted from each source.
        shown: Source lines the model was shown.
        access: The owner's (direct) privacy gate; viewers are derived from it.
    """

    workspace: Path
    proposed: Mapping[str, Proposed]
    start_sha: Mapping[str, str]
    budgets: Mapping[str, int]
    max_change_fraction: float
    quotes: Mapping[tuple[str, int], str] = field(default_factory=dict)
    shown: Sequence[ShownLine] = ()
    access: SessionAccess | None = None


def file_sha(path: Path) -> str:
    """sha256 of a file's bytes (of no bytes when it does not exist)."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except FileNotFoundError:
        return hashlib.sha256(b"").hexdigest()


def _fold(text: str) -> str:
    return " ".join(text.casefold().replace("~~", "").split())


# -- keep -------------------------------------------------------------------------------
def gate_keep(data: GateInput) -> GateResult:
    for name, p in data.proposed.items():
        prior = p.prior_lines
        if len(p.lines) < len(prior):
            return GateResult("keep", False, f"{name}: {len(prior) - len(p.lines)} line(s) dropped")
        live = sum(1 for line in prior if is_entry(line) and not is_retracted(line))
        changed = 0
        for n, old in enumerate(prior, 1):
            new = p.lines[n - 1]
            if new == old:
                continue
            if not is_entry(old) or is_retracted(old):
                return GateResult("keep", False, f"{name}#L{n}: a line that is not a live entry was changed")
            reason = retraction_of(old, new) or updated_in_place(old, new)
            if reason is None:
                return GateResult(
                    "keep",
                    False,
                    f"{name}#L{n}: the entry was changed or dropped instead of struck through "
                    "with its text kept",
                )
            if not citations_in(reason):
                return GateResult("keep", False, f"{name}#L{n}: superseded without a cited reason")
            changed += 1
        allowed = max(1, math.floor(data.max_change_fraction * live))
        if changed > allowed:
            return GateResult(
                "keep",
                False,
                f"{name}: {changed} of {live} entries superseded or merged; at most {allowed} "
                f"per run (max_change_fraction {data.max_change_fraction:g})",
            )
    return GateResult("keep", True)


# -- citations --------------------------------------------------------------------------
class _Lines:
    """Lines of cited files: targets as proposed, other memory files from disk."""

    def __init__(self, data: GateInput) -> None:
        self.data = data
        self.cache: dict[str, list[str] | None] = {
            name: p.lines for name, p in data.proposed.items()
        }

    def of(self, rel: str) -> list[str] | None:
        if rel not in self.cache:
            self.cache[rel] = self._read(rel)
        return self.cache[rel]

    def _read(self, rel: str) -> list[str] | None:
        if rel.startswith(("/", "../")) or "/../" in rel or not is_memory_path(rel):
            return None
        path = self.data.workspace / rel
        try:
            if not stat.S_ISREG(os.lstat(path).st_mode):
                return None
            return split_lines(path.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            return None


def _touched(data: GateInput) -> list[tuple[str, int, str]]:
    return [
        (name, n, p.lines[n - 1])
        for name, p in data.proposed.items()
        for n in sorted(p.touched)
        if 1 <= n <= len(p.lines)
    ]


def gate_citations(data: GateInput) -> GateResult:
    files = _Lines(data)
    for name, n, line in _touched(data):
        if not line.strip():
            continue
        cites = citations_in(line)
        if not cites:
            return GateResult("citations", False, f"{name}#L{n}: an added or changed entry cites no source")
        for cite in cites:
            lines = files.of(cite.path)
            if lines is None:
                return GateResult("citations", False, f"{name}#L{n}: {cite} is not a memory file in the workspace")
            if not 1 <= cite.start <= cite.end <= len(lines):
                return GateResult(
                    "citations", False, f"{name}#L{n}: {cite} names a line past the end ({len(lines)} lines)"
                )
            if cite.path == name and cite.start <= n <= cite.end:
                return GateResult("citations", False, f"{name}#L{n}: {cite} cites itself")
            cited = lines[cite.start - 1 : cite.end]
            if not any(is_entry(x) for x in cited):
                return GateResult("citations", False, f"{name}#L{n}: {cite} is a blank or heading line")
            quote = data.quotes.get((cite.path, cite.start))
            if quote is not None and _fold(quote) not in _fold(" ".join(cited)):
                return GateResult(
                    "citations", False, f"{name}#L{n}: {cite} does not hold the quoted text {quote!r}"
                )
    return GateResult("citations", True)


# -- budget -----------------------------------------------------------------------------
def gate_budget(data: GateInput) -> GateResult:
    for name, p in data.proposed.items():
        budget = data.budgets.get(name)
        if budget is None:
            continue
        size = utf16_len("\n".join(p.lines).strip("\n"))
        if size > budget:
            return GateResult(
                "budget", False, f"{name} would be {size} characters; its bootstrap budget is {budget}"
            )
    return GateResult("budget", True)


# -- privacy and provenance ---------------------------------------------------------------
def _viewers(data: GateInput, paths: list[str]) -> list[SessionAccess]:
    base = data.access or SessionAccess(workspace=data.workspace, private=True)
    scopes = {s for s in (group_scope_of(p) for p in paths) if s}
    viewers = [
        base,
        SessionAccess(workspace=base.workspace, extra_paths=base.extra_paths, private=False),
    ]
    viewers += [
        SessionAccess(workspace=base.workspace, extra_paths=base.extra_paths, private=False, scope=s)
        for s in sorted(scopes)
    ]
    return viewers


def _copied(line: str, shown: Sequence[ShownLine], bad: Callable[[ShownLine], bool]) -> ShownLine | None:
    """The shown line (one ``bad`` says must not move) whose text ``line`` copies, if any."""
    body = _fold(normalized(line.split(" (source:")[0]))
    if len(body) < MIN_COPY_CHARS:
        return None
    for s in shown:
        text = _fold(normalized(s.text))
        if len(text) >= MIN_COPY_CHARS and (body in text or text in body) and bad(s):
            return s
    return None


def gate_privacy(data: GateInput) -> GateResult:
    touched = _touched(data)
    paths = [name for name, _n, _l in touched] + [
        c.path for _name, _n, line in touched for c in citations_in(line)
    ] + [s.path for s in data.shown]
    viewers = _viewers(data, paths)

    def leaks(source: str, target: str) -> SessionAccess | None:
        for v in viewers:
            if v.may_read(target) and not v.may_read(source):
                return v
        return None

    for name, n, line in touched:
        for cite in citations_in(line):
            v = leaks(cite.path, name)
            if v is not None:
                who = "the direct session" if v.private else f"group sessions ({v.scope or 'any'})"
                return GateResult(
                    "privacy",
                    False,
                    f"{name}#L{n}: {cite} is not readable by {who}, who may read {name}",
                )
        def moves(shown: ShownLine, target: str = name) -> bool:
            return leaks(shown.path, target) is not None

        copy = _copied(line, data.shown, moves)
        if copy is not None:
            return GateResult(
                "privacy", False, f"{name}#L{n}: copies {copy.path}#L{copy.line}, which readers of {name} may not see"
            )
    return GateResult("privacy", True)


def gate_provenance(data: GateInput) -> GateResult:
    base = data.access or SessionAccess(workspace=data.workspace, private=True)
    for name, n, line in _touched(data):
        for cite in citations_in(line):
            if cite.path in data.proposed:
                continue  # a target's own line (merged into, superseded by): owner-written
            if not base.check(cite.path).trusted:
                return GateResult(
                    "provenance",
                    False,
                    f"{name}#L{n}: {cite} is untrusted (group-written, imported or a transcript)",
                )
        copy = _copied(line, data.shown, lambda s: not base.check(s.path).trusted)
        if copy is not None:
            return GateResult(
                "provenance", False, f"{name}#L{n}: copies untrusted {copy.path}#L{copy.line}"
            )
    return GateResult("provenance", True)


# -- unchanged --------------------------------------------------------------------------
def gate_unchanged(data: GateInput) -> GateResult:
    for name in data.proposed:
        now = file_sha(data.workspace / name)
        if now != data.start_sha.get(name):
            return GateResult(
                "unchanged", False, f"{name} was edited by someone else since the run started"
            )
    return GateResult("unchanged", True)


_GATES: dict[str, Callable[[GateInput], GateResult]] = {
    "keep": gate_keep,
    "citations": gate_citations,
    "budget": gate_budget,
    "privacy": gate_privacy,
    "provenance": gate_provenance,
    "unchanged": gate_unchanged,
}


def run_gates(data: GateInput) -> list[GateResult]:
    """Every gate's verdict, in :data:`GATES` order (all run, so a report lists them all)."""
    return [_GATES[name](data) for name in GATES]


def first_failure(results: Sequence[GateResult]) -> GateResult | None:
    """The first failed gate, or None when all passed."""
    return next((r for r in results if not r.passed), None)
