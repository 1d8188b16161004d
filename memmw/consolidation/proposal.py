"""A model's proposed edits: parsed from its reply and applied to the target files' lines.

Applying is pure (text in, lines out): nothing here reads or writes a file. What a
model may ask for:

* ``add``: a new entry, appended, citing its sources;
* ``update``: the entry at ``line`` gets the newer value first, with its sources, and
  keeps the older value on the same line, struck through and dated
  (``- <newer> (source: ...) ~~<older>~~ (superseded DAY)``): latest wins, history stays
  searchable for "what was it before" and never outranks the current value;
* ``supersede``: the entry at ``line`` is no longer true: struck through with a dated,
  cited reason (``memmw forget``'s retraction, which search then skips);
* ``merge``: duplicates at ``lines``: the first is kept (or ``text`` is appended as the
  merged entry) and the others are struck through, pointing at the one kept.

Models also answer with lossy shapes (``rewrite`` of a whole file, ``edit`` of a line in
place, ``remove``); they are applied as asked so that the gates
(:mod:`memmw.consolidation.gates`) judge the text that would be written, whatever its
origin.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memmw.consolidation.entries import Citation, citations_in, split_history
from memmw.notes.syntax import retract_line
from memmw.redaction import redact_secrets
from memmw.text.lines import split_lines

OPS = ("add", "update", "supersede", "merge", "rewrite", "edit", "remove")
_JSON_BLOCK = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.DOTALL)


class ProposalError(ValueError):
    """The model's reply is not a usable proposal (named gate ``proposal``)."""


@dataclass(frozen=True)
class Source:
    """A cited source line and, optionally, the text the model quoted from it."""

    citation: Citation
    quote: str | None = None


@dataclass(frozen=True)
class Edit:
    """One proposed edit of a target file."""

    op: str
    file: str
    text: str | None = None
    line: int | None = None
    lines: tuple[int, ...] = ()
    reason: str = ""
    sources: tuple[Source, ...] = ()


@dataclass
class Proposed:
    """A target file before and after the proposal (lines without terminators)."""

    target: str
    prior: str
    lines: list[str]
    #: Lines added or changed by the proposal (1-based, in ``lines``).
    touched: set[int] = field(default_factory=set)

    @property
    def prior_lines(self) -> list[str]:
        """The target's lines before the run."""
        return split_lines(self.prior)


def _source(raw: Any) -> Source:
    if isinstance(raw, str):
        cites = citations_in(raw)
        if len(cites) != 1:
            raise ProposalError(f"a source must be one path#Lnn citation; got {raw!r}")
        return Source(cites[0])
    if isinstance(raw, Mapping):
        path, line = raw.get("path"), raw.get("line")
        if not isinstance(path, str) or isinstance(line, bool) or not isinstance(line, int):
            cites = citations_in(str(raw.get("citation", "")))
            if len(cites) != 1:
                raise ProposalError(f"a source needs a path and a line; got {dict(raw)!r}")
            cite = cites[0]
        else:
            end = raw.get("end_line", line)
            end = end if isinstance(end, int) and not isinstance(end, bool) else line
            cite = Citation(path.strip().removeprefix("./"), line, max(line, end))
        quote = raw.get("quote")
        return Source(cite, quote if isinstance(quote, str) and quote.strip() else None)
    raise ProposalError(f"a source must be a citation string or an object; got {raw!r}")


def parse_proposal(text: str, targets: Sequence[str]) -> list[Edit]:
    """The edits in a model's reply (JSON, bare or in a fenced block).

    Raises:
        ProposalError: no JSON object, an unknown op or file, or a malformed edit.
    """
    raw = text.strip()
    block = _JSON_BLOCK.search(raw)
    if block:
        raw = block.group(1)
    elif not raw.startswith("{"):
        start, end = raw.find("{"), raw.rfind("}")
        raw = raw[start : end + 1] if 0 <= start < end else raw
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ProposalError(f"the reply is not a JSON object ({exc.msg})") from None
    if not isinstance(data, Mapping) or not isinstance(data.get("edits", []), list):
        raise ProposalError('the reply must be {"edits": [...]}')
    out: list[Edit] = []
    for i, item in enumerate(data.get("edits", [])):
        if not isinstance(item, Mapping):
            raise ProposalError(f"edit {i} is not an object")
        op = str(item.get("op", "")).strip().lower()
        if op not in OPS:
            raise ProposalError(f"edit {i}: unknown op {op!r} (one of {', '.join(OPS[:4])})")
        file = str(item.get("file", targets[0] if targets else "")).strip()
        if file not in targets:
            raise ProposalError(f"edit {i}: {file!r} is not a consolidation target ({', '.join(targets)})")
        line = item.get("line")
        if line is not None and (isinstance(line, bool) or not isinstance(line, int)):
            raise ProposalError(f"edit {i}: line must be an integer")
        lines = item.get("lines") or []
        if not isinstance(lines, list) or not all(
            isinstance(n, int) and not isinstance(n, bool) for n in lines
        ):
            raise ProposalError(f"edit {i}: lines must be a list of integers")
        value = item.get("text")
        if value is not None and not isinstance(value, str):
            raise ProposalError(f"edit {i}: text must be a string")
        sources = item.get("sources") or []
        if not isinstance(sources, list):
            raise ProposalError(f"edit {i}: sources must be a list")
        out.append(
            Edit(
                op=op,
                file=file,
                text=value,
                line=line,
                lines=tuple(lines),
                reason=str(item.get("reason", "") or ""),
                sources=tuple(_source(s) for s in sources),
            )
        )
    return out


def _one_line(text: str | None, what: str) -> str:
    if text is None or not text.strip():
        raise ProposalError(f"{what} needs text")
    if "\n" in text or "\r" in text:
        raise ProposalError(f"{what}: an entry is one line")
    # Written from a model's reply: the one redaction pass for conversation text.
    return redact_secrets(" ".join(text.split()))


def _cites(edit: Edit) -> str:
    return "; ".join(str(s.citation) for s in edit.sources)


def _entry(text: str, edit: Edit) -> str:
    body = text[2:] if text.startswith("- ") else text
    cites = _cites(edit)
    return f"- {body} (source: {cites})" if cites else f"- {body}"


def apply_edits(priors: Mapping[str, str], edits: Sequence[Edit], *, day: str) -> dict[str, Proposed]:
    """The target files' lines after ``edits`` (pure; only files an edit names are listed).

    Raises:
        ProposalError: an edit names a line that is not there or cannot be struck through.
    """
    out: dict[str, Proposed] = {}

    def target(name: str) -> Proposed:
        if name not in out:
            out[name] = Proposed(name, priors.get(name, ""), split_lines(priors.get(name, "")))
        return out[name]

    def check_line(p: Proposed, n: int | None, what: str) -> int:
        if n is None or not 1 <= n <= len(p.lines):
            raise ProposalError(f"{what}: {p.target} has no line {n}")
        return n

    def strike(p: Proposed, n: int, reason: str, what: str) -> None:
        try:
            p.lines[n - 1] = retract_line(p.lines[n - 1], day=day, reason=redact_secrets(reason))
        except ValueError as exc:
            raise ProposalError(f"{what}: {p.target}#L{n}: {exc}") from None
        p.touched.add(n)

    def append(p: Proposed, line: str) -> int:
        p.lines.append(line)
        p.touched.add(len(p.lines))
        return len(p.lines)

    for i, edit in enumerate(edits):
        what = f"edit {i} ({edit.op})"
        p = target(edit.file)
        if edit.op == "add":
            append(p, _entry(_one_line(edit.text, what), edit))
        elif edit.op == "update":
            n = check_line(p, edit.line, what)
            parts = split_history(p.lines[n - 1])
            if parts is None or not parts[1].strip():
                raise ProposalError(f"{what}: {p.target}#L{n} is not a live list entry")
            prefix, current, history = parts
            newer = _entry(_one_line(edit.text, what), edit)[2:]
            # Latest first, history kept on the line: the older value struck through, dated.
            p.lines[n - 1] = f"{prefix}{newer} ~~{current.strip()}~~ (superseded {day}){history}"
            p.touched.add(n)
        elif edit.op == "supersede":
            n = check_line(p, edit.line, what)
            reason = " ".join((edit.reason or "superseded").split())
            cites = _cites(edit)
            strike(p, n, f"{reason}; {cites}" if cites else reason, what)
        elif edit.op == "merge":
            numbers = [check_line(p, n, what) for n in dict.fromkeys(edit.lines)]
            if len(numbers) < 2:
                raise ProposalError(f"{what}: a merge needs two or more lines")
            if edit.text is not None:
                merged = append(p, _entry(_one_line(edit.text, what), edit))
                drop = numbers
            else:
                merged, drop = numbers[0], numbers[1:]
            for n in drop:
                strike(p, n, f"merged into {p.target}#L{merged}", what)
        elif edit.op == "rewrite":
            new_lines = split_lines(redact_secrets(edit.text or ""))
            old = p.lines
            p.lines = new_lines
            p.touched.update(
                n for n in range(1, len(new_lines) + 1)
                if n > len(old) or old[n - 1] != new_lines[n - 1]
            )
        elif edit.op == "edit":
            n = check_line(p, edit.line, what)
            p.lines[n - 1] = _one_line(edit.text, what)
            p.touched.add(n)
        else:  # remove
            n = check_line(p, edit.line, what)
            del p.lines[n - 1]
            p.touched = {m - 1 if m > n else m for m in p.touched if m != n}
    return out


def quotes_of(edits: Sequence[Edit]) -> dict[tuple[str, int], str]:
    """``(path, line) -> quote`` of every quoted source (each must match its line)."""
    return {
        (s.citation.path, s.citation.start): s.quote
        for e in edits
        for s in e.sources
        if s.quote is not None
    }
